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
from kvflowmap.facts import ReturnFact
from kvflowmap.lifecycle.containers import ADD_OPS, EMPTY_CONTAINERS

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
    shown: list[tuple[str, ReturnFact]] = []
    for r in own:
        chain = ff.delegates(ctx, r)
        rets = [(d, x) for d in chain for x in ff.returns_of(ctx, d)
                if not (len(chain) > 1 and _forwards(x, r.rpartition(".")[2]))]
        if any(not _empty(ctx, d, x, idx) for d, x in rets):
            return []
        if not rets:
            return []
        shown = shown or rets
    r = own[0]
    steps.append(ctx.step(r, ctx.function(r).line, "every return reports no finished_recving"))
    steps += [ctx.step(d, x.line, f"returns {ff.element(x, idx)} as finished_recving: "
                       + ("nothing ever adds to it" if never_filled(ctx, d, ff.element(x, idx))
                          else "empty")) for d, x in shown if d != r]
    return [ctx.finding(fqn, line, f"{cls.rpartition('.')[2]} may answer load_kv_async=True but "
                        f"{r.rpartition('.')[2]} never returns finished_recving ids",
                        path=tuple(steps), anchor=f"empty-reporter:{cls}")]


def _forwards(ret: ReturnFact, name: str) -> bool:
    """``return self._worker.get_finished(...)``: the facade hands back what a
    delegate (checked in its own right) returns."""
    return ff.element(ret, 0) is None and f".{name}(" in (ret.value or "")


def _empty(ctx: CheckContext, fqn: str, ret: ReturnFact, idx: int) -> bool:
    """Item ``idx`` of the return is always empty: ``None``, ``set()``, or a
    local (or a copy of one: ``set(done)``) that nothing fills."""
    text = ff.element(ret, idx)
    if text in ("None", "set()", "frozenset()"):
        return True
    origin = ret.origins[idx] if idx < len(ret.origins) else None
    return never_filled(ctx, fqn, text) or never_filled(ctx, fqn, origin)


def never_filled(ctx: CheckContext, fqn: str, name: str | None) -> bool:
    """``name`` is a local of ``fqn`` bound only to a fresh empty container
    (``done_recving: set[str] = set()``) that nothing fills: no add, update or
    augmented assignment, no alias, and it is never passed to a call (which
    could fill it), here or in a def nested here."""
    if not name or not name.isidentifier():
        return False
    q = ctx.definition(fqn).fact.qualname
    facts = ctx.facts(fqn)

    def mine(scope: str) -> bool:
        return scope == q or scope.startswith(q + ".")

    binds = [a for a in facts.assigns if mine(a.scope) and a.target == name]
    if not binds or any(a.aug or a.position is not None
                        or (a.value or a.literal) not in EMPTY_CONTAINERS for a in binds):
        return False
    if any(mine(c.scope) and c.container == name and c.op in ADD_OPS for c in facts.containers):
        return False
    if any(mine(a.scope) and name in (a.value, a.origin) for a in facts.assigns):
        return False
    return not any(mine(c.scope) and (name in c.args or name in (v for _, v in c.kwargs)
                                      or (c.callee or "").startswith(name + "."))
                   for c in facts.calls)


def _is_own(ctx: CheckContext, method: str) -> bool:
    """Defined in the analysed connector, not in the protocol base class."""
    owner = method.rpartition(".")[0]
    return owner != ctx.protocol.base_class and owner not in ctx.classes.mro(
        ctx.protocol.base_class)[1:]
