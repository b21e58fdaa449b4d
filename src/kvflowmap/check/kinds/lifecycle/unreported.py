"""``lifecycle`` mode ``unreported``: an id a report function takes out of
pending state is reported (``kvflowmap.lifecycle.unreported``).

Where the report functions take ids out of one container and report them at
one place, every other place they take an id out of it must report it too,
or hand it on; otherwise nothing will ever report that request.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.lifecycle._shared import functions, lifecycle, short, steps
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option

READS = ("Reads: the report functions (the protocol's report-channel methods and the "
         "subject functions they call, up to 3 calls away) that return a local collection; "
         "in each, every removal of an id from a request-keyed container (`pop`, `del`, "
         "`discard`, `remove`, or a reset after a loop over it) and whether the loop or body "
         "that binds the id adds it to a returned collection, returns it, or hands it on.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``unreported``."""

    containers: tuple[str, ...] = option((), "container labels judged (`Class.attr`); empty: "
                                             "every one with a reporting removal")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per removal that reports nothing while another removal of
    the same container, in a report function, reports the id."""
    lc = lifecycle(ctx)
    wanted = set(functions(ctx, lc))
    found = [u for u in lc.unreported() if u.removal.fqn in wanted and
             (not opts.containers or u.removal.container.label in opts.containers)]
    by_fn: dict[str, list] = {}
    for u in found:
        by_fn.setdefault(u.removal.fqn, []).append(u)

    def one(f: str) -> list[Finding]:
        out = []
        for u in by_fn[f]:
            r, p = u.removal, u.paired
            where = f"line {p.line}" if p.fqn == r.fqn else f"{short(p.fqn)}, line {p.line}"
            out.append(ctx.finding(
                f, r.line,
                f"{short(f)} takes `{r.id_name}` out of {r.container.label} and neither "
                f"reports it nor hands it on, while the other way ids leave "
                f"{r.container.label} ({where}) reports them finished: nothing will report "
                "this request again, so vLLM waits for it forever (or never frees its "
                "blocks). Add the id to the collection this function returns.",
                path=steps(ctx, f, [(r.line, f"`{r.id_name}` taken out, not reported")]) +
                steps(ctx, p.fqn, [(p.line, f"elsewhere `{p.id_name}` is taken out and "
                                            "reported")]),
                anchor=f"unreported:{r.container.label}"))
        return out

    return each_function(ctx, sorted(by_fn), one)
