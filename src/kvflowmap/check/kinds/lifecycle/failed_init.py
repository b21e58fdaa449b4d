"""``lifecycle`` mode ``failed_init``: a finalizer reads only what ``__init__``
sets before it can raise (``kvflowmap.lifecycle.finalizer``).

vLLM 0.16.0's NIXL worker raised in ``__init__`` when NIXL was missing;
``__del__`` then ran ``shutdown()``, which read an executor never created,
raised ``AttributeError`` and skipped the rest of its cleanup.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.lifecycle._shared import functions, lifecycle, short
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option
from kvflowmap.lifecycle.finalizer import early_reads

READS = ("Reads: per subject class, its finalizer (or an analysed base's), its `__init__`'s "
         "first `raise` or `assert` outside a `try`, the `self.` attributes assigned before "
         "and after it (and by a base `__init__` called before it, or in the class body), "
         "and the `self.` reads of the finalizer and of the methods of the same object it "
         "calls, with their `hasattr`/`getattr` tests and `try` blocks.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``failed_init``."""

    finalizers: tuple[str, ...] = option(
        ("__del__",), "methods Python runs on an object whose __init__ raised")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per class whose teardown reads an attribute set after a
    failure point of its ``__init__``."""
    lc = lifecycle(ctx)
    wanted = set(functions(ctx, lc))
    out = []
    for r in early_reads(lc.functions, lc.classes, opts.finalizers):
        # the connector makes such objects, or runs their teardown
        if not {r.fqn, r.finalizer, r.init} & wanted:
            continue
        more = [a for a in r.late if a != r.attr]
        also = f" (and {', '.join('self.' + a for a in more[:3])}" + \
            (", ..." if len(more) > 3 else "") + ")" if more else ""
        via = "" if r.fqn == r.finalizer else f", through {short(r.fqn)}"
        out.append(ctx.finding(
            r.fqn, r.line,
            f"{short(r.fqn)} reads self.{r.attr}{also}, which {short(r.init)} sets only after "
            f"it can fail (line {r.fails_at}); Python still finalizes an object whose "
            f"__init__ raised, so {short(r.finalizer)}{via} raises AttributeError there and "
            "the cleanup after it never runs (an error that hides the real one, and whatever "
            "was set up before the failure stays held). Test `hasattr(self, ...)` first, or "
            "set the attributes before anything can raise",
            path=(ctx.step(r.init, r.fails_at, "__init__ can fail here"),
                  ctx.step(r.finalizer, lc.functions[r.finalizer].fact.line,
                           "the finalizer still runs"),
                  ctx.step(r.fqn, r.line, f"self.{r.attr} does not exist yet")),
            anchor=f"failed-init:{r.attr}"))
    return out
