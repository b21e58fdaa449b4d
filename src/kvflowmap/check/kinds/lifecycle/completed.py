"""``lifecycle`` mode ``completed``: a future a function is handed is
completed on every way out of it (``kvflowmap.lifecycle.completions``).

The task a transfer thread serves carries the future its submitter (and
``get_finished``, through ``future.done()``) waits on. A path that leaves
the serving function without completing it, an ``except`` that only logs or
an early ``return``, leaves that request unreported forever, with no error.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.lifecycle._shared import (TEARDOWN, functions, lifecycle, short,
                                                     steps)
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option
from kvflowmap.lifecycle.completions import Uncompleted

READS = ("Reads: per subject function, the parameters and the locals taken out of them or "
         "out of state (tuple unpacking, `pop`, a queue `get`) that a call completes "
         "(`x.set_result(...)`, or an analysed helper given `x` that does, by summary); "
         "the control-flow graph with exception edges; stores, returns and calls outside "
         "the analysis that take the handle over.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``completed``."""

    completers: tuple[str, ...] = option(("set_result", "set_exception"),
                                         "methods that complete a handle (a future)")
    exempt_methods: tuple[str, ...] = option(TEARDOWN, "methods whose exits are teardown")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per handle left uncompleted on some way out."""
    lc = lifecycle(ctx)
    fns = [f for f in functions(ctx, lc) if lc.functions[f].name not in opts.exempt_methods]
    return each_function(ctx, fns, lambda f: [_finding(ctx, u)
                                              for u in lc.uncompleted(f, opts.completers)])


def _finding(ctx: CheckContext, u: Uncompleted) -> Finding:
    if u.escaped:
        return _escaped(ctx, u)
    how = ("an exception is caught and the function carries on" if u.caught
           else "this way out")
    msg = (f"`{u.name}` in {short(u.fqn)} is completed on one path (line {u.completed_line}) "
           f"but not when {how} (the path ends at line {u.exit_line}): whoever waits on it "
           "(the submitter, `get_finished` asking `done()`) waits forever, and the request "
           "is never reported. Complete it (`set_result(False)`, `set_exception(e)`) on "
           "that path too")
    path = steps(ctx, u.fqn, [(u.bound_line, f"`{u.name}` is handed in here"),
                              (u.completed_line, f"`{u.name}` is completed on this path"),
                              (u.exit_line, f"this path ends with `{u.name}` not completed")])
    return ctx.finding(u.fqn, u.exit_line, msg, path=path, anchor=f"uncompleted:{u.name}")


def _escaped(ctx: CheckContext, u: Uncompleted) -> Finding:
    why = ctx.lifecycle().unseen_why(u.fqn) or ("it runs where no caller sees the exception "
                                                 "(a thread, a task whose future nobody keeps, "
                                                 "callers whose `except` only logs)")
    msg = (f"`{u.name}` in {short(u.fqn)} is handed on on its normal way out (line "
           f"{u.completed_line}) but not when an exception leaves from line {u.exit_line}: "
           f"{why}, so the item is lost with it and "
           "whoever waits for it (the peer waiting for its answer, the reporter of the "
           "request) waits forever. Complete or fail it in a `finally` or an `except`")
    path = steps(ctx, u.fqn, [(u.bound_line, f"`{u.name}` is handed in here"),
                              (u.completed_line, f"`{u.name}` is handed on on this path"),
                              (u.exit_line, "an exception from here leaves the function, "
                                            "and nobody sees it")])
    return ctx.finding(u.fqn, u.exit_line, msg, path=path, anchor=f"escaped:{u.name}")
