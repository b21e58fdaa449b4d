"""``forbid`` calls mode: forbidden calls reachable from a context function
by graph edges, unless bounded (a timeout keyword or positional argument, a
guard asked first, or a timeout set on the class's sockets)."""

from __future__ import annotations

import fnmatch
from collections import deque

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.forbid_contexts import (Chain, awaited_with_timeout, followable, short,
                                                    start_chain)
from kvflowmap.check.kinds.forbid_guards import Guard, guarded, last_line
from kvflowmap.check.kinds.forbid_options import Options
from kvflowmap.check.kinds.forbid_polling import spin_loops
from kvflowmap.check.model import Finding
from kvflowmap.facts import CallFact, Stmt
from kvflowmap.lifecycle.request_data import request_data
from kvflowmap.lifecycle.view import walk



def _reach(ctx: CheckContext, opts: Options, start: str) -> dict[str, Chain]:
    """Functions reachable from ``start`` by graph edges, with the chain to each."""
    kinds = set(opts.edge_kinds or ("call", "dispatch"))
    refs, depth = opts.follow_refs, opts.depth
    chains, todo = start_chain(ctx, start), deque([(start, 0)])
    while todo:
        node, hops = todo.popleft()
        if hops >= depth:
            continue
        edges = sorted(ctx.graph.out_edges(node, data=True), key=lambda e: (e[2]["line"], e[1]))
        for _, target, data in edges:
            if data.get("kind") not in kinds or (data.get("ref") and not refs):
                continue
            if target in chains or not followable(ctx, opts, target):
                continue
            line = int(data.get("line") or 0)
            step = ctx.step(target, line, f"overrides {short(node)}") \
                if data["kind"] == "dispatch" else ctx.step(node, line, f"calls {short(target)}")
            chains[target] = (*chains[node], step)
            todo.append((target, hops + 1))
    return chains


def calls_from(ctx: CheckContext, opts: Options, start: str) -> list[Finding]:
    """Forbidden, unbounded calls in what context function ``start`` reaches."""
    out: list[Finding] = []
    for fqn, chain in sorted(_reach(ctx, opts, start).items()):
        for loop in spin_loops(ctx, fqn) if opts.polling_loops else ():
            out.append(ctx.finding(
                fqn, loop.line, f"this loop waits by spinning (continue or sleep) with no "
                f"deadline and no turn count, reachable from {short(start)}: if what it waits "
                "for never comes, it never ends", path=(*chain, ctx.step(
                    fqn, loop.line, "spins with no deadline")), anchor="spin"))
        for call in ctx.calls_in(fqn):
            hit = _forbidden(ctx, opts, fqn, call)
            if hit is None:
                continue
            name, pat = hit
            shown = f"{call.callee}()" + (f" ({name})" if name != call.callee else "")
            path = (*chain, ctx.step(fqn, call.line, f"calls {shown}"))
            if any(fnmatch.fnmatchcase(name, p) for p in opts.timeout_setters):
                # where to set the timeout: the factories the receiver came from
                path += tuple(ctx.step(m, ctx.function(m).line, "makes the receiver; "
                                       "sets no timeout on it") for m in made_by(ctx, fqn, call))
            out.append(ctx.finding(fqn, call.line, f"{shown} matches forbidden '{pat}' and is "
                                   f"reachable from {short(start)}", column=call.col,
                                   path=path, anchor=f"call:{name}:{call.callee}"))
    return out


def _forbidden(ctx: CheckContext, opts: Options, fqn: str,
               call: CallFact) -> tuple[str, str] | None:
    """(name, pattern) when the call matches a forbidden glob and is not bounded."""
    targets = ctx.resolve_call(fqn, call)
    names = [t.fqn for t in targets if not followable(ctx, opts, t.fqn)]
    if not targets and call.callee:
        names = [call.callee]
    excluded = opts.exclude
    for name in names:
        if any(fnmatch.fnmatchcase(name, p) for p in excluded):
            continue
        pat = next((p for p in opts.calls if fnmatch.fnmatchcase(name, p)), None)
        if pat is None:
            continue
        # only a matching call pays for the look at its receiver's assignments
        if _local_of_excluded_type(ctx, fqn, call, excluded) or \
                _bounded(ctx, opts, fqn, name, call):
            return None
        return name, pat
    return None


