"""``lifecycle`` mode ``trigger_consumed``: the commit hook consumes the
request's remote-load trigger (``kvflowmap.lifecycle.triggers``).

tpu-inference 0.18.0's scheduler recorded a remote pull for every request
whose ``kv_transfer_params`` asked for one and never marked them consumed: a
request scheduled again (after preemption) asked the producer for the same
KV a second time. 0.19.0 sets ``params["do_remote_prefill"] = False``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.lifecycle._shared import (async_returns, functions, lifecycle,
                                                     probe_commit_pairs, record_lines, short)
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option
from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.resumed import keeps_account
from kvflowmap.lifecycle.triggers import unconsumed
from kvflowmap.lifecycle.view import FnView

READS = ("Reads: per class, the probe (`lifecycle.probe`) and commit hook "
         "(`lifecycle.commit`) its MRO resolves to; the probe's tests that read the "
         "request's trigger (`lifecycle.probe.trigger`) and the returns they guard; the "
         "commit hook's statements that keep the request id; the module's tests of "
         "preemption (`lifecycle.running.preempted`, `resumed`); and the writes into the "
         "trigger (or its rebinding) in both hooks and the analysed functions they call.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``trigger_consumed``."""

    never_async: tuple[str, ...] = option(("False",), "texts of the probe's async element "
                                                      "that mean 'no async load'")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per commit hook that leaves the probe's trigger set."""
    lc = lifecycle(ctx)
    wanted = set(functions(ctx, lc))
    spec = lc.spec
    out = []
    for probe, commit in probe_commit_pairs(ctx, lc, wanted):
        module = lc.functions[commit].module
        if any(g.module == module and keeps_account(g, (*spec.preempted, *spec.resumed))
               for g in lc.functions.values()):
            continue  # it acts on preemption: a request scheduled again is its own case

        def reach(fn: FnView, hooks: tuple[str, str] = (probe, commit)) -> Iterator[FnView]:
            for call in fn.all_calls:
                yield from (lc.functions[t] for t in lc.subject_callees(fn, call)
                            if t not in hooks)

        def keeps_own(fn: FnView, s: Stmt) -> bool:
            return any(op in ("In", "NotIn") for c in fn.compares.get(s.line, ())
                       for op in c.ops) and \
                any(n.startswith("self.") for n in s.names) and \
                any(lc.state.is_id(fn, n) for n in s.names)

        u = unconsumed(lc.functions[probe], lc.functions[commit], spec.load_trigger,
                       async_returns(lc, probe, spec.async_element, opts.never_async),
                       sorted(record_lines(lc, commit)), reach, keeps_own)
        if u is None:
            continue
        out.append(ctx.finding(
            commit, u.line,
            f"{short(commit)} keeps the request for a load here but never consumes "
            f"`{u.trigger}`, which {short(probe)} asks for a remote load on (line "
            f"{u.test_line}): when vLLM schedules the request again (after preemption, or "
            "when its blocks could not be allocated), the probe asks for the same remote KV "
            "a second time, from a producer that may have freed it. Mark it consumed "
            "(`params[\"do_remote_prefill\"] = False`) once the load is recorded",
            path=(ctx.step(probe, u.test_line, f"the probe tests `{u.trigger}`"),
                  ctx.step(probe, u.ask_line, "and asks for a load"),
                  ctx.step(commit, u.line, f"the commit hook records it; `{u.trigger}` stays "
                                           "as it was")),
            anchor=f"trigger:{spec.commit}"))
    return out
