"""``lifecycle`` mode ``reported_once``: an id is reported only while it is
still pending, when another path reports the pending ones too
(``kvflowmap.lifecycle.reported_twice``).

A completion handler that asks whether the request is still pending, and
reports it either way, reports a second time a request an expiry already
reported (and freed).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.lifecycle._shared import by_function, lifecycle, short, steps
from kvflowmap.check.model import Finding
from kvflowmap.lifecycle.reported_twice import ReportedTwice

READS = ("Reads: in each connected function, the `if k in self.P:` tests whose true arm "
         "takes `k` out of `P` (inline or through a helper), the adds of `k` to a container "
         "a report hook reads outside that arm, and the other functions that take ids out "
         "of `P` and report (add to a reported container or return a collection).")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``reported_once`` (none)."""


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per unconditional report of a possibly no longer pending id."""
    lc = lifecycle(ctx)
    by_fn: dict[str, list[ReportedTwice]] = by_function(ctx, lc, lc.reported_twice())

    def one(f: str) -> list[Finding]:
        return [ctx.finding(
            f, r.line,
            f"{short(f)} reports {r.key} in {r.report.label} whether or not it is still in "
            f"{r.pending.label} (the test at line {r.test_line}), while {short(r.other)} "
            f"takes ids out of {r.pending.label} and reports them too (line "
            f"{r.other_line}): a request that went that way first is reported a second "
            "time, and what this function records for it on the other arm waits for an "
            "event that already happened. Report it only on the arm where it was still "
            "pending.",
            path=steps(ctx, f, [(r.test_line, f"is {r.key} still in {r.pending.label}?"),
                                (r.line, "reports it either way")]) +
            steps(ctx, r.other, [(r.other_line, f"takes ids out of {r.pending.label} and "
                                                "reports them")]),
            anchor=f"reported-twice:{r.report.label}") for r in by_fn[f]]

    return each_function(ctx, sorted(by_fn), one)