def _local_of_excluded_type(ctx: CheckContext, fqn: str, call: CallFact,
                            excluded: tuple[str, ...]) -> bool:
    """The receiver is a local that some assignment of the function makes an
    excluded type (``ev = torch.npu.Event()`` ... ``ev.wait()``: a device event)."""
    base, _, meth = (call.callee or "").rpartition(".")
    if not base or "." in base:
        return False
    fn = ctx.function(fqn)
    for a in ctx.facts(fqn).assigns:
        if a.scope == fn.qualname and a.target == base and a.value and a.value.endswith("()"):
            made = f"{a.value[:-2]}.{meth}"
            if any(fnmatch.fnmatchcase(made, p) for p in excluded):
                return True
    return False


def _bounded(ctx: CheckContext, opts: Options, fqn: str, name: str, call: CallFact) -> bool:
    if call.awaited and opts.awaited_bounded:
        return True  # ``await ev.wait()`` suspends a coroutine, not the hook's thread
    if not _after(ctx, opts, fqn, name, call) or _done_callback_arg(ctx, fqn, call) or \
            _of_done(ctx, fqn, call) or not _on_request(ctx, opts, fqn, name, call) or \
            awaited_with_timeout(ctx, fqn, opts.unless_kwargs):
        return True
    if any(k in opts.unless_kwargs for k, _ in call.kwargs):
        return True
    timeout_pos = opts.positional_timeout
    if call.args and any(fnmatch.fnmatchcase(name, p) for p in timeout_pos):
        return True
    if _configured(ctx, opts, fqn, name, call):
        return True
    guards = opts.guarded_by
    methods = {m for p, ms in guards.items() if fnmatch.fnmatchcase(name, p) for m in ms}
    receiver = (call.callee or "").rpartition(".")[0]
    if not methods or not receiver:
        return False
    fn = ctx.function(fqn)
    if guarded(fn.body, call.line, Guard(receiver, methods)):
        return True
    # ``events = dict(poller.poll())`` ... ``if sock in events: sock.recv()``:
    # any receiver's ``*.poll`` that runs first on every way there
    polled = {m[2:] for m in methods if m.startswith("*.")}
    lines = {c.line for c in ctx.calls_in(fqn) if c.line < call.line and
             (c.callee or "").rpartition(".")[2] in polled}
    return bool(lines) and _dominated(fn.body, call.line, lines)


def _configured(ctx: CheckContext, opts: Options, fqn: str, name: str, call: CallFact) -> bool:
    """A timeout set on the receivers by a call in the same class (or function),
    or by the analysed factory the receiver was made by; for a receiver that
    is a parameter (``def ensure_recv(sock): sock.recv()``), on what every
    analysed caller passes in."""
    setters = [m for p, ms in opts.timeout_setters.items()
               if fnmatch.fnmatchcase(name, p) for m in ms]
    if not setters:
        return False
    receiver = (call.callee or "").rpartition(".")[0]
    passed = _passed_in(ctx, fqn, receiver)
    if passed:
        return all(_configured_on(ctx, setters, g, arg) for g, _, arg in passed)
    return _configured_on(ctx, setters, fqn, receiver)


def _configured_on(ctx: CheckContext, setters: list[str], fqn: str, receiver: str) -> bool:
    fn = ctx.function(fqn)
    scope = fn.class_qualname or fn.qualname
    mine = [c for c in ctx.facts(fqn).calls
            if c.callee and (c.scope == scope or c.scope.startswith(scope + "."))]
    if any(_sets(c, setters) for c in mine):
        return True
    # ``self.sock = make_socket_with_timeout(...)``: a factory of the analysed
    # code that sets the timeout on what it returns
    return any(any(_sets(x, setters) for x in ctx.calls_in(t)) for t in _makers(ctx, fqn, receiver))


