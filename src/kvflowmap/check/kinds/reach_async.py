"""``reach`` mode ``async_reporter``: async loads need a reporter.

A connector whose probe may answer ``load_kv_async=True`` must override a
report method (``get_finished`` / ``get_transfer_results``) that can return
finished-receiving ids; the base class reports nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check import flowfacts as ff
from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option

READS = ("Reads: the return statements of the probe method and of the same-named "
         "methods it delegates to, which report methods the connector overrides, and "
         "the return statements of those and of their delegates.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``reach`` mode ``async_reporter``."""

    probe_method: str = option("get_num_new_matched_tokens", "method answering load_kv_async")
    async_element: int = option(1, "index of load_kv_async in the probe's result")
    report_methods: tuple[str, ...] = option(("get_finished", "get_transfer_results"),
                                             "methods that report finished loads")
    report_element: int = option(1, "index of finished_recving in get_finished's result")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """Each target class that may park a load with no reporter for it."""
    return each_function(ctx, ctx.target_classes, lambda c: async_reporter(ctx, opts, c))


def async_reporter(ctx: CheckContext, opts: Options, cls: str) -> list[Finding]:
    """Findings of one connector class."""
    probe = ctx.classes.find_member(cls, opts.probe_method)
    if probe is None or not _is_own(ctx, probe):
        return []
    site = ff.async_answer(ctx, probe, opts.async_element)
    if site is None:
        return []
    fqn, line, text = site
    steps = [ctx.step(fqn, line, f"returns {text}: the scheduler parks the request")]
    reporters = [ctx.classes.find_member(cls, m) for m in opts.report_methods]
    own = [r for r in reporters if r and _is_own(ctx, r)]
    if not own:
        names = " nor ".join(opts.report_methods)
        return [ctx.finding(fqn, line, f"{cls.rpartition('.')[2]} may answer load_kv_async=True "
                            f"but overrides neither {names}: the base class reports no "
                            f"finished_recving, so the request waits in WAITING_FOR_REMOTE_KVS "
                            f"forever", path=tuple(steps), anchor=f"no-reporter:{cls}")]
    idx = opts.report_element
    for r in own:
        rets = [(d, x) for d in ff.delegates(ctx, r) for x in ff.returns_of(ctx, d)]
        if any(ff.element(x, idx) not in ("None", "set()", "frozenset()") for _, x in rets):
            return []
        if not rets:
            return []
    r = own[0]
    steps.append(ctx.step(r, ctx.function(r).line, "every return reports no finished_recving"))
    return [ctx.finding(fqn, line, f"{cls.rpartition('.')[2]} may answer load_kv_async=True but "
                        f"{r.rpartition('.')[2]} never returns finished_recving ids",
                        path=tuple(steps), anchor=f"empty-reporter:{cls}")]


def _is_own(ctx: CheckContext, method: str) -> bool:
    """Defined in the analysed connector, not in the protocol base class."""
    owner = method.rpartition(".")[0]
    return owner != ctx.protocol.base_class and owner not in ctx.classes.mro(
        ctx.protocol.base_class)[1:]
