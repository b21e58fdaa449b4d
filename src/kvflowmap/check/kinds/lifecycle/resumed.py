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
from kvflowmap.check.options import option
from kvflowmap.lifecycle.resumed import PartialReset, ResumedAppend

READS = ("Reads: per function, the attribute reads of the protocol's "
         "`lifecycle.running.blocks` (`new_block_ids`) on its `running.carrier` "
         "(`scheduled_cached_reqs`, or a local bound to it); the names bound from them "
         "(assignments, and calls given them other than scalar builtins); `extend`/"
         "`append`/`insert` calls on `self` containers given those names, there and in the "
         "analysed functions they are passed to (two calls deep); and any read of the "
         "`running.resumed` names (`resumed_req_ids`, `resumed_from_preemption`) in them.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``resumed`` (the carrier, its block
    field and the resumed names are the protocol's ``lifecycle.running``)."""

    hows: tuple[str, ...] = option(("appended", "rebased"),
                                   "what to report: appended (the new blocks of a resumed "
                                   "request appended to its old ones), rebased (an arm for a "
                                   "resumed request that resets part of the request's state "
                                   "set up together and leaves the rest)")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per function appending the running requests' new blocks
    to per-request state with no test for a resumed request, and one per
    function whose resumed arm resets only part of the state set up together."""
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

    partial: dict[str, list[PartialReset]] = by_function(ctx, lc, lc.partial_resets())

    def rebased(f: str) -> list[Finding]:
        return [ctx.finding(
            f, r.line,
            f"{short(f)} sets self.{r.reset} again for a request resumed after preemption, "
            f"but not self.{', self.'.join(r.kept)}, which {short(r.init_fqn)} sets up with "
            f"it (line {r.init_line}) and this function keeps updating (line "
            f"{r.update_line}): after the preemption they keep the values of the request's "
            "first life, counted against blocks it no longer has. Reset them in the same arm",
            path=(ctx.step(r.init_fqn, r.init_line, "the request's state is set up together"),
                  ctx.step(f, r.line, f"the resumed arm resets self.{r.reset} only"),
                  ctx.step(f, r.update_line, f"self.{r.kept[0]} keeps its old value")),
            anchor=f"rebased:{r.reset}") for r in partial[f]]

    return (each_function(ctx, sorted(by_fn), one) if "appended" in opts.hows else []) + \
        (each_function(ctx, sorted(partial), rebased) if "rebased" in opts.hows else [])
