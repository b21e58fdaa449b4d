"""``lifecycle`` mode ``parts_done``: an entry of several parts is removed
once all of them are done, not inside the loop over them
(``kvflowmap.lifecycle.parts_done``).

vLLM 0.9.1's NIXL worker reported a request finished, and deleted its entry,
at the first of its transfer handles that was done: the request's KV was
read before the other handles had landed, and the next done handle deleted
the entry again (``KeyError`` out of ``get_finished``). 0.9.2 removes it after
the loop, when no handle is still in progress.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.lifecycle._shared import functions, lifecycle, short
from kvflowmap.check.model import Finding
from kvflowmap.lifecycle.parts_done import part_removals

READS = ("Reads: per subject function, its `for` statements (target names and iterable: "
         "an outer loop over `C.items()`, an inner one over the entry it took), the "
         "container removals (`del C[K]`, `C.pop(K)`) in the inner loop's body, and the "
         "`break`/`return`/`raise` statements after each in its statement list.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``parts_done`` (none: the shape is
    structural)."""


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per removal of an entry inside the loop over its parts."""
    lc = lifecycle(ctx)
    out = []
    for f in functions(ctx, lc):
        for r in part_removals(lc.functions[f]):
            out.append(ctx.finding(
                f, r.line,
                f"{short(f)} removes {r.key} from {r.container} inside the loop over the "
                f"parts of its entry (line {r.inner_line}) and goes on with the next part: "
                f"the entry is gone at the first part this arm sees, while the others may "
                f"still be in flight (whatever reports {r.key} here reports it too early), "
                f"and the next part that takes this arm removes it again (KeyError). "
                "Note per part whether it is done, and remove the entry after the inner "
                "loop, once none is in progress (or break out of it here)",
                path=(ctx.step(f, r.outer_line, f"takes {r.key}'s entry from {r.container}"),
                      ctx.step(f, r.inner_line, "loops over the entry's parts"),
                      ctx.step(f, r.line, f"removes {r.key}, and the loop goes on")),
                anchor=f"parts-done:{r.container}"))
    return out
