"""``lifecycle`` mode ``retired``: background work that retires its item's
entry from the connector's state does so on every way out
(``kvflowmap.lifecycle.retirements``).

PegaFlow's RDMA-done waiter takes the request out of ``_submitted`` in a
``finally``; vLLM's Mooncake store sending thread retires the job from
``stored_requests`` in one. With the cleanup after the ``try`` instead, a
job cancelled or skipped on an early ``return`` keeps its entry for good:
the next submission for the request is refused as a duplicate, or the
scheduler keeps the job's blocks referenced.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.lifecycle._shared import TEARDOWN, functions, lifecycle, short, steps
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option
from kvflowmap.lifecycle.retirements import Unretired

READS = ("Reads: the functions background work is handed an item with (a spawn given "
         "arguments and the target's overrides; a call, in a background loop, given what "
         "the loop took off a queue); per such function, the statements that remove a key "
         "or element taken from the item out of `self` state (a `self.X` container, or a "
         "local bound from `self.X.get(...)`/`self.X[...]`), there or in an analysed helper "
         "given the item; the control-flow graph with exception edges and the `if` tests "
         "that read that state (a membership lookup's missing arm excuses a way out).")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``retired``."""

    exempt_methods: tuple[str, ...] = option(TEARDOWN, "methods whose exits are teardown")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per work item retired on one way out and left on another."""
    lc = lifecycle(ctx)
    handed = lc.handed_items()
    fns = [f for f in functions(ctx, lc)
           if f in handed and lc.functions[f].name not in opts.exempt_methods]
    return each_function(ctx, fns, lambda f: [_finding(ctx, u) for u in lc.unretired(f)])


def _finding(ctx: CheckContext, u: Unretired) -> Finding:
    where = ", ".join(f"`self.{c}`" for c in u.containers)
    if u.escaped:
        how = (f"an exception leaves from line {u.exit_line}, where no caller sees it "
               "(the thread or task running it only logs)")
        last = "an exception from here leaves the function, and nobody retires the item"
    else:
        how = ("an exception is caught and the function carries on" if u.caught
               else "this way out") + f" (the path ends at line {u.exit_line})"
        last = f"this way out leaves `{u.name}` in {where}"
    msg = (f"{short(u.fqn)} is handed `{u.name}` as background work and takes it out of "
           f"{where} on one way out (line {u.retired_line}) but not when {how}: the entry "
           "stays for good (a later submission of the request is refused as a duplicate, "
           "its blocks stay referenced, the request is never reported). Retire it in a "
           "`finally:` so that every way out does")
    path = steps(ctx, u.fqn, [(u.retired_line, f"`{u.name}` is retired from {where} here"),
                              (u.exit_line, last)])
    return ctx.finding(u.fqn, u.exit_line, msg, path=path,
                       anchor=f"unretired:{u.name}:{'escaped' if u.escaped else 'exit'}")
