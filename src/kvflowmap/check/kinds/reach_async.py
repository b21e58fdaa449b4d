"""``reach`` mode ``async_reporter``: async loads need a reporter.

A connector whose probe may answer ``load_kv_async=True`` must override a
report method (``get_finished`` / ``get_transfer_results``) that can return
finished-receiving ids; the base class reports nothing.
"""

from __future__ import annotations

from kvflowmap.check import flowfacts as ff
from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.reach_params import param as _p
from kvflowmap.check.model import Finding

def async_reporter(ctx: CheckContext, cls: str) -> list[Finding]:
    probe = ctx.classes.find_member(cls, _p(ctx, "probe_method"))
    if probe is None or not _is_own(ctx, probe):
        return []
    site = _async_return(ctx, probe)
    if site is None:
        return []
    fqn, line, text = site
    steps = [ctx.step(fqn, line, f"returns {text}: the scheduler parks the request")]
    reporters = [ctx.classes.find_member(cls, m) for m in _p(ctx, "report_methods")]
    own = [r for r in reporters if r and _is_own(ctx, r)]
    if not own:
        names = " nor ".join(_p(ctx, "report_methods"))
        return [ctx.finding(fqn, line, f"{cls.rpartition('.')[2]} may answer load_kv_async=True "
                            f"but overrides neither {names}: the base class reports no "
                            f"finished_recving, so the request waits in WAITING_FOR_REMOTE_KVS "
                            f"forever", path=tuple(steps), anchor=f"no-reporter:{cls}")]
    idx = _p(ctx, "report_element")
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


def _async_return(ctx: CheckContext, probe: str) -> tuple[str, int, str] | None:
    idx = _p(ctx, "async_element")
    for d in ff.delegates(ctx, probe):
        for r in ff.returns_of(ctx, d):
            text = ff.element(r, idx)
            if text is not None and text not in ("False", "None"):
                return d, r.line, r.value or ""
    return None


