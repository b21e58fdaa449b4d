"""``lifecycle`` mode ``stalled``: pending loads can give up.

Per connector class, the functions its load-report hooks (the channel's
methods: ``get_finished``, ``get_transfer_results``) make run, not code only
a background thread runs: a walk over pending state whose entries leave only
when a status query on their transfer says so, in a function that reads no
clock (``lifecycle.stalls``). A transfer that never completes keeps its
request in ``WAITING_FOR_REMOTE_KVS`` for good; an age arm (``now - start >
timeout``: report it finished with its blocks failed) bounds it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.lifecycle._shared import functions, lifecycle, short, steps
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option
from kvflowmap.lifecycle.load_path import load_paths
from kvflowmap.lifecycle.stalls import stalls

READS = ("Reads: per connector class, the functions its load-report hooks make run (calls, "
         "threads, queue hand-offs; not code only a background thread runs), their `for` "
         "loops over a `self` container or a parameter (not one only save code fills, nor "
         "one the function fills with finished ids), the tests in them that query an "
         "item's status, what those tests' arms remove or report, and whether the function "
         "reads a clock; with `success_only`, whether the one test that lets an entry go "
         "has another arm or looks at the outcome.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``stalled``."""

    channel: str = option("finished_recving", "the report channel whose hooks poll pending "
                                              "loads")
    success_only: bool = option(False, "report instead the walks whose one way out is a "
                                       "single status test with no arm for a failed transfer")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per pending walk with no age arm."""
    lc = lifecycle(ctx)
    chan = lc.spec.channel(opts.channel)
    if chan is None:
        return []
    background = lc.background_code()
    paths = load_paths(lc, ctx.classes, ctx.protocol.base_class, (), chan.methods,
                       set(functions(ctx, lc)))
    seen: set[tuple[str, int]] = set()
    out = []
    for p in paths:
        for fqn in sorted(p.reached - background):
            fn = lc.functions[fqn]
            for s in stalls(fn, lc.state.of(fqn).request_names(), lc.spec.finished_params,
                            opts.success_only, functools.partial(lc.save_state, fn)):
                if (fqn, s.loop_line) in seen:
                    continue
                seen.add((fqn, s.loop_line))
                if opts.success_only:
                    out.append(_success_only(ctx, fqn, s))
                    continue
                out.append(ctx.finding(
                    fqn, s.loop_line,
                    f"{short(fqn)} lets a request go from {s.walked} only when its transfer's "
                    f"status says so (line {s.test_line}), and reads no clock: a transfer that "
                    "never completes (a lost completion, a dead peer) keeps the request in "
                    "WAITING_FOR_REMOTE_KVS for good. Record when each transfer started and, "
                    "past a timeout, report the request finished with its blocks failed",
                    path=steps(ctx, fqn, [(s.loop_line, f"walks the pending {s.walked}"),
                                          (s.test_line, "the only way out: the status turns")]),
                    anchor=f"stalled:{s.walked}"))
    return out


def _success_only(ctx: CheckContext, fqn: str, s) -> Finding:
    return ctx.finding(
        fqn, s.test_line,
        f"{short(fqn)} lets a request go from {s.walked} only under this status test, "
        "with no other arm and no look at the outcome: if it asks for success, a transfer "
        "that fails never passes it and its request stays in WAITING_FOR_REMOTE_KVS for "
        "good; if it asks for completion, a failed load is reported as loaded. Add an arm "
        "for the failed status: take the entry out, put its blocks in the failed-blocks "
        "set and report the request finished",
        path=steps(ctx, fqn, [(s.loop_line, f"walks the pending {s.walked}"),
                              (s.test_line, "the only way out, the outcome never read")]),
        anchor=f"success-only:{s.walked}")
