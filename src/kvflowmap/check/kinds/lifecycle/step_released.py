"""``lifecycle`` mode ``step_released``: a hook that releases something for
every request of the step on its way out releases it on its early exits too
(``kvflowmap.lifecycle.step_releases``).

``wait_for_save`` unpinning each request of the step (what the scheduler's
lookup pinned) after an early ``return`` for one role leaks every pin of
every step on that role.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.lifecycle._shared import functions, lifecycle, short, steps
from kvflowmap.check.model import Finding
from kvflowmap.lifecycle.step_releases import SkippedRelease

READS = ("Reads: the `for` loops of each connected subject function whose every turn "
         "calls a release (the protocol's `lifecycle.releases`) with a request id of the "
         "loop's element, the control-flow graph from the entry to each `return`, and the "
         "`if` tests around that return.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``step_released`` (the release names
    come from the protocol's lifecycle section)."""


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per early return that skips a per-request release loop."""
    lc = lifecycle(ctx)

    def one(f: str) -> list[Finding]:
        out = []
        for x in lc.skipped_releases(f):
            if x.handed:
                out.append(_skipped_handoff(ctx, f, x))
                continue
            callee = x.call.rpartition(".")[2]
            what = (f"the loop that calls {callee}() for every request of {x.walked}"
                    if x.loop_line != x.release_line else
                    f"{callee}({x.walked}), which releases every request of it")
            out.append(ctx.finding(
                f, x.line,
                f"{short(f)} returns here before {what} (line {x.loop_line}): on this path nothing is "
                f"released for any of them, so what another hook took for each request (a "
                f"pin, a lease, a lock) is held for good, once per step that comes this "
                f"way. Release them before returning, or move the release to a `finally:`.",
                path=steps(ctx, f, [(x.line, "returns early"),
                                    (x.loop_line, f"the release of {x.walked} it skips"),
                                    (x.release_line, f"{callee}() for each request")]),
                anchor=f"step-release:{callee}"))
        return out

    return each_function(ctx, functions(ctx, lc), one)


def _skipped_handoff(ctx: CheckContext, f: str, x: SkippedRelease) -> Finding:
    msg = (f"{short(f)} returns here before it hands the ids gathered in {x.walked} to "
           f"{x.handed} (line {x.loop_line}) and empties it (line {x.release_line}): on this "
           "path this step's ids are never passed on, and on a path taken every step (a "
           "branch for another vLLM or mode) never at all, so what each of them holds "
           "(the pin or lookup taken for it, released where the hand-over arrives) is held "
           "for good and the collection grows. Hand them over on this path too, or return "
           "after the hand-over.")
    path = steps(ctx, f, [(x.line, "returns early"),
                          (x.loop_line, f"the hand-over of {x.walked} it skips"),
                          (x.release_line, f"{x.walked} emptied for the next step")])
    return ctx.finding(f, x.line, msg, path=path, anchor=f"step-handoff:{x.walked}")
