"""``lifecycle`` mode ``delayed_free``: a delayed free is always followed by a save.

When ``request_finished`` answers ``True`` first, vLLM keeps the request's
blocks until a worker reports its id in ``finished_sending``. A path that
answers ``True`` without handing the request on (recording it for a save or
send, queueing it, passing it to a helper that does) has nothing that will
ever report it: the blocks are never freed and the KV cache shrinks by a
request's worth each time.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.lifecycle._shared import functions, lifecycle, short, steps
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option
from kvflowmap.lifecycle.effects import HANDLING
from kvflowmap.lifecycle.cfg_paths import reaching
from kvflowmap.lifecycle.decisions import config_test
from kvflowmap.lifecycle.ids import loop_targets
from kvflowmap.lifecycle.view import walk

# calls followed from a connector's reporter to the worker code it delegates to
_DELEGATION_DEPTH = 3

READS = ("Reads: the returns of the protocol's delay-free hook (`lifecycle.delay_free`), "
         "the control-flow graph from its entry, and the lifecycle model's effect of each "
         "statement on the request id.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``delayed_free``."""

    true_values: tuple[str, ...] = option(("True",), "texts of the first element that "
                                                     "mean 'delay the free'")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per return that delays the free on a path with no hand-over."""
    lc = lifecycle(ctx)
    fns = [f for f in functions(ctx, lc) if lc.functions[f].name == lc.spec.delay_free]
    return each_function(ctx, fns, lambda f: _check(ctx, lc, f, opts))


def _check(ctx: CheckContext, lc, fqn: str, opts: Options) -> list[Finding]:
    fn, cfg = lc.functions[fqn], lc.cfg(fqn)
    idx = lc.spec.delay_element
    handles = {n.id for n in cfg.nodes if n.stmt is not None and n.kind == "stmt" and (any(
        e.kind in HANDLING and e.kind != "return" for e in lc.effects.of(fn, n.stmt)) or
        _delegates(fn, n.stmt, lc.spec.delay_free))}
    tracked = _workers_track_finished(lc, fn.cls)
    if tracked == "reports" or (not handles and tracked):
        # its workers report the finished ids themselves, or it never records
        # and they save what finished_req_ids names
        return []
    to_handle = reaching(cfg, handles)
    out = []
    # a state is a node and the locals known truthy on the way to it
    # (``if delay: ...`` then ``return delay, params``)
    State = tuple[int, frozenset[str]]
    start: State = (cfg.entry, frozenset())
    parent: dict[State, State | None] = {start: None}
    queue = deque([start])
    reported: set[int] = set()
    while queue:
        state = queue.popleft()
        n, known = state
        node = cfg.nodes[n]
        rets = fn.returns(node.stmt) if node.stmt is not None and node.kind == "stmt" else []
        for r in rets:
            first = r.elements[idx].strip() if r.elements and idx < len(r.elements) else None
            if (first in opts.true_values or first in known) and r.line not in reported:
                reported.add(r.line)
                lines = _lines(cfg, parent, state)
                said = first if first in opts.true_values else f"{first} (true here)"
                out.append(ctx.finding(
                    fqn, r.line, f"{short(fqn)} answers {said}: delay freeing the blocks, on a "
                    "path that records the request for no save or send: nothing will report "
                    "it in finished_sending, so its blocks are never freed",
                    path=steps(ctx, fqn, [(ln, "") for ln in lines[:-1]] +
                               [(r.line, "delays the free with no save queued")]),
                    anchor=f"delay:{first}"))
        if n in handles:
            continue
        succ = cfg.successors(n)
        if node.stmt is not None and node.stmt.kind == "if" and config_test(fn, node.stmt):
            # ``if self.connector_scheduler is not None``: the role is fixed,
            # so follow the branch that records when one does.
            succ = [(d, lab) for d, lab in succ if d in to_handle] or succ
        tested = _truthy_test(node.stmt) if node.stmt is not None and \
            node.stmt.kind == "if" else None
        for d, lab in succ:
            nxt: State = (d, known | {tested} if tested and lab == "true" else known)
            if nxt not in parent:
                parent[nxt] = state
                queue.append(nxt)
    return out


def _delegates(fn, s, name: str) -> bool:
    """``return self.connector_scheduler.request_finished(request, ...)``: a
    facade hands the decision (and the request) to its scheduler half."""
    return s.kind == "return" and any(
        (c.callee or "").rpartition(".")[2] == name and c.callee != f"self.{name}"
        for c in fn.calls(s))


def _workers_track_finished(lc, cls: str | None) -> str:
    """How the connector's own finished_sending reporter (the method its class
    resolves, and the subject functions it delegates to, a few calls deep)
    uses the ids of finished requests vLLM passes it
    (``get_finished(finished_req_ids)``), followed through the arguments it
    forwards them in: ``"reports"`` when a loop over them adds them to a
    collection (a finished request with nothing pending is reported at
    once: any delayed free is answered), ``"reads"`` when it reads them
    otherwise (the worker, not ``request_finished``, picks what to save),
    ``""`` when it does not. Another connector's design says nothing about
    this one."""
    channel = lc.spec.channel("finished_sending")
    methods = channel.methods if channel else ()
    frontier: list[tuple[str, frozenset[str]]] = []
    for m in (lc.classes.find_member(cls, name) for name in methods) if cls else ():
        if m in lc.functions:
            fn = lc.functions[m]
            frontier.append((m, frozenset(lc.spec.id_params.get(fn.name, ())) &
                             frozenset(fn.param_names)))
    seen = {f for f, _ in frontier}
    found = ""
    for _ in range(_DELEGATION_DEPTH):
        nxt: list[tuple[str, frozenset[str]]] = []
        for f, params in frontier:
            fn = lc.functions[f]
            if any(_walks_into_collection(fn, s, p) for s in fn.stmts for p in params):
                return "reports"
            if fn.name in methods and any(_reads(fn, s, p, methods)
                                          for s in fn.stmts for p in params):
                found = "reads"
            for c in fn.all_calls:
                name = (c.callee or "").rpartition(".")[2]
                # ``self.get_finished(...)`` runs what the connector's class resolves
                own = lc.classes.find_member(cls, name) \
                    if c.callee == f"self.{name}" and cls else None
                for t in ([own] if own else
                          [t.fqn for t in lc.effects.calls.resolve(fn.ctx, c)]):
                    if t in lc.functions and t not in seen:
                        seen.add(t)
                        nxt.append((t, _forwarded(lc.functions[t], c, params)))
        frontier = nxt
    return found


def _forwarded(target, call, params: frozenset[str]) -> frozenset[str]:
    """The parameters of ``target`` that ``call`` passes one of ``params`` in."""
    names = [n for n in target.param_names if n not in ("self", "cls")]
    out = {names[i] for i, a in enumerate(call.args) if a in params and i < len(names)}
    out |= {k for k, v in call.kwargs if v in params and k in names}
    return frozenset(out)


def _walks_into_collection(fn, s, param: str) -> bool:
    """``for rid in param: ... out.add(rid)``: the finished ids themselves
    go into a collection (the report)."""
    if s.kind != "for":
        return False
    targets, iterable = loop_targets(s.text)
    if iterable != param or not targets:
        return False
    return any(op.op in ("add", "append") and op.key in targets
               for t in walk(s.body) for op in fn.containers(t))


def _reads(fn, s, param: str, methods: tuple[str, ...]) -> bool:
    """``s`` uses ``param`` other than by passing it on to another reporter
    (``self.get_finished(finished_req_ids)`` in a base's
    ``get_transfer_results`` decides nothing)."""
    if param not in s.names:
        return False
    forwards = [c for c in fn.calls(s) if param in c.args or param in (v for _, v in c.kwargs)]
    return not forwards or any((c.callee or "").rpartition(".")[2] not in methods
                               for c in forwards)


def _truthy_test(s) -> str | None:
    """The local an ``if`` tests for truth (``if delay:``, ``if delay and x:``):
    on its true arm the local is true."""
    m = re.fullmatch(r"([A-Za-z_]\w*)(?:\s+and\b.*)?", (s.text or "").strip(), re.S)
    return m.group(1) if m else None


def _lines(cfg, parent: dict, state) -> list[int]:
    out = []
    cur = state
    while cur is not None:
        if cfg.nodes[cur[0]].line:
            out.append(cfg.nodes[cur[0]].line)
        cur = parent[cur]
    return out[::-1]
