"""``lifecycle`` mode ``polled_acted``: a transfer a report function sees
done is reported, taken out or handed on, on every path
(``kvflowmap.lifecycle.polled``).

A path that only logs after ``fut.query()`` said done (the report forgotten
on a failure branch) leaves the request in the polled container for good:
seen done every step, never reported.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.lifecycle._shared import functions, lifecycle, short, steps
from kvflowmap.check.model import Finding

READS = ("Reads: the `for`/`while` loops of each connected subject function that walk a "
         "request-keyed `self` container, their completion test (a call named in the "
         "protocol's `lifecycle.done_tests`, or a local bound to one), and, on every path "
         "after it, the lifecycle model's effects of each statement on the walked id.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``polled_acted`` (the completion test
    names come from the protocol's lifecycle section)."""


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per polling loop with a done path that forgets its request."""
    lc = lifecycle(ctx)

    def one(f: str) -> list[Finding]:
        out = []
        for u in lc.unacted(f):
            out.append(ctx.finding(
                f, u.line,
                f"{short(f)} sees a transfer of self.{u.attr} done (`{u.test}`, line "
                f"{u.test_line}), and on the path that ends here does nothing with "
                f"{u.rid}: it is neither reported, nor taken out of self.{u.attr}, nor "
                "handed on. The request stays in the container, is seen done again every "
                "step and never reported, so vLLM waits for it forever (or never frees its "
                f"blocks). Report {u.rid} (with its blocks as failed, if the transfer "
                f"failed) or take it out of self.{u.attr} on this path too.",
                path=steps(ctx, f, [(u.loop_line, f"walks self.{u.attr}"),
                                    (u.test_line, "the transfer is done"),
                                    (u.line, f"nothing happens to {u.rid}")]),
                anchor=f"unacted:{u.attr}"))
        return out

    return each_function(ctx, functions(ctx, lc), one)
