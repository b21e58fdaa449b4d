"""The ``conforms`` base-state check: an override keeps what the base method
sets for the base's other methods.

``KVConnectorBase_V1.bind_connector_metadata`` stores the step's metadata in
``self._connector_metadata``, and ``has_connector_metadata`` reads it; vLLM
skips ``save_kv_layer`` and ``wait_for_layer_load`` for a connector whose
``has_connector_metadata()`` is False. An override that neither calls the
base method nor sets that attribute itself leaves the base's reader looking
at nothing (Dynamo's KVBM connector before 0.8.0 never saved a layer). Found
by structure: the ``self.X`` the base method assigns, the base methods the
class does not override that read ``self.X``, and whether the override (or a
method of the class it calls on ``self``) calls the base method or assigns
``self.X``.
"""

from __future__ import annotations

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.conforms_contract import base_method, method_kind, vllm_label
from kvflowmap.check.model import Finding
from kvflowmap.facts import FunctionFact


def _self_name(fn: FunctionFact) -> str | None:
    return fn.params[0].name if fn.params and method_kind(fn) == "instance" else None


def _sets(ctx: CheckContext, fqn: str) -> set[str]:
    """Attributes ``self.X`` that method ``fqn`` assigns."""
    fn, ff = ctx.function(fqn), ctx.facts(fqn)
    me = _self_name(fn)
    if me is None:
        return set()
    return {a.target.split(".")[1] for a in ff.assigns if a.scope == fn.qualname
            and a.target.startswith(f"{me}.") and a.target.count(".") == 1}


def _reads(ctx: CheckContext, fqn: str) -> set[str]:
    """Attributes ``self.X`` that method ``fqn`` reads (or calls a method on)."""
    fn, ff = ctx.function(fqn), ctx.facts(fqn)
    me = _self_name(fn)
    if me is None:
        return set()
    out = {r.attr for r in ff.reads if r.scope == fn.qualname and r.base == me}
    out |= {c.callee.split(".")[1] for c in ff.calls if c.scope == fn.qualname and c.callee
            and c.callee.startswith(f"{me}.") and c.callee.count(".") >= 2}
    return out


def _keeps(ctx: CheckContext, fqn: str, attrs: set[str], mro: list[str]) -> bool:
    """The override calls the base method (``super().m``, ``Base.m(self)``),
    or it or a method of its class it calls on ``self`` sets one of ``attrs``."""
    cls, _, name = fqn.rpartition(".")
    fn, ff = ctx.function(fqn), ctx.facts(fqn)
    me = _self_name(fn) or "self"
    bases = {k.rpartition(".")[2] for k in mro[1:]}
    called = [c.callee or "" for c in ff.calls if c.scope == fn.qualname]
    for callee in called:
        head, _, last = callee.rpartition(".")
        if last == name and (head.startswith("super(") or head.rpartition(".")[2] in bases):
            return True
    if _sets(ctx, fqn) & attrs:
        return True
    helpers = {c.split(".")[1] for c in called if c.startswith(f"{me}.") and c.count(".") == 1}
    for h in sorted(helpers):
        impl = ctx.classes.find_member(cls, h)
        if impl and impl != fqn and impl in ctx.model.defs and \
                ctx.is_subject(ctx.model.defs[impl].module) and \
                _sets(ctx, impl) & attrs:
            return True
    return False


def _called_on_self(ctx: CheckContext, cls: str) -> set[str]:
    """Names the analysed classes along ``cls``'s MRO call on ``self``: a
    private base method (``_get_connector_metadata``) runs only when one does;
    vLLM calls the public ones."""
    out: set[str] = set()
    for k in ctx.classes.mro(cls):
        d = ctx.model.defs.get(k)
        if d is None or not ctx.is_subject(d.module):
            continue
        for c in ctx.model.facts[d.module].calls:
            if c.scope.startswith(f"{d.fact.qualname}.") and c.callee and \
                    c.callee.startswith("self.") and c.callee.count(".") == 1:
                out.add(c.callee[5:])
    return out


def _kept(ctx: CheckContext, cls: str, chain: list[str]) -> list[tuple[str, str]]:
    """(name, fqn) of the methods of the classes in ``chain`` that ``cls``
    does not override: they run as the base wrote them."""
    out: list[tuple[str, str]] = []
    for k in chain:
        d = ctx.model.defs.get(k)
        if d is None or not ctx.classes.is_class(k):
            continue
        for f in ctx.model.facts[d.module].functions:
            other = f"{d.module}.{f.qualname}"
            if f.class_qualname == d.fact.qualname and ctx.classes.find_member(cls, f.name) == other:
                out.append((f.name, other))
    return out


def check_base_state(ctx: CheckContext, fqn: str, pats: list[str]) -> list[Finding]:
    """Override ``fqn`` drops what its base method sets for another base method."""
    base = base_method(ctx, fqn, pats)
    fn = ctx.function(fqn)
    if base is None or _self_name(fn) is None or ctx.model.defs[base].fact.abstract:
        return []
    cls = fqn.rpartition(".")[0]
    mro = ctx.classes.mro(cls)
    definer = base.rpartition(".")[0]
    sets = _sets(ctx, base)
    if not sets:
        return []
    # the base's own methods (of its class and the contract classes above it)
    # that this class still runs as the base wrote them: public ones (vLLM
    # calls them) and private ones the class calls
    readers: dict[str, set[str]] = {}
    used = _called_on_self(ctx, cls)
    kept = _kept(ctx, cls, mro[mro.index(definer):])
    for name, other in kept:
        got = _reads(ctx, other) & sets if name != fn.name else set()
        if got and (not name.startswith("_") or name in used):
            readers[other] = got
    needed = set().union(*readers.values()) if readers else set()
    if fn.name == "__init__":
        # what a kept base method sets anyway (``bind_connector_metadata``)
        # is there before the readers run in vLLM's order of calls
        needed -= {a for name, other in kept if name != "__init__" for a in _sets(ctx, other)}
    if not needed or _keeps(ctx, fqn, needed, mro):
        return []
    attr = sorted(needed)[0]
    reader = sorted(r for r, a in readers.items() if attr in a)[0]
    label = vllm_label(ctx, base)
    steps = (ctx.step(base, ctx.function(base).line,
                      f"the base method sets self.{attr} ({label})"),
             ctx.step(reader, ctx.function(reader).line,
                      f"{reader.rpartition('.')[2]} reads self.{attr}; "
                      f"{cls.rpartition('.')[2]} does not override it"))
    return [ctx.finding(fqn, fn.line,
                        f"{fn.name} overrides {definer.rpartition('.')[2]}.{fn.name} without "
                        f"calling it and never sets self.{attr}, which the base method sets and "
                        f"{reader.rpartition('.')[2]} reads: that method, which vLLM still runs "
                        "on this connector, sees the attribute unset or stale",
                        column=fn.col, path=steps, anchor=f"base-state:{fn.name}:{attr}")]
