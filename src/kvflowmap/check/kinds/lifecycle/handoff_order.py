"""``lifecycle`` mode ``handoff_order``: a request is registered where the
background worker looks it up before it is handed to that worker
(``kvflowmap.lifecycle.handoff_order``).

vllm-ascend 0.18.0's Mooncake worker queued each pull to its receiving thread
in ``start_load_kv`` and registered the request ids with the task tracker
after the loop: a pull that finished first (no blocks to read, a fast
failure) was looked up in the tracker, not found, logged and dropped. 0.23.0
registers the ids before it queues the pulls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.lifecycle._shared import functions, lifecycle, off_line, short
from kvflowmap.check.model import Finding
from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.handoff_order import gates, late_registrations
from kvflowmap.lifecycle.containers import owner_type
from kvflowmap.lifecycle.handoffs import queue_handoffs
from kvflowmap.lifecycle.view import FnView

READS = ("Reads: the functions run in the background (threads, executors, callbacks the "
         "connector starts, loops taking from its queues) and their `if` tests of "
         "membership (`in`/`not in`) in a `self` container; per connected function, in source order with the arms of each `if` "
         "and `try`, the statements that hand a request id to background work (a queue "
         "`put`, a spawn, or a call that does so, two deep) and those that add an id to "
         "one of those containers (here or in a call, two deep).")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``handoff_order`` (none: the shape is
    structural)."""


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per container a function registers an id in only after
    handing the id to the background worker that looks it up there."""
    lc = lifecycle(ctx)
    background = lc.background_code()
    gated = gates(lc.functions, background, lambda fn, n: lc.state.is_id(fn, n))
    if not gated:
        return []

    def callees(fn: FnView, s: Stmt) -> list[FnView]:
        return [lc.functions[t] for c in fn.calls(s) for t in lc.subject_callees(fn, c)]

    roots = lc.background()

    def work(at: list[tuple[str, int]]) -> set[str]:
        # what a hand-off starts: the targets spawned there, and the
        # background loops that take from the queues put on there
        starts = [sp.target for f, line in at for sp in lc.spawned
                  if sp.spawner == f and sp.line == line]
        starts += [t for f, _ in at for t in handed.get(f, ()) if t in roots]
        return lc.runs_from(starts)

    def other_work(f: str) -> Callable[[FnView, list[tuple[str, int]], str], set[str]]:
        def on(fn: FnView, at: list[tuple[str, int]], receiver: str) -> set[str]:
            runs = work(at)
            if f in runs:
                # background code handing on to the loop it runs in (a retry
                # put back on its own queue) registers in time: one thread
                return set()
            return _for_receiver(ctx, runs, owner_type(fn, receiver, lc.effects.values)
                                 if receiver else None)
        return on

    handed = queue_handoffs(lc.functions)
    out = []
    for f in functions(ctx, lc):
        for r in late_registrations(lc.functions[f], gated, lc.effects.of, callees,
                                    lambda fn, n: lc.state.is_id(fn, n), other_work(f)):
            g = r.gate
            out.append(ctx.finding(
                f, r.line,
                f"{short(f)} hands `{r.id}` to background work (line {r.handoff_line}, "
                f"{r.how}) before it registers it in {g.container.label} here, and "
                f"{short(g.fqn)}, which runs in the background, looks it up there (line "
                f"{g.line}): a transfer that ends before this line runs (nothing to read, a "
                "fast failure, a peer that answers at once) finds no entry, and the request "
                "is never reported and waits forever. Register the id before handing it on",
                path=(ctx.step(f, r.handoff_line, f"hands `{r.id}` on ({r.how})"),
                      ctx.step(g.fqn, g.line, f"the background worker looks it up in "
                                              f"{g.container.label}"),
                      ctx.step(f, r.line, "only now registered there")),
                anchor=f"handoff-order:{g.container.attr}"))
    return out


def _for_receiver(ctx: CheckContext, runs: set[str], receiver: str | None) -> set[str]:
    """``runs`` without the methods of a sibling of the receiver's class:
    work handed to ``self.recv_thread`` (a ``RecvThread``) runs the loop of
    their common base, whose ``self._handle()`` dispatches to the receiver's
    override, never to a ``SendThread``'s."""
    if receiver is None or not ctx.classes.is_class(receiver):
        return runs
    return runs - off_line(ctx, receiver, runs, exact=False)
