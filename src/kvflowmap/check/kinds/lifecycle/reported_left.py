"""``lifecycle`` mode ``reported_left``: an id reported finished leaves the
container it was pending in (``kvflowmap.lifecycle.pending``).

A report function that walks its pending requests and returns the done ones
must take each reported id out of what it walked on the way to the return;
otherwise the id is reported again on every later call, and a ``while`` over
the container never ends.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.lifecycle._shared import functions, lifecycle, short, steps
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option
from kvflowmap.lifecycle.pending import still_pending

READS = ("Reads: per subject function, its loops over `self` containers (for and "
         "`while self.X`), the adds of the loop's id into a collection the function "
         "returns, the lifecycle model's removals and resets of that container (helpers "
         "included), and the control-flow graph from each add to each return.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``reported_left``."""

    methods: tuple[str, ...] = option((), "functions judged, by name (empty: the methods of "
                                          "the protocol's report channels)")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per loop whose reported ids can stay pending."""
    lc = lifecycle(ctx)
    names = set(opts.methods) or {m for c in lc.spec.channels for m in c.methods}
    fns = [f for f in functions(ctx, lc) if lc.functions[f].name in names]

    def one(f: str) -> list[Finding]:
        out = []
        for p in still_pending(lc.functions[f], lc.effects, lc.cfg(f)):
            out.append(ctx.finding(
                f, p.report_line,
                f"{short(f)} reports `{p.id_name}` (walked from self.{p.attr}, line "
                f"{p.loop_line}) and can return (line {p.return_line}) without taking it out "
                f"of self.{p.attr}: the same request is reported again on every later call "
                "(vLLM frees or finishes it twice), and a loop over the container never "
                "ends. Remove the id where it is reported.",
                path=steps(ctx, f, [(p.loop_line, f"ids walked from self.{p.attr}"),
                                    (p.report_line, f"`{p.id_name}` is reported"),
                                    (p.return_line, f"returned, still in self.{p.attr}")]),
                anchor=f"still-pending:{p.attr}"))
        return out

    return each_function(ctx, fns, one)
