"""``lifecycle`` mode ``load_chosen``: the commit hook records a load only
when vLLM chose the connector to load (``kvflowmap.lifecycle.load_chosen``).

vLLM 0.29.0's ``LMCacheMPConnectorUpstream.update_state_after_alloc`` moved
the request's tracker to WAITING_FOR_LOAD whenever the lookup had found
chunks, also when ``MultiConnector`` had chosen another connector
(``num_external_tokens == 0``): the lookup's locks were never released.
0.30.0 tests ``num_external_tokens > 0``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.lifecycle._shared import (asking_returns, functions, lifecycle,
                                                     probe_commit_pairs, record_lines, short)
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option
from kvflowmap.facts import CallFact
from kvflowmap.lifecycle.load_chosen import Unchosen, count_param, unchosen
from kvflowmap.lifecycle.view import FnView

READS = ("Reads: per class, the probe (`lifecycle.probe`) and commit hook "
         "(`lifecycle.commit`) its MRO resolves to; the probe's returns, and those of "
         "the analysed functions it returns the result of (does any ask for a load?); "
         "the commit hook's parameter at `lifecycle.commit_count`, followed into the "
         "analysed functions it is passed to; and the statements of the hook and "
         "of the analysed functions it runs (three calls deep) that keep the request id.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``load_chosen``."""

    never_async: tuple[str, ...] = option(("False",), "texts of the probe's async element "
                                                      "that mean 'no async load'")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per commit hook that records a load without reading the
    count that says whether this connector is to load."""
    lc = lifecycle(ctx)
    wanted = set(functions(ctx, lc))
    spec = lc.spec

    def records(fn: FnView) -> set[int]:
        # what keeps the request, not the calls into analysed code the walk follows anyway
        lines = record_lines(lc, fn.fqn)
        followed = {s.line for s in fn.stmts if s.line in lines and fn.calls(s) and all(
            lc.subject_callees(fn, c) for c in fn.calls(s))}
        return lines - followed

    found: dict[str, tuple[str, str, list[int], Unchosen]] = {}
    for probe, commit in probe_commit_pairs(ctx, lc, wanted):
        asks = asking_returns(lc, probe, spec.async_element, opts.never_async)
        if not asks:
            continue  # the probe never asks for a load: nothing to tell apart
        if not count_param(lc.functions[commit], spec.commit_count):
            continue  # not the hook vLLM calls (a half's helper): its caller is judged

        def callees(fn: FnView, c: CallFact, hooks: tuple[str, str] = (probe, commit)
                    ) -> list[FnView]:
            return [lc.functions[t] for t in lc.subject_callees(fn, c) if t not in hooks]

        u = unchosen(lc.functions[commit], spec.commit_count, callees, records)
        if u is not None and (u.holder not in found or commit == u.holder):
            found[u.holder] = (probe, commit, asks, u)  # a half's own hook explains it best
    out = []
    for probe, commit, asks, u in (found[h] for h in sorted(found)):
        count = f"`{u.count}`"
        held = u.holder
        line = u.line if u.record == held else u.drop_line
        path = [ctx.step(probe, asks[0], "the probe asks vLLM for a load"),
                ctx.step(held, u.drop_line, f"takes {count} and never reads it" if
                         held == commit else f"is handed {count} and never reads it")]
        path.append(ctx.step(u.record, u.line, "keeps the request for a load all the same"))
        out.append(ctx.finding(
            held, line,
            f"{short(commit)} keeps the request for a load (line {u.line}"
            f"{'' if u.record == commit else ', in ' + short(u.record)}) without reading "
            f"{count}: vLLM calls it with 0 when "
            "this connector is not the one to load (MultiConnector chose another, the probe "
            "found nothing, or the load is over and the request gets its next blocks). "
            "The load is kept all the same: it fills blocks vLLM computes itself, or holds "
            "what the probe locked or reserved for a load that never comes. Record it only "
            f"when {u.count} > 0, and release what the probe took otherwise",
            path=tuple(path),
            anchor=f"load-chosen:{spec.commit}"))
    return out