def _makers(ctx: CheckContext, fqn: str, receiver: str) -> list[str]:
    """The analysed functions whose result ``receiver`` is assigned from in
    ``fqn``'s class (or function): ``sock = self._get_socket(...)``."""
    fn = ctx.function(fqn)
    scope = fn.class_qualname or fn.qualname
    module = ctx.definition(fqn).module
    made = {a.line for a in ctx.facts(fqn).assigns if a.target == receiver and
            (a.scope == scope or a.scope.startswith(scope + "."))}
    return sorted({t.fqn for c in ctx.facts(fqn).calls if c.line in made and c.callee and
                   (c.scope == scope or c.scope.startswith(scope + "."))
                   for t in ctx.resolve_call(f"{module}.{c.scope}", c)
                   if t.fqn in ctx.model.defs and not ctx.model.defs[t.fqn].is_class})


def made_by(ctx: CheckContext, fqn: str, call: CallFact) -> list[str]:
    """Where the receiver of ``call`` comes from: the analysed factories it
    (or, for a parameter, what every caller passes in) was made by."""
    receiver = (call.callee or "").rpartition(".")[0]
    passed = _passed_in(ctx, fqn, receiver)
    if passed:
        return sorted({m for g, _, arg in passed for m in _makers(ctx, g, arg)})
    return _makers(ctx, fqn, receiver)


def _passed_in(ctx: CheckContext, fqn: str, receiver: str) -> list[tuple[str, int, str]]:
    """(caller, line, argument text) for every analysed call of ``fqn`` when
    ``receiver`` is one of its parameters; empty otherwise (or when a caller
    passes something that is not a plain name chain)."""
    params = [p.name for p in ctx.function(fqn).params]
    if receiver not in params:
        return []
    pos = [p for p in params if p not in ("self", "cls")].index(receiver) \
        if receiver not in ("self", "cls") else -1
    out = []
    for caller, _, data in sorted(ctx.graph.in_edges(fqn, data=True), key=lambda e: e[0]):
        if data.get("kind") != "call" or caller not in ctx.model.defs or \
                ctx.model.defs[caller].is_class:
            continue
        for c in ctx.calls_in(caller):
            if c.line != data.get("line") or not any(
                    t.fqn == fqn for t in ctx.resolve_call(caller, c)):
                continue
            arg = dict(c.kwargs).get(receiver) or (c.args[pos] if 0 <= pos < len(c.args)
                                                  else None)
            if not arg:
                return []
            out.append((caller, c.line, arg))
    return out


def _sets(c: CallFact, setters: list[str]) -> bool:
    """``c`` is a timeout setter (``setsockopt`` with ``RCVTIMEO``, ``settimeout``)."""
    for setter in setters:
        meth, _, arg = setter.partition(":")
        if (c.callee or "").rpartition(".")[2] == meth and (
                not arg or any(arg in (a or "") for a in c.args)):
            return True
    return False


def _after(ctx: CheckContext, opts: Options, fqn: str, name: str, call: CallFact) -> bool:
    """The call comes after what ``only_after`` asks for (or nothing is asked):
    one of its methods called on the same receiver, directly or by a helper
    given it that calls the method on it (``ensure_send(sock, data);
    sock.recv()``), by a statement that runs before it on every way there
    (an earlier statement of its own block or of an enclosing one; not one
    in a sibling branch). For a receiver that is a parameter, in every
    analysed caller, before the call that passes it in."""
    wanted = {m for p, ms in opts.only_after.items() if fnmatch.fnmatchcase(name, p) for m in ms}
    if not wanted:
        return True
    receiver = (call.callee or "").rpartition(".")[0]
    if _after_on(ctx, wanted, fqn, receiver, call.line, helpers=True):
        return True
    passed = _passed_in(ctx, fqn, receiver)
    return bool(passed) and all(_after_on(ctx, wanted, g, arg, line, helpers=True)
                                for g, line, arg in passed)


