"""``lifecycle`` mode ``outcome_raised``: a report hook survives a failed
transfer (``kvflowmap.lifecycle.raised_outcomes``).

tpu-inference 0.31.0's ``get_finished`` called ``future.result()`` on each
request's finished pull with nothing around it: a pull that raised took the
worker's step down instead of being reported as failed blocks. 0.32.0
catches it and reports the request's blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.lifecycle._shared import functions, lifecycle, short, steps
from kvflowmap.check.model import Finding
from kvflowmap.lifecycle.raised_outcomes import raised_outcomes

READS = ("Reads: the report hooks (the protocol's `lifecycle.reports` methods) among the "
         "subject functions, the analysed functions they call (three calls deep) where "
         "the call's exception leaves the caller uncaught, the control-flow graph of each "
         "with exception edges, and the request records (values read by a request id or "
         "walked with one) whose `result()` they call.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``outcome_raised`` (it has none)."""


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per uncaught read of a request's transfer outcome in a report hook."""
    lc = lifecycle(ctx)
    reports = {m for ch in lc.spec.channels for m in ch.methods}
    hooks = sorted(f for f in functions(ctx, lc) if f.rpartition(".")[2] in reports)
    out, seen = [], set()
    for hook in hooks:
        for r in raised_outcomes(hook, lc.functions, lc.cfg, lc.state.keyed_attrs,
                                 lambda f: lc.state.of(f).records, lc.subject_callees):
            if (r.fqn, r.line) in seen:
                continue
            seen.add((r.fqn, r.line))
            path = (*(s for f, line in r.chain
                      for s in steps(ctx, f, [(line, "calls, catching nothing")])),
                    ctx.step(r.fqn, r.line, f"`{r.future}.result()` re-raises the "
                                            "transfer's exception"))
            out.append(ctx.finding(
                r.fqn, r.line,
                f"`{r.future}.result()` re-raises what the request's transfer raised, and "
                f"nothing catches it on the way out of {short(hook)}: one failed load takes "
                "the report hook, and the worker's step, down instead of being reported. "
                "Catch it, report the request's blocks as failed (the failed-blocks hook) and "
                "the request as finished",
                path=path, anchor=f"outcome-raised:{r.future}"))
    return out
