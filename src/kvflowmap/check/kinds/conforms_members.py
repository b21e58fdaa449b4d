"""The ``conforms`` member checks: abstract methods left unimplemented by a
leaf class, and ``self.X`` / ``super().X`` that no class along a fully
analysed MRO defines (a base member the analysed vLLM no longer has)."""

from __future__ import annotations

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.conforms_contract import fully_analysed, method_kind, vllm_label
from kvflowmap.check.model import Finding


# -- abstract methods -----------------------------------------------------------
def check_abstract(ctx: CheckContext, cls: str) -> list[Finding]:
    """Abstract methods along the MRO that leaf class ``cls`` leaves unimplemented."""
    if ctx.classes.all_subclasses(cls) or not fully_analysed(ctx, cls):
        return []  # an intermediate base, or unknown bases may implement it
    mro = ctx.classes.mro(cls)
    methods = {k: _own_methods(ctx, k) for k in mro if ctx.classes.is_class(k)}
    if any(d.fact.abstract for d in methods.get(cls, ())):
        return []  # declares abstract methods itself: meant to be subclassed
    fact = ctx.classes.class_fact(cls)
    assert fact is not None
    out: list[Finding] = []
    for name in sorted({d.fact.name for ds in methods.values() for d in ds if d.fact.abstract}):
        impl = ctx.classes.find_member(cls, name)
        if impl is None or not ctx.model.defs[impl].fact.abstract:
            continue
        definer = impl.rpartition(".")[0]
        if any(name in getattr(ctx.classes.class_fact(k), "members", ())
               for k in mro[:mro.index(definer)]):
            continue  # ``name = other_function`` in a class body
        label = vllm_label(ctx, impl)
        step = ctx.step(impl, ctx.function(impl).line, f"abstract in {definer} ({label})")
        out.append(ctx.finding(cls, fact.line, f"{fact.name} does not implement abstract method "
                               f"{name} of {definer.rpartition('.')[2]} ({label}): creating "
                               "it raises TypeError", column=fact.col, path=(step,),
                               anchor=f"abstract:{name}"))
    return out


def _own_methods(ctx: CheckContext, cls: str) -> list:
    d = ctx.model.defs[cls]
    return [ctx.model.defs[f"{d.module}.{f.qualname}"] for f in ctx.model.facts[d.module].functions
            if f.class_qualname == d.fact.qualname]


# -- members the base no longer has ------------------------------------------------
def check_members(ctx: CheckContext, fqn: str) -> list[Finding]:
    """``self.X`` / ``super().X`` used in method ``fqn`` but defined nowhere in its MRO."""
    fn, cls = ctx.function(fqn), fqn.rpartition(".")[0]
    if not fn.params or method_kind(fn) == "static" or not fully_analysed(ctx, cls):
        return []
    mro = ctx.classes.mro(cls)
    if any(ctx.classes.find_member(cls, n) for n in ("__getattr__", "__getattribute__")):
        return []
    me, ff = fn.params[0].name, ctx.facts(fqn)
    scoped = [c for c in ff.calls if c.scope == fn.qualname]
    guarded = {a for c in scoped if c.callee in ("hasattr", "getattr", "setattr")
               for a in c.literal_args if a}
    uses = [(c.callee or "", c.line, c.col) for c in scoped]
    uses += [(f"{r.base}.{r.attr}", r.line, r.col) for r in ff.reads if r.scope == fn.qualname]
    out: list[Finding] = []
    for chain, line, col in sorted(set(uses), key=lambda u: (u[1], u[2])):
        sup = chain.startswith("super().")
        if not sup and not chain.startswith(f"{me}."):
            continue
        name = chain.split(".")[1].split("(")[0].split("[")[0]
        if name in guarded or name.startswith("__") or known_member(ctx, mro[1:] if sup else mro, name):
            continue
        if not sup and any(known_member(ctx, (s,), name) for s in ctx.classes.all_subclasses(cls)):
            continue  # a template method: subclasses provide it
        what = f"super().{name}" if sup else f"{me}.{name}"
        out.append(ctx.finding(fqn, line, f"{what}: no class in the MRO of "
                               f"{cls.rpartition('.')[2]} defines '{name}' "
                               f"(with {vllm_label(ctx)})", column=col, anchor=f"member:{what}"))
    return out


def known_member(ctx: CheckContext, chain, name: str) -> bool:
    """Some class of ``chain`` defines ``name``: a def, a class attribute or
    annotated field, or an attribute its methods assign."""
    for k in chain:
        fact = ctx.classes.class_fact(k)
        if f"{k}.{name}" in ctx.model.defs or name in ctx.values.self_attrs.get(k, {}):
            return True
        if fact is not None and (name in fact.members or name in dict(fact.attributes)):
            return True
    return False
