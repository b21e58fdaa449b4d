"""The ``conforms`` two-release mode (``compare_with``): contract methods
whose signature differs between another vLLM release and the analysed one,
and overrides that fit the old form but not the new one. The other release
is analysed on its own, once per process (``CheckContext.other_release``)."""

from __future__ import annotations

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.conforms_compare import Related, compare
from kvflowmap.check.kinds.conforms_contract import ignored, is_contract, vllm_label
from kvflowmap.check.kinds.conforms_options import Options
from kvflowmap.check.kinds.conforms_signatures import Sig
from kvflowmap.check.model import Finding


def two_release(ctx: CheckContext, opts: Options, pats: list[str], ref: str) -> list[Finding]:
    """Contract methods changed between release ``ref`` and the analysed vLLM,
    and overrides that still have the old form."""
    other, old_label = ctx.other_release(ref)
    labels = (old_label, vllm_label(ctx))
    out: list[Finding] = []
    for base in sorted(f for f, d in ctx.model.defs.items() if not d.is_class
                       and d.fact.class_qualname and is_contract(f.rpartition(".")[0], pats)):
        if base not in other.linker.model.defs or \
                ignored(opts.ignore_methods, base.rpartition(".")[2]):
            continue
        new, old = Sig.of(ctx.linker, base), Sig.of(other.linker, base)
        if new.shape == old.shape:
            continue
        fn = ctx.function(base)
        if opts.report_changes:
            out.append(ctx.finding(base, fn.line, f"{fn.name} changed between {labels[0]} and "
                                   f"{labels[1]}: {old.text} -> {new.text}", column=fn.col,
                                   anchor=f"changed:{base}"))
        out += _old_form(ctx, base, new, old, labels)
    return out


def _old_form(ctx: CheckContext, base: str, new: Sig, old: Sig,
              labels: tuple[str, str]) -> list[Finding]:
    """Overrides that fit the old base signature but not the new one."""
    out: list[Finding] = []
    targets, related = set(ctx.target_classes), Related(ctx)
    for over in ctx.classes.overrides(base):
        if over.rpartition(".")[0] not in targets:
            continue
        o = Sig.of(ctx.linker, over)
        now = compare(new, o, None, related)
        if now and not compare(old, o, None, related):
            fn, line = ctx.function(over), ctx.function(base).line
            steps = (ctx.step(base, line, f"{labels[0]}: {old.text}"),
                     ctx.step(base, line, f"{labels[1]}: {new.text}"),
                     ctx.step(over, fn.line, f"override: {o.text}"))
            out.append(ctx.finding(over, fn.line, f"{fn.name} still has the {labels[0]} form "
                                   f"({now[0][1]}); {labels[1]} calls {new.text}",
                                   column=fn.col, path=steps, anchor=f"old-form:{fn.name}"))
    return out
