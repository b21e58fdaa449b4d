"""``lifecycle`` mode ``delay_expires``: a delayed free that only a peer's
message ends can also expire.

When ``request_finished`` answers ``True`` first, vLLM keeps the request's
blocks until a worker reports its id in ``finished_sending``. In a P/D
connector the prefill side reports it when the decode side says it has read
the blocks (a notification, an acknowledgement read off a socket). A decode
side that dies, is restarted, or aborts the request before it reads never
says so, and the blocks stay held for the life of the process: the prefill
instance's KV cache shrinks by a request each time (vLLM 0.9.2's NIXL
connector; 0.10.0 records a deadline per delayed request and reports it
when the deadline passes).

Checked per connector class (a subclass of the protocol's base class): its
``request_finished`` (and what it delegates to) can answer something other
than ``False`` first; what its hooks make run (calls, threads, tasks, queue
hand-offs) reads a peer's message (a call among the protocol's
``peer_calls``: ``decode``, ``recv``, ...) on the way to a report (in a
report function, or where ids are put into what a report hook drains, or
in the function that hands the message there; a function that also sends
asks a question and reads the answer, an RPC, no peer's word); and
nothing there tests a clock,
directly or through a local computed from one. The finding is on the return
that delays the free.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.lifecycle._shared import lifecycle, short, steps
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option
from kvflowmap.lifecycle.containers import ADD_OPS
from kvflowmap.lifecycle.stalls import age_arm

READS = ("Reads: per connector class, the returns of its delay-free hook and of the "
         "functions it delegates to, what its hooks make run (calls, threads, tasks, "
         "queue hand-offs), the calls there that read a peer's message (the protocol's "
         "`lifecycle.peer_calls`), and the tests there that read a clock.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``delay_expires``."""

    false_values: tuple[str, ...] = option(("False",), "texts of the first element that "
                                                       "mean 'free the blocks now'")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per connector class whose delayed frees only a peer ends."""
    base = ctx.protocol.base_class
    connectors = frozenset(c for c in ctx.target_classes
                           if base in ctx.classes.mro(c) and c != base)
    return each_function(ctx, sorted(connectors), lambda c: _check(ctx, c, connectors, opts))


def _check(ctx: CheckContext, cls: str, connectors: frozenset[str],
           opts: Options) -> list[Finding]:
    lc = lifecycle(ctx)
    spec = lc.spec
    hook = ctx.classes.find_member(cls, spec.delay_free)
    if hook is None or hook not in lc.functions or ctx.classes.all_subclasses(cls):
        return []  # no delay hook of its own analysed, or a base others refine
    # another connector's code (a composite's children, a dispatch to every
    # override of a base hook) is that connector's business
    mro = set(ctx.classes.mro(cls))
    others = frozenset(f for f in lc.functions if (k := f.rpartition(".")[0]) in
                       connectors and k not in mro)
    delays = _delaying_returns(lc, hook, opts.false_values, others)
    if not delays:
        return []
    hooks = [m for side in ctx.protocol.methods.values() for name in side
             if (m := ctx.classes.find_member(cls, name)) in lc.functions]
    scope = sorted(lc.runs_from(hooks, others))
    # the peer's message must be on the way to a report: read by a report
    # function, or where ids are put into what a report hook drains (not a
    # handshake, a lookup or a metadata service's answer)
    feeders = {f for f in scope if any(
        op.op in ADD_OPS and op.container.rpartition(".")[2] in lc.state.report_fed
        for op in lc.functions[f].all_containers)}
    reporting = set(lc.reporters) | feeders | {
        f for f in scope if any(g in feeders for g in lc.callees(f))}
    peer = next(((f, c.line, c.callee or "") for f in scope if f in reporting
                 and not _asks(lc.functions[f]) for c in lc.functions[f].all_calls
                 if (c.callee or "").rpartition(".")[2] in spec.peer_calls), None)
    if peer is None or any(age_arm(lc.functions[f]) for f in scope):
        return []
    fqn, line, first = delays[0]
    pf, pline, pcall = peer
    msg = (f"{short(fqn)} answers {first}: delay freeing the blocks until a worker reports the "
           f"request in finished_sending, and the code {short(cls)} runs reads its peer's "
           f"messages (`{pcall}` in {short(pf)}, line {pline}) but never tests a clock: a "
           "delayed request ends only when the peer says it read the blocks. A peer that "
           "dies, restarts or aborts the request first never says so, and the blocks are "
           "held for the life of the process. Record a deadline when the free is delayed, "
           "and report the request in finished_sending when it passes")
    return [ctx.finding(fqn, line, msg,
                        path=steps(ctx, fqn, [(line, f"answers {first}: the free waits")])
                        + steps(ctx, pf, [(pline, "the peer's message that ends the wait")]),
                        anchor=f"delay-expires:{short(cls)}")]


def _asks(fn) -> bool:
    """The function sends as well as receives (``sock.send(req)`` then
    ``sock.recv()``): an answer to its own question (an RPC to a metadata
    server), not a peer's word that it read the blocks."""
    return any((c.callee or "").rpartition(".")[2].startswith("send") for c in fn.all_calls)


def _delaying_returns(lc, hook: str, false_values: tuple[str, ...], others: frozenset[str]
                      ) -> list[tuple[str, int, str]]:
    """``(function, line, first element)`` of the returns of ``hook``, and of
    the functions of the same name it delegates to, whose first element is
    not a literal meaning 'free now' (nor a call delegating the answer)."""
    idx = lc.spec.delay_element
    name = lc.functions[hook].name
    out = []
    for f in sorted(lc.runs_from([hook], others)):
        fn = lc.functions[f]
        if fn.name != name:
            continue
        for r in fn.all_returns:
            first = r.elements[idx].strip() if r.elements and idx < len(r.elements) else ""
            if first and first not in false_values and first != "None" and "(" not in first:
                out.append((f, r.line, first))
    return sorted(out, key=lambda x: (x[0] != hook, x[1]))
