"""``lifecycle`` mode ``removed_together``: request state that is removed
together is removed together on every way a request ends
(``kvflowmap.lifecycle.together``).

When one place takes a request id out of ``{A, B, C}`` of an object and
another takes it out of ``{A, B}`` only, though ``C`` was filled with them,
the second way of ending leaves the request's ``C`` entry behind.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.lifecycle._shared import functions, lifecycle, short
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option
from kvflowmap.lifecycle.together import Partial

READS = ("Reads: per subject function, the request-keyed containers each statement list "
         "(body, branch, handler, finally) removes an id from, the functions that fill "
         "each container, and the removals and resets of the function and of the analysed "
         "functions it calls (two calls deep).")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``removed_together``."""

    max_steps: int = option(6, "removals of the other place listed in a finding's path")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per place that leaves part of a request's state behind."""
    lc = lifecycle(ctx)
    wanted = set(functions(ctx, lc))
    return [_finding(ctx, p, opts) for p in lc.partial_removals() if p.group.fqn in wanted]


def _finding(ctx: CheckContext, p: Partial, opts: Options) -> Finding:
    g, whole = p.group, p.whole
    cls = p.kept.owner.rpartition(".")[2]
    done = ", ".join(f"self.{c.attr}" for c, _ in g.removed)
    msg = (f"{short(g.fqn)} (line {g.line}) takes the request id out of {done} of {cls} but "
           f"not out of self.{p.kept.attr}, which {short(whole.fqn)} (line {whole.line}) "
           "removes together with them and which is filled with them: this way of ending "
           f"leaves the request's self.{p.kept.attr} entry behind (it leaks, and whatever "
           "waits on it waits for a request that is gone). Remove it here too.")
    path = tuple(ctx.step(g.fqn, line, f"self.{c.attr}: the id leaves") for c, line in g.removed)
    path += tuple(ctx.step(whole.fqn, line, f"self.{c.attr}: removed together here")
                  for c, line in whole.removed[:opts.max_steps])
    return ctx.finding(g.fqn, g.line, msg, path=path, anchor=f"kept:{p.kept.attr}")
