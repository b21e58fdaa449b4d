"""Rule kind ``forbid``: calls (or writes) that must not happen in a context.

Context functions are methods of the target classes named in ``methods``, the
protocol's methods of one ``side`` (e.g. every scheduler-side hook) and the
functions matching ``entry_points``. From each, call edges of the graph
(``call`` and ``dispatch``; never bridges, and not callbacks handed to threads
unless ``follow_refs``) are followed ``depth`` hops through the subject code.

- Calls mode (``calls``): a call whose resolved external target, or, when
  unresolved, whose callee text matches a ``calls`` glob is a finding, unless
  it passes a keyword from ``unless_kwargs`` (``timeout=``) or, for the
  ``positional_timeout`` globs (``*.wait``, ``*.join``, ``*.result``), any
  positional argument (``event.wait(5)``; this also spares ``sep.join(xs)``).
- Writes mode (``forbid_writes: true``): an attribute or container write on
  ``self.*`` in a context function, or in a function it calls on ``self``
  (``self._helper()``, ``self._scheduler.probe()``), is a finding unless the
  attribute matches ``allow_attrs`` (memo and cache attributes).

Each site is reported once, with the call chain from the first context
function (sorted) that reaches it by the fewest hops.
"""

from __future__ import annotations

import fnmatch
from collections import deque

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.model import Finding, Step
from kvflowmap.facts import CallFact

PARAMS: dict[str, tuple[tuple[type, ...], object, str]] = {
    "methods": ((list,), [], "method names of the target classes to start from"),
    "side": ((str,), "", "start from the protocol's methods of this side (scheduler, worker)"),
    "entry_points": ((list,), [], "FQN globs of functions to start from"),
    "calls": ((list,), [], "FQN globs of forbidden calls (time.sleep, requests.*, *.wait)"),
    "unless_kwargs": ((list,), [], "a call passing one of these keywords is fine (timeout)"),
    "positional_timeout": ((list,), ["*.wait", "*.join", "*.result"],
                           "globs of calls whose positional argument is a timeout"),
    "exclude": ((list,), ["os.path.*", "posixpath.*", "<builtin>.*"], "globs never reported"),
    "depth": ((int,), 6, "call hops followed from a context function"),
    "edge_kinds": ((list,), ["call", "dispatch"], "graph edge kinds followed"),
    "follow_refs": ((bool,), False, "follow functions passed as values (thread targets)"),
    "follow_context": ((bool,), False, "follow calls into --context/--release code"),
    "forbid_writes": ((bool,), False, "report writes to self.* instead of calls"),
    "allow_attrs": ((list,), [], "writes mode: attribute globs that may be written"),
}

Chain = tuple[Step, ...]


def check(ctx: CheckContext) -> list[Finding]:
    """Forbidden calls (or writes) reachable from the context functions."""
    one = _writes_from if ctx.param("forbid_writes", False) else _calls_from
    found: dict[tuple[str, int, int], Finding] = {}
    for f in each_function(ctx, _contexts(ctx), lambda start: one(ctx, start)):
        key = (f.function, f.line, f.column)
        if key not in found or len(f.path) < len(found[key].path):
            found[key] = f
    return sorted(found.values(), key=Finding.sort_key)


def _contexts(ctx: CheckContext) -> list[str]:
    names = set(ctx.param("methods") or [])
    side = ctx.param("side") or ""
    if side:
        names |= set(ctx.protocol.methods.get(side, ()))
    out = {f for f in ctx.target_functions if f.rpartition(".")[2] in names}
    pats = ctx.param("entry_points") or []
    out |= {f for f, d in ctx.model.defs.items() if not d.is_class
            and any(fnmatch.fnmatchcase(f, p) for p in pats)}
    return sorted(out)


def _followable(ctx: CheckContext, fqn: str) -> bool:
    d = ctx.model.defs.get(fqn)
    return d is not None and not d.is_class and (
        ctx.is_subject(d.module) or bool(ctx.param("follow_context", False)))


def _short(fqn: str) -> str:
    return ".".join(fqn.split(".")[-2:])


def _reach(ctx: CheckContext, start: str) -> dict[str, Chain]:
    """Functions reachable from ``start`` by graph edges, with the chain to each."""
    kinds = set(ctx.param("edge_kinds") or ["call", "dispatch"])
    refs, depth = bool(ctx.param("follow_refs", False)), int(ctx.param("depth", 6))
    chains: dict[str, Chain] = {start: (ctx.step(start, ctx.function(start).line,
                                                 f"context: {_short(start)}"),)}
    todo = deque([(start, 0)])
    while todo:
        node, hops = todo.popleft()
        if hops >= depth:
            continue
        edges = sorted(ctx.graph.out_edges(node, data=True), key=lambda e: (e[2]["line"], e[1]))
        for _, target, data in edges:
            if data.get("kind") not in kinds or (data.get("ref") and not refs):
                continue
            if target in chains or not _followable(ctx, target):
                continue
            note = "dispatches to" if data["kind"] == "dispatch" else "calls"
            step = ctx.step(node, int(data.get("line") or 0), f"{note} {_short(target)}")
            chains[target] = (*chains[node], step)
            todo.append((target, hops + 1))
    return chains


