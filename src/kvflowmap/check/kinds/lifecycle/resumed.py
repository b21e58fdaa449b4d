"""``lifecycle`` mode ``resumed``: the new blocks of a request resumed after
preemption replace its old ones (``kvflowmap.lifecycle.resumed``).

vLLM hands each running request's ``new_block_ids`` to the connector every
step; for a request resumed after preemption they are its whole new block
table, and its old blocks were freed at preemption. A connector that appends
them to the request's blocks without telling a resumed request apart loads
into, or saves from, blocks other requests now own.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.lifecycle._shared import by_function, lifecycle, short, steps
from kvflowmap.check.model import Finding
from kvflowmap.lifecycle.resumed import ResumedAppend

READS = ("Reads: per function, the attribute reads of the protocol's "
         "`lifecycle.running.blocks` (`new_block_ids`) on its `running.carrier` "
         "(`scheduled_cached_reqs`, or a local bound to it); the names bound from them "
         "(assignments, and calls given them other than scalar builtins); `extend`/"
         "`append`/`insert` calls on `self` containers given those names, there and in the "
         "analysed functions they are passed to (two calls deep); and any read of the "
         "`running.resumed` names (`resumed_req_ids`, `resumed_from_preemption`) in them.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``resumed`` (none: the carrier, its
    block field and the resumed names are the protocol's ``lifecycle.running``)."""


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per function appending the running requests' new blocks
    to per-request state with no test for a resumed request."""
    lc = lifecycle(ctx)
    by_fn: dict[str, list[ResumedAppend]] = by_function(ctx, lc, lc.resumed_appends())
    spec = lc.spec
    field = f"{spec.running_carrier}.{spec.running_blocks}"
    resumed = " / ".join(spec.resumed)

    def one(f: str) -> list[Finding]:
        return [ctx.finding(
            f, r.line,
            f"{short(f)} appends the running requests' {field} to {r.container} "
            f"({short(r.append_fqn)}, line {r.append_line}) and never asks whether the "
            f"request was resumed after preemption ({resumed}): for a resumed request those "
            "are its whole new block table, and its old blocks were freed when it was "
            "preempted. Appended, the request keeps the freed blocks in front of the new "
            "ones, and the connector loads into or saves from blocks other requests now "
            "own. Replace the request's blocks when it was resumed (or drop its state "
            "when it is preempted)",
            path=steps(ctx, f, [(r.line, f"reads {field}")]) + tuple(
                ctx.step(g, line, "passes them on") for g, line in r.via if g != f or
                line != r.line) + steps(ctx, r.append_fqn,
                                        [(r.append_line, f"appends them to {r.container}")]),
            anchor=f"resumed:{r.container}") for r in by_fn[f]]

    return each_function(ctx, sorted(by_fn), one)