def _after_on(ctx: CheckContext, wanted: set[str], fqn: str, receiver: str, line: int,
              helpers: bool = False) -> bool:
    lines = {c.line for c in ctx.calls_in(fqn) if c.line < line and (
        ((c.callee or "").rpartition(".")[0] == receiver and
         (c.callee or "").rpartition(".")[2] in wanted) or
        (helpers and receiver in c.args and _calls_on_param(ctx, fqn, c, receiver, wanted)))}
    return bool(lines) and _dominated(ctx.function(fqn).body, line, lines)


def _calls_on_param(ctx: CheckContext, fqn: str, call: CallFact, arg: str,
                    wanted: set[str]) -> bool:
    """``call`` passes ``arg`` to an analysed function that calls one of
    ``wanted`` on the parameter it lands in."""
    pos = call.args.index(arg)
    for t in ctx.resolve_call(fqn, call):
        if t.fqn not in ctx.model.defs or ctx.model.defs[t.fqn].is_class:
            continue
        params = [p.name for p in ctx.function(t.fqn).params if p.name not in ("self", "cls")]
        if pos < len(params) and any(
                (c.callee or "").rpartition(".")[0] == params[pos] and
                (c.callee or "").rpartition(".")[2] in wanted for c in ctx.calls_in(t.fqn)):
            return True
    return False


def _dominated(block: tuple[Stmt, ...], line: int, lines: set[int]) -> bool:
    """A simple statement at one of ``lines`` precedes ``line`` in ``block`` or
    in one of the blocks enclosing it."""
    for st in block:
        if st.line > line:
            return False
        if st.line <= line <= last_line(st) and (st.body or st.orelse or st.handlers or
                                                     st.final):
            return any(_dominated(sub, line, lines) for sub in
                       (st.body, st.orelse, *(h.body for h in st.handlers), st.final)
                       if sub and sub[0].line <= line <= max(last_line(x) for x in sub))
        if st.line == line:
            return False
        if st.kind == "simple" and st.line in lines:
            return True
    return False


def _on_request(ctx: CheckContext, opts: Options, fqn: str, name: str, call: CallFact) -> bool:
    """The call is on the request's own data, or ``request_receivers`` does not
    ask it to be."""
    if not any(fnmatch.fnmatchcase(name, p) for p in opts.request_receivers):
        return True
    root = (call.callee or "").partition(".")[0]
    lc = ctx.lifecycle()
    fn = lc.functions.get(fqn)
    return fn is not None and root in request_data(fn, lc.state.of(fqn).own_request_names())


def _done_callback_arg(ctx: CheckContext, fqn: str, call: CallFact) -> bool:
    """``fut.result()`` where ``fut`` is the parameter of a done callback
    (``add_done_callback(fn)`` runs ``fn(fut)`` once ``fut`` is done)."""
    receiver = (call.callee or "").rpartition(".")[0]
    params = [p.name for p in ctx.function(fqn).params]
    return bool(params) and receiver == params[0] and any(
        sp.target == fqn and sp.call.endswith("add_done_callback")
        for sp in ctx.lifecycle().spawned)


def _of_done(ctx: CheckContext, fqn: str, call: CallFact) -> bool:
    """``for t in done: t.result()`` where ``done, pending = wait(...)`` (or
    ``for t in as_completed(...)``): the future is done, its result is there."""
    receiver = (call.callee or "").rpartition(".")[0]
    view = ctx.lifecycle().functions.get(fqn)
    if view is None:
        return False
    # ``done, pending = await asyncio.wait(...)``: the first name a wait binds
    done = {view.assigns(s)[0].target for s in view.stmts if s.kind == "simple" and
            view.assigns(s) and any((c.callee or "").rpartition(".")[2] == "wait"
                                    for c in view.calls(s))}
    for s in walk(view.fact.body):
        if s.kind != "for":
            continue
        targets, _, walked = (s.text or "").partition(" in ")
        if targets.strip() == receiver and (walked.strip() in done or "as_completed(" in walked):
            return True
    return False
