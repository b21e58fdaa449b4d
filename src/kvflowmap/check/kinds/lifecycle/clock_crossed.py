"""``lifecycle`` mode ``clock_crossed``: a process-local clock reading stays in
its process (``kvflowmap.lifecycle.clocks``).

vLLM 0.26.0's NIXL connector stamped lease deadlines with the scheduler's
``time.perf_counter()``, sent them in the step's metadata, and the worker
compared them with its own ``perf_counter()``; 0.27.0 rebases them on
arrival.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.lifecycle._shared import functions, lifecycle, short
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option
from kvflowmap.lifecycle.clocks import ClockCrossing, crossings

READS = ("Reads: the clock calls of the subject, what each statement of scheduler-only code "
         "computes from them into locals, `self` attributes and another object's fields "
         "(the metadata), the worker-only reads of those fields, what worker code computes "
         "from them, and its ordering comparisons and `min`/`max` calls.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``clock_crossed``."""

    clocks: tuple[str, ...] = option(
        ("time.perf_counter", "time.perf_counter_ns", "time.monotonic", "time.monotonic_ns"),
        "calls whose value counts from an origin of the process's machine (not wall time)")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per worker function that takes a scheduler clock reading
    off the metadata which worker code orders against its own clock."""
    lc = lifecycle(ctx)
    wanted = set(functions(ctx, lc))
    by_entry: dict[tuple[str, int], list[ClockCrossing]] = {}
    for c in crossings(lc.functions, lc.sides, lc.classes, opts.clocks):
        if c.fqn in wanted:
            by_entry.setdefault((c.fqn, c.line), []).append(c)
    out = []
    for (fqn, line), cs in sorted(by_entry.items()):
        c = cs[0]
        clock = c.stamped.what or "a clock"
        more = len({(x.compared.fqn, x.compared.line) for x in cs}) - 1
        also = f" (and {more} more comparison{'s' if more > 1 else ''})" if more else ""
        out.append(ctx.finding(
            fqn, line,
            f"{short(fqn)} takes `{c.field}` off the metadata: a {clock}() reading of the "
            f"scheduler process ({short(c.stamped.fqn)}, line {c.stamped.line}), which "
            f"{short(c.compared.fqn)} orders against the worker's own {c.compared.what}() "
            f"(line {c.compared.line}){also}. That clock counts from an origin of its own "
            "machine: on a worker in another node a deadline passes at once or never (a lease "
            "that frees blocks before the peer reads them, or a delayed free never reported). "
            "Send the scheduler's current reading with it and rebase on arrival "
            "(`now + (deadline - meta.scheduler_clock)`), or send a duration",
            path=(ctx.step(c.stamped.fqn, c.stamped.line, f"the scheduler reads {clock}()"),
                  ctx.step(c.carried.fqn, c.carried.line, f"into the metadata's {c.field}"),
                  ctx.step(fqn, line, "the worker takes it as it is"),
                  ctx.step(c.compared.fqn, c.compared.line,
                           f"and compares it with its own {c.compared.what}()")),
            anchor=f"clock-crossed:{c.field}"))
    return out
