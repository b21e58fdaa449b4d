"""``lifecycle`` mode ``counted``: pending state a request can enter twice
counts (``kvflowmap.lifecycle.counts``).

A per-step hook that queues a request's work each step and marks it pending
in a set lets the first task to complete report the request while later
ones still run: vLLM frees (or reuses) blocks that are still being read or
written.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.lifecycle._shared import functions, lifecycle, short, steps
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option
from kvflowmap.lifecycle.counts import SetPending

READS = ("Reads: the functions the per-step hooks reach (calls, threads, queue hand-offs "
         "of the lifecycle model); in each, ids added with `add` to a request-keyed "
         "container, the queue puts and spawns of the same function, the membership tests "
         "on that container, and the removals of the id from it in other functions.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``counted``."""

    per_step: tuple[str, ...] = option(
        ("wait_for_save", "save_kv_layer", "start_load_kv", "build_connector_meta"),
        "hooks that run every step: what they reach may queue the same request again")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per set-pending container of a function."""
    lc = lifecycle(ctx)
    wanted = set(functions(ctx, lc))
    by_fn: dict[str, list[SetPending]] = {}
    for p in lc.set_pending(opts.per_step):
        if p.fqn in wanted:
            by_fn.setdefault(p.fqn, []).append(p)
    return each_function(ctx, sorted(by_fn), lambda f: [_finding(ctx, p) for p in by_fn[f]])


def _finding(ctx: CheckContext, p: SetPending) -> Finding:
    label = p.container.label
    msg = (f"{short(p.fqn)} marks the request pending in the set {label} (line {p.add_line}) "
           f"and queues its work (line {p.put_line}) every time it runs, already pending or "
           f"not, while {short(p.removed_in)} takes it out of {label} when one task completes "
           f"(line {p.removed_line}): with two tasks in flight the first one to finish reports "
           "the request and the second still works on its blocks. Count the pending tasks "
           f"per request (`{p.container.attr}[rid] = n + 1`, done at 0)")
    path = (*steps(ctx, p.fqn, [(p.add_line, f"pending in {label}: a set, no count"),
                                (p.put_line, "work queued again each time")]),
            *steps(ctx, p.removed_in, [(p.removed_line, "one completion takes it out")]))
    return ctx.finding(p.fqn, p.add_line, msg, path=path, anchor=f"set-pending:{label}")
