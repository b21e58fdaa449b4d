"""``lifecycle`` mode ``count_moved``: a per-id count read for a completion
moves on every way on (``kvflowmap.lifecycle.counts_moved``).

vLLM's ``MultiConnector.get_finished`` and PegaFlow's
``_complete_save_requests`` count a request's outstanding saves down as
each part reports: the last part removes the entry and reports the request,
every other part writes the count back one lower. A way on that finds the
count and leaves it as it was loses that part: the count never reaches its
end and the request is never reported finished.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.lifecycle._shared import TEARDOWN, functions, lifecycle, short, steps
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option
from kvflowmap.lifecycle.counts_moved import Unmoved

READS = ("Reads: the `self` containers some statement counts in (`self.X[k] += 1`, "
         "`self.X[k] = n - 1`); per function, the locals bound from one of their entries "
         "(`self.X.get(k)` with no default, `self.X[k]`) that no move of the entry comes "
         "before on every path; the statements that write or remove the entry, and those "
         "that pass the id on (a call, a container, a store, a return); the control-flow "
         "graph and the tests that find the entry missing (`is None`, a false count, "
         "`k not in self.X`).")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``count_moved``."""

    exempt_methods: tuple[str, ...] = option(TEARDOWN, "methods whose exits are teardown")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per count read and moved on one way on, left on another."""
    lc = lifecycle(ctx)
    fns = [f for f in functions(ctx, lc) if lc.functions[f].name not in opts.exempt_methods]
    return each_function(ctx, fns, lambda f: [_finding(ctx, u) for u in lc.unmoved_counts(f)])


def _finding(ctx: CheckContext, u: Unmoved) -> Finding:
    entry = f"`self.{u.container}[{u.key}]`" if u.key else f"`self.{u.container}`'s entry"
    where = (f"where the test at line {u.arm_line} is {str(u.arm_true).lower()}, "
             f"the way on (ending at line {u.exit_line})") if u.arm_line is not None else \
        f"the way on ending at line {u.exit_line}"
    msg = (f"{short(u.fqn)} reads the count `{u.name}` from {entry} (line {u.read_line}) and "
           f"moves it on one way on (line {u.moved_line}), but {where} finds the count and "
           "leaves it as it was, doing nothing else with the id: that part's completion is "
           "lost, the count never reaches its end and the request is never reported. Write "
           "the count back or remove the entry on this way on too")
    path = steps(ctx, u.fqn, [(u.read_line, f"`{u.name}` is read from {entry} here"),
                              (u.moved_line, "the count is moved here on one way on"),
                              (u.exit_line, "this way on leaves it as it was")])
    at = u.exit_line if u.arm_line is None else u.arm_line
    return ctx.finding(u.fqn, at, msg, path=path, anchor=f"unmoved:{u.name}")
