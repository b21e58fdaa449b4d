"""Ids found backwards from the report channels.

What a report hook hands back at a channel's place (``return set(),
done_recving`` for ``finished_recving``) is request ids, whatever the code
calls them and wherever they came from: a transfer thread that reads ids off
the network (``request_id = msg[1]``) and collects them in
``self.done_requests`` is found from the hook that drains that set, never
from a seed. So the returned local is an id collection, and so is what it was
made of: a local it was copied or filtered from, the return value of the
helper it was taken from (``done = self.thread.get_and_clear_done()``), and
the ``self`` container that helper hands out (``done = self.done_requests;
self.done_requests = set(); return done``). Those containers are
request-keyed, and a parameter a function puts into one (``def
update_done_task(self, req_id): self.done_requests.add(req_id)``) is an id.
"""

from __future__ import annotations

from kvflowmap.facts import CallFact, ReturnFact
from kvflowmap.lifecycle.ids import IdState
from kvflowmap.lifecycle.view import FnView
from kvflowmap.model.calls import CallResolver

MAX_DEPTH = 6
_ADDS = frozenset({"add", "setitem", "append", "appendleft", "setdefault"})


def seed_report_sources(state: IdState, fns: dict[str, FnView], calls: CallResolver) -> None:
    """Mark the id collections and request-keyed containers the report
    hooks' returns come from (see the module docstring)."""
    for fn in fns.values():
        for ch in state.spec.channels:
            if fn.name not in ch.methods or (ch.element is None and not ch.keyword):
                continue  # the failed-blocks channel hands back block ids
            for r in fn.all_returns:
                local = _reported(r, ch.element, ch.keyword)
                if not local:
                    continue
                _feeders(state, calls, fn, local, ch.name)
                if local.endswith("()"):  # ``return set(), self.w.pop_done()``
                    _from_call(state, fns, calls, fn, local, r.line, 0)
                else:
                    _back(state, fns, calls, fn, local, 0)
    for fn in fns.values():
        _params_put_in(state, fn)


def _feeders(state: IdState, calls: CallResolver, fn: FnView, local: str,
             channel: str) -> None:
    """Record who feeds ``channel`` through ``local`` of the report hook
    ``fn``: the objects whose helpers it calls for it (``done =
    self.send_thread.get_done()``, or the returned call itself), else its
    own class."""
    asked = [local] if local.endswith("()") else [
        a.origin or a.value or "" for a in fn.all_assigns
        if a.target == local and (a.origin or a.value or "").endswith("()")]
    found: set[str] = set()
    for src in asked:
        obj = src[:-2].rpartition(".")[0]
        if obj and obj != "self":
            kinds = {v[1] for v in calls.values.eval(fn.ctx, obj) if v[0] == "inst"}
            # a declared base (``self.recv_thread: KVTransferThread``) says less
            # than the subclasses the code assigns
            found |= {k for k in kinds
                      if not any(k != o and k in calls.classes.mro(o) for o in kinds)}
    if not found and fn.cls:
        found.add(fn.cls)
    state.channel_classes.setdefault(channel, set()).update(found)


def _reported(r: ReturnFact, element: int | None, keyword: str | None) -> str | None:
    """The plain local a return hands back at the channel's place."""
    if keyword is not None and r.fields:
        text = next((v for k, v in r.fields if k == keyword), None)
    elif element is not None and r.elements is not None:
        text = r.elements[element] if element < len(r.elements) else None
        origin = r.origins[element] if element < len(r.origins) else None
        text = origin or text
    else:
        return None
    if text and text.endswith("()") and text[:-2].replace(".", "_").isidentifier():
        return text
    return text if text and text.isidentifier() and text != "None" else None


def _feeds(state: IdState, attr: str) -> None:
    """``self.<attr>`` is handed back by a report hook: request-keyed."""
    state.report_fed.add(attr)
    state.keyed_attrs.add(attr)


def _back(state: IdState, fns: dict[str, FnView], calls: CallResolver, fn: FnView,
          local: str, depth: int) -> None:
    """``local`` of ``fn`` holds ids: so does what it was made of."""
    mine = state.of(fn.fqn)
    if depth > MAX_DEPTH or local in mine.ids:
        return
    if local in mine.colls and depth > 0:
        return
    mine.colls.add(local)
    state.report_locals.add((fn.fqn, local))
    for a in fn.all_assigns:
        if a.target != local or a.aug or a.position is not None:
            continue
        src = a.origin or a.value or ""
        if src.startswith("self.") and src.count(".") == 1 and src[5:].isidentifier():
            _feeds(state, src[5:])
        elif src.isidentifier() and src != local:
            _back(state, fns, calls, fn, src, depth + 1)
        elif src.endswith("()"):
            _from_call(state, fns, calls, fn, src, a.line, depth)


def _from_call(state: IdState, fns: dict[str, FnView], calls: CallResolver, fn: FnView,
               src: str, line: int, depth: int) -> None:
    """The call ``src`` of ``fn`` at ``line`` (or a later line of its
    statement) returns ids: so does what its targets return."""
    call = min((c for c in fn.all_calls if c.line >= line and f"{c.callee}()" == src),
               key=lambda c: c.line, default=None)
    if call is None:
        return
    for target in _with_overrides(calls, call, [t.fqn for t in calls.resolve(fn.ctx, call)]):
        g = fns.get(target)
        if g is None:
            continue
        for r in g.all_returns:
            v = r.origins[0] if r.elements is None and r.origins and r.origins[0] else r.value
            if v and v.startswith("self.") and v.count(".") == 1:
                _feeds(state, v[5:])
            elif v and v.isidentifier() and v != "None":
                _back(state, fns, calls, g, v, depth + 1)


def _with_overrides(calls: CallResolver, call: CallFact, targets: list[str]) -> list[str]:
    """A ``self.m()`` call's targets and, for each, the overrides of ``m`` in
    the target class's subclasses (the base worker's ``get_finished`` takes
    what the pull or push worker's ``_get_new_notifs`` returns)."""
    if not (call.callee or "").startswith("self."):
        return targets
    return list(dict.fromkeys([*targets, *(o for t in targets for o in calls.classes.overrides(t))]))


def _params_put_in(state: IdState, fn: FnView) -> None:
    """A parameter a function puts into a container found here is an id."""
    params = set(fn.param_names) - {"self", "cls"}
    mine = state.of(fn.fqn)
    for op in fn.all_containers:
        if op.op in _ADDS and op.key in params and op.container.startswith("self.") and \
                op.container[5:] in state.report_fed:
            mine.ids.add(op.key)