# -- calls mode ---------------------------------------------------------------
def _calls_from(ctx: CheckContext, start: str) -> list[Finding]:
    out: list[Finding] = []
    for fqn, chain in sorted(_reach(ctx, start).items()):
        for call in ctx.calls_in(fqn):
            hit = _forbidden(ctx, fqn, call)
            if hit is None:
                continue
            name, pat = hit
            path = (*chain, ctx.step(fqn, call.line, f"calls {name}"))
            out.append(ctx.finding(fqn, call.line, f"{name} (forbidden: '{pat}') is reachable "
                                   f"from {_short(start)}", column=call.col, path=path,
                                   anchor=f"call:{name}:{call.callee}"))
    return out


def _forbidden(ctx: CheckContext, fqn: str, call: CallFact) -> tuple[str, str] | None:
    """(name, pattern) when the call matches a forbidden glob and is not bounded."""
    names = [t.fqn for t in ctx.resolve_call(fqn, call) if not _followable(ctx, t.fqn)]
    if not names and not ctx.resolve_call(fqn, call) and call.callee:
        names = [call.callee]
    excluded = ctx.param("exclude", PARAMS["exclude"][1]) or []
    for name in names:
        if any(fnmatch.fnmatchcase(name, p) for p in excluded):
            continue
        pat = next((p for p in ctx.param("calls") or [] if fnmatch.fnmatchcase(name, p)), None)
        if pat is None:
            continue
        if any(k in (ctx.param("unless_kwargs") or []) for k, _ in call.kwargs):
            return None
        timeout_pos = ctx.param("positional_timeout", PARAMS["positional_timeout"][1]) or []
        if call.args and any(fnmatch.fnmatchcase(name, p) for p in timeout_pos):
            return None
        return name, pat
    return None


# -- writes mode --------------------------------------------------------------
def _writes_from(ctx: CheckContext, start: str) -> list[Finding]:
    out: list[Finding] = []
    for fqn, chain in sorted(_self_reach(ctx, start).items()):
        fn, ff = ctx.function(fqn), ctx.facts(fqn)
        me = fn.params[0].name
        sites = [(a.target, a.line, a.col, "+=" if a.aug else "=") for a in ff.assigns
                 if a.scope == fn.qualname and a.target.startswith(f"{me}.")]
        sites += [(c.container, c.line, c.col, c.op) for c in ff.containers
                  if c.scope == fn.qualname and c.container.startswith(f"{me}.")]
        for target, line, col, op in sorted(sites, key=lambda s: (s[1], s[2])):
            attr = target[len(me) + 1:]
            if _allowed(ctx, attr):
                continue
            what = f"{target} {op} ..." if op in ("=", "+=") else f"{target}.{op}(...)" \
                if op not in ("setitem", "delitem") else f"{target}[...] {op}"
            path = (*chain, ctx.step(fqn, line, f"writes {what}"))
            out.append(ctx.finding(fqn, line, f"{_short(start)} writes {target} ({op}) "
                                   "reachable from the probe: not memo state", column=col,
                                   path=path, anchor=f"write:{target}:{op}"))
    return out


def _allowed(ctx: CheckContext, attr: str) -> bool:
    first = attr.split(".")[0].split("[")[0]
    return any(fnmatch.fnmatchcase(first, p) or fnmatch.fnmatchcase(attr, p)
               for p in ctx.param("allow_attrs") or [])


def _is_method(ctx: CheckContext, fqn: str) -> bool:
    fn = ctx.function(fqn)
    return bool(fn.params) and fn.class_qualname is not None and not any(
        d.split(".")[-1] == "staticmethod" for d in fn.decorators)


def _self_reach(ctx: CheckContext, start: str) -> dict[str, Chain]:
    """Methods reached from ``start`` by calls on ``self`` (``self.x()``, ``self.a.x()``)."""
    depth = int(ctx.param("depth", 6))
    chains: dict[str, Chain] = {start: (ctx.step(start, ctx.function(start).line,
                                                 f"context: {_short(start)}"),)}
    todo = deque([(start, 0)])
    while todo:
        fqn, hops = todo.popleft()
        fn = ctx.function(fqn)
        if hops >= depth or not fn.params:
            continue
        for call in ctx.calls_in(fqn):
            if not (call.callee or "").startswith(f"{fn.params[0].name}."):
                continue
            for t in ctx.resolve_call(fqn, call):
                if t.fqn in chains or not _followable(ctx, t.fqn) or not _is_method(ctx, t.fqn):
                    continue
                chains[t.fqn] = (*chains[fqn], ctx.step(fqn, call.line, f"calls {call.callee}"))
                todo.append((t.fqn, hops + 1))
    return chains
