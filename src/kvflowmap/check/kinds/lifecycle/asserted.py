"""``lifecycle`` mode ``asserted``: a hook does not assert that a request's
entry is still in a container another path takes entries out of
(``kvflowmap.lifecycle.asserted``).

``v = c.pop(req_id, None); assert v is not None`` crashes the hook, and with
it the engine and every request on it, for the request whose entry a
failure handler, a preemption arm or an abort already removed.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.lifecycle._shared import TEARDOWN, functions, lifecycle, short, steps
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option
from kvflowmap.lifecycle.asserted import Asserted

READS = ("Reads: in every connected subject function but constructors and teardown, the "
         "`assert` statements whose test claims an entry of a request-keyed container is "
         "there (a local read from it with a default, `c.get(k)` or `c.pop(k, None)`, "
         "asserted truthy or not None; or `k in c`), and the removals (pops, `del`, "
         "discards, clears) other functions make from that container.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``asserted``."""

    teardown_methods: tuple[str, ...] = option(
        (*TEARDOWN, "*reset_cache"), "teardown methods (globs): their removals end every "
        "request at once (vLLM resets the connector's cache only with no request running)")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per assert of an entry another function removes."""
    lc = lifecycle(ctx)
    wanted = set(functions(ctx, lc))
    by_fn: dict[str, list[Asserted]] = {}
    for a in lc.asserted(opts.teardown_methods):
        if a.fqn in wanted:
            by_fn.setdefault(a.fqn, []).append(a)

    def one(f: str) -> list[Finding]:
        out = []
        for a in by_fn[f]:
            label = a.container.label
            out.append(ctx.finding(
                f, a.line,
                f"{short(f)} asserts that the request's entry in {label} is there, but "
                f"{short(a.remover)} takes entries out of it (line {a.remover_line}): for a "
                "request that went that way the assert fails, and the AssertionError ends "
                "the hook and the engine with every request on it. Handle the missing entry "
                "(skip it, or report the request failed) instead of asserting it.",
                path=steps(ctx, f, [(a.fetch_line, f"reads the entry of {label}"),
                                    (a.line, "asserts it is there")]) +
                steps(ctx, a.remover, [(a.remover_line, f"removes entries of {label}")]),
                anchor=f"asserted:{label}"))
        return out

    return each_function(ctx, sorted(by_fn), one)
