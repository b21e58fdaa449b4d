"""What one statement does with the request ids it mentions.

An effect is one of: ``add`` (into a request-keyed container or queue),
``remove``, ``reset`` (a container cleared), ``store`` (into an attribute or
subscript), ``return`` (handed back to the caller), ``handover`` (passed to a
call that keeps it: an analysed function whose summary consumes ids, or code
outside the analysis), ``spawn`` (passed to a thread, executor, task or
callback). Logging, string formatting, ``len`` and container reads do
nothing with an id. Calls to analysed functions are judged by their summary:
a helper that only logs or counts an id does not take it over.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from dataclasses import dataclass

from kvflowmap.facts import CallFact, Stmt
from kvflowmap.lifecycle.containers import (ADD_OPS, PURE, READ_METHODS, REMOVE_OPS, RESET_OPS,
                                           Container, assigns_empty, container_of, is_method_call,
                                           self_attr)
from kvflowmap.lifecycle.ids import IDENT, QUEUE_PUTS, IdState, unwrap
from kvflowmap.lifecycle.view import FnView, siblings, view
from kvflowmap.model.calls import CallResolver
from kvflowmap.model.values import Evaluator

HANDLING = frozenset({"add", "store", "return", "handover", "spawn"})

# Clocks and sleeps do not raise (a sleep in a loop's ``except`` is a back-off,
# not a way out of the loop).
_NO_RAISE = frozenset({"time.time", "time.monotonic", "time.perf_counter", "time.time_ns",
                       "time.monotonic_ns", "time.perf_counter_ns", "time.sleep",
                       "threading.get_ident", "os.getpid"})
# Container methods that do not raise (``pop``/``remove`` raise KeyError).
_SAFE_METHODS = ADD_OPS | RESET_OPS | frozenset({"discard", "difference_update",
                                                 "intersection_update"})


def _safe_call(c: CallFact) -> bool:
    """Logging, a pure builtin, a clock read, a container update or lookup:
    nothing a caller has to survive. ``d.pop(k, default)`` cannot raise
    ``KeyError``."""
    callee = c.callee or ""
    meth = callee.rpartition(".")[2]
    return (is_logging(callee) or callee in PURE or callee in _NO_RAISE
            or meth in _SAFE_METHODS or (meth == "pop" and len(c.args) >= 2)
            # ``d.get(k)``, ``d.get(k, default)``, a blocking ``q.get()``: no
            # timeout, nothing to raise
            or (meth == "get" and "." in callee and len(c.args) <= 2 and not c.kwargs))


_LEAVES = frozenset({"return", "continue", "break", "raise"})


def _nonempty_pop(fn: FnView, s: Stmt, c: CallFact) -> bool:
    """``q.popleft()`` / ``q.pop()`` after ``if not q: return`` (or
    ``continue``, ``break``) earlier in the same statement list: ``q`` is not
    empty there, and the pop cannot raise."""
    base, _, meth = (c.callee or "").rpartition(".")
    if meth not in ("pop", "popleft", "popitem") or c.args or not base:
        return False
    block = siblings(fn.fact.body, s)
    before = block[:next((i for i, x in enumerate(block) if x is s), 0)]
    return any(x.kind == "if" and x.body and x.body[-1].kind in _LEAVES and
               (x.text or "").replace(" ", "") in (f"not{base}", f"{base}isNoneornot{base}")
               for x in before)


@dataclass(frozen=True)
class Effect:
    """One thing a statement does with an id."""

    kind: str
    line: int
    target: str = ""  # container label, callee, or ""
    container: Container | None = None


_CLOCKS = frozenset({"time", "monotonic", "perf_counter", "monotonic_ns", "perf_counter_ns",
                     "time_ns"})


def is_clock(callee: str) -> bool:
    """``time.monotonic``, ``time.time``, a bare ``perf_counter`` (imported from time)."""
    head, _, name = callee.rpartition(".")
    return name in _CLOCKS and head.rpartition(".")[2] in ("time", "")


def is_logging(callee: str) -> bool:
    """``logger.info``, ``self.logger.warning``, ``logging.error``, ``warnings.warn``."""
    base, _, meth = callee.rpartition(".")
    last = base.rpartition(".")[2].lower()
    return "log" in last or base in ("logging", "warnings") or callee in ("print",)


_MERGE = frozenset({"update", "add", "extend", "append", "union", "__ior__"})


def escapes(fn: FnView, local: str, loop_hands_on=None, depth: int = 3) -> bool:
    """A local container leaves the function: returned, stored, passed to a
    call (not logging or a builtin that only reads it), or merged into a
    local that does. With ``loop_hands_on(stmt)``, a ``for`` loop over it whose
    body hands ids on counts too."""
    return any(hands_on_at(fn, s, local, loop_hands_on, depth) for s in fn.stmts)


def hands_on_at(fn: FnView, s: Stmt, local: str, loop_hands_on=None, depth: int = 3,
                keeps: Callable[[CallFact], bool] | None = None) -> bool:
    """Statement ``s`` lets the local container ``local`` leave (see ``escapes``).
    With ``keeps(call)``, a call it is passed to must keep what it is given
    (an analysed helper that only reads it, ``_build_metadata(reqs)``, does not)."""
    if depth == 0:
        return True
    if local not in s.names:
        return False
    if any(re.search(rf"\b{re.escape(local)}\b", r.value or "") for r in fn.returns(s)):
        return True
    if loop_hands_on is not None and s.kind == "for" and \
            (s.text or "").rpartition(" in ")[2].strip() == local:
        return bool(loop_hands_on(s))
    for a in fn.assigns(s):
        if a.value == local and ("." in a.target or "[" in a.target):
            return True
        if a.value == local and a.target != local and \
                escapes(fn, a.target, loop_hands_on, depth - 1):
            return True
    for c in fn.calls(s):
        if local not in c.args and local not in (v for _, v in c.kwargs):
            continue
        callee = c.callee or ""
        base, _, meth = callee.rpartition(".")
        if is_logging(callee) or callee in PURE:
            continue
        if meth in _MERGE and base and "." not in base and base != local:
            if escapes(fn, base, loop_hands_on, depth - 1):
                return True
            continue
        if keeps is not None and not keeps(c):
            continue
        return True
    return False


def is_stub(fn: FnView) -> bool:
    """A body of only a docstring, ``pass``, ``...`` or ``raise NotImplementedError``."""
    return all((st.kind == "simple" and not st.names) or
               (st.kind == "raise" and "NotImplementedError" in (st.text or ""))
               for st in fn.fact.body)


class Effects:
    """Effects of statements, with summaries of analysed callees (memoised)."""

    def __init__(self, state: IdState, values: Evaluator, calls: CallResolver,
                 spawners: tuple[str, ...]) -> None:
        self.state = state
        self.values = values
        self.calls = calls
        self.spawners = spawners
        self._consumes: dict[str, bool] = {}
        # every rule and pass asks for the same statements' effects: once each
        self._memo: dict[tuple[str, int], list[Effect]] = {}

    @staticmethod
    def may_raise(fn: FnView, s: Stmt) -> bool:
        """A statement whose calls may raise: logging and container updates
        are taken not to (an ``except`` that logs is not itself a failure)."""
        calls = fn.calls(s)
        return bool(calls) and not all(_safe_call(c) or _nonempty_pop(fn, s, c)
                                       for c in calls)

    def of(self, fn: FnView, s: Stmt) -> list[Effect]:
        """What ``s`` does with the ids it mentions (resets need no id)."""
        key = (fn.fqn, id(s))
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self._of(fn, s)
        return found

    def _of(self, fn: FnView, s: Stmt) -> list[Effect]:
        mentioned = self.state.id_names_in(fn, s.names)
        # ``self._failed.update(request_ids)``: a collection of ids merged in
        merges = any(self.state.is_coll(fn, n) for n in s.names)
        out: list[Effect] = []
        for op in fn.containers(s):
            if is_method_call(op.container, op.op, fn, self.values):
                continue
            c = container_of(op.container, fn, self.values)
            if op.op in RESET_OPS and c:
                out.append(Effect("reset", op.line, c.label, c))
            elif op.op in ADD_OPS and self_attr(op.container) in self.state.report_fed and \
                    op.container.count(".") == 1 and op.key:
                # a container a report hook hands back holds ids, whatever the
                # element is read from (``self.done.append(msg["transfer_id"])``)
                out.append(Effect("add", op.line, c.label if c else op.container, c))
            elif not mentioned and not (merges and op.op == "update") and \
                    not self.state.is_id(fn, op.key):  # ``self._f[request_ids[0]] = ...``
                continue
            elif op.op in ("setitem", "pop") and op.container.rpartition(".")[2] in \
                    self.state.id_valued and op.container.startswith("self."):
                # ``self._load_jobs[job_id] = rid`` / ``rid = self._load_jobs.pop(job_id)``:
                # the id is the value, under a key that is not one
                out.append(Effect("add" if op.op == "setitem" else "remove", op.line,
                                  c.label if c else op.container, c))
            elif op.op in ADD_OPS and (self.state.is_id(fn, op.key) or "[]" in op.container
                                       or op.op == "update"):
                base = op.container.split(".")[0].split("[")[0]
                # a parameter's container is the caller's: adding to it hands on
                if c is not None or base in fn.param_names or escapes(fn, base):
                    out.append(Effect("add", op.line, c.label if c else op.container, c))
            elif op.op in REMOVE_OPS and self.state.is_id(fn, op.key):
                out.append(Effect("remove", op.line, c.label if c else op.container, c))
        out += self._whole_fills(fn, s)
        if not mentioned:
            return out + self._data_handovers(fn, s)
        if s.kind in ("def", "class"):
            # a nested def capturing the id (``rid: str = request_id``): a
            # callback or thread body that carries it on
            return [*out, Effect("spawn", s.line, "closure")]
        out += self._call_effects(fn, s, mentioned)
        requests = self.state.of(fn.fqn).requests
        for a in fn.assigns(s):
            if a.aug and a.target.startswith("self.") and a.target.endswith("[]"):
                # ``self._pending[rid] -= 1``: the request's count moves in
                # request-keyed state a report reads; the id is accounted for
                c = container_of(a.target, fn, self.values)
                out.append(Effect("store", a.line, c.label if c else a.target, c))
            elif ("." in a.target or "[" in a.target) and not a.aug:
                if a.target.partition(".")[0] in requests and not self.state.is_id(fn, a.value):
                    # ``request.disagg_spec.num_transferred_tokens = n``: the
                    # request's own data updated, its id handed nowhere
                    continue
                c = container_of(a.target, fn, self.values)
                out.append(Effect("store", a.line, c.label if c else a.target, c))
        out += [Effect("return", r.line) for r in fn.returns(s) if self._returns_ids(fn, r)]
        return out

    def _whole_fills(self, fn: FnView, s: Stmt) -> list[Effect]:
        """``self._current = set(metadata.save_intents.keys())``: a ``self``
        attribute given a whole collection of ids (outside set-up) is filled
        with them, as by one ``add`` per id; what holds them now owes them."""
        if fn.name == "__init__":
            return []
        out = []
        for a in fn.assigns(s):
            if a.aug or not (a.target.startswith("self.") and a.target.count(".") == 1) \
                    or "[" in a.target or assigns_empty(a):
                continue
            if not (self.state.is_coll(fn, a.value) or self.state.is_coll(fn, a.origin)):
                continue
            c = container_of(a.target, fn, self.values)
            if c is not None:
                out.append(Effect("add", a.line, c.label, c))
        return out

    def _returns_ids(self, fn: FnView, r) -> bool:
        """The returned value carries ids itself (``return rid``, ``return done,
        recving``, ``return (rid, meta)``, ``return sorted(done)``), not a fact
        about them (``return rid in self._cancelled``, ``return self._x.get(rid)``)."""
        parts = list(r.elements) if r.elements else [r.value or ""]
        mine = self.state.of(fn.fqn)
        for p in parts:
            p = p.strip()
            inner = unwrap(p) or p
            if inner in mine.ids or inner in mine.colls or inner in mine.requests or \
                    inner in mine.records:
                return True
            if IDENT.fullmatch(inner) and (self.state.is_id(fn, inner) or
                                           self.state.is_coll(fn, inner)):
                return True
            if inner.startswith(("{", "[", "(")) and \
                    any(self.state.is_id(fn, t) for t in IDENT.findall(inner)):
                return True  # a display or comprehension holding ids
        return False

    def _call_effects(self, fn: FnView, s: Stmt, mentioned: set[str]) -> list[Effect]:
        calls = [c for c in fn.calls(s) if c.callee and not self._inert(c)]
        out = []
        for c in calls:
            if not self._passes_id(fn, c, mentioned, len(calls)):
                if self._hands_data(fn, c):
                    out.append(Effect("handover", c.line, c.callee or ""))
                continue
            callee = c.callee or ""
            meth = callee.rpartition(".")[2]
            if meth in QUEUE_PUTS and "." in callee:
                cont = container_of(callee.rpartition(".")[0], fn, self.values)
                out.append(Effect("add", c.line, cont.label if cont else callee, cont))
            elif any(fnmatch.fnmatch(callee, p) for p in self.spawners):
                out.append(Effect("spawn", c.line, callee))
            elif self.call_keeps(fn, c):
                out.append(Effect("handover", c.line, callee))
        return out

    def _inert(self, c: CallFact) -> bool:
        callee = c.callee or ""
        meth = callee.rpartition(".")[2]
        return (callee in PURE or is_logging(callee) or meth in READ_METHODS
                or meth in ADD_OPS - QUEUE_PUTS or meth in REMOVE_OPS or meth in RESET_OPS)

    def _passes_id(self, fn: FnView, c: CallFact, mentioned: set[str], n_calls: int) -> bool:
        args = [*c.args, *(v for _, v in c.kwargs)]
        req = self.state.of(fn.fqn).requests
        if any(self.state.is_id(fn, a) or a in req for a in args if a):
            return True
        # Arguments that are not plain chains (``(rid, meta)``): the only call
        # of the statement gets the ids it mentions.
        return n_calls == 1 and any(a is None for a in args) and bool(mentioned)

    def _data_handovers(self, fn: FnView, s: Stmt) -> list[Effect]:
        """Calls of a statement naming no id itself that hand a collection of
        ids or a request's record to a helper keeping ids."""
        if s.kind in ("def", "class"):
            return []
        return [Effect("handover", c.line, c.callee or "") for c in fn.calls(s)
                if c.callee and not self._inert(c) and self._hands_data(fn, c)]

    def _hands_data(self, fn: FnView, c: CallFact) -> bool:
        """``self._handle_failed(pull_metas, req_ids)``: an argument is a
        collection of ids or a request's record, and the call resolves to
        analysed code whose summary keeps ids (a helper that only reads them,
        ``_build_metadata(reqs)``, does not)."""
        mine = self.state.of(fn.fqn)
        if not any(a in mine.colls or a in mine.records or self.state.is_coll(fn, a)
                   for a in [*c.args, *(v for _, v in c.kwargs)] if a):
            return False
        runs = self._analysed_bodies(fn, c)
        return runs is not None and any(self.consumes(t) for t in runs)

    def call_keeps(self, fn: FnView, c: CallFact) -> bool:
        """The call may keep what it is given: code outside the analysis (or
        only a stub of it) is assumed to; an analysed callee keeps it when its
        summary does (``consumes``)."""
        runs = self._analysed_bodies(fn, c)
        return runs is None or any(self.consumes(t) for t in runs)

    def _analysed_bodies(self, fn: FnView, c: CallFact) -> list[str] | None:
        """The analysed functions the call runs (abstract stubs replaced by
        their overrides); None when it runs code outside the analysis, or only
        a stub is seen (``...`` under ``@rpc_method``, a Protocol: its body is
        elsewhere)."""
        targets = self.calls.resolve(fn.ctx, c)
        analysed = [t.fqn for t in targets if not t.external and t.fqn in self.values.model.defs]
        runs = [t for f in analysed for t in self._overrides(f)]
        views = [v for t in runs if (v := view(self.values.model, t)) is not None]
        if not views or all(is_stub(v) for v in views):
            return None
        return runs

    def _overrides(self, fqn: str) -> list[str]:
        """``fqn``, or for an abstract stub (``raise NotImplementedError``,
        ``...``) the overrides in its class's analysed subclasses: the call is
        dispatched to one of them."""
        fn = view(self.values.model, fqn)
        if fn is None or not fn.cls or not is_stub(fn):
            return [fqn]
        classes = self.values.classes
        found = [m for sub in classes.all_subclasses(fn.cls)
                 if (m := f"{sub}.{fn.name}") in self.values.model.defs]
        return found or [fqn]

    def consumes(self, fqn: str) -> bool:
        """Summary: some statement of ``fqn`` keeps an id it was given."""
        if fqn in self._consumes:
            return self._consumes[fqn]
        self._consumes[fqn] = False  # cycle guard: assume not while computing
        fn = view(self.values.model, fqn)
        if fn is None:  # a class: constructing it keeps its arguments
            self._consumes[fqn] = True
            return True
        found = any(e.kind in HANDLING for s in fn.stmts for e in self.of(fn, s)
                    if e.kind != "return" or fn.name != "__init__")
        self._consumes[fqn] = found
        return found
