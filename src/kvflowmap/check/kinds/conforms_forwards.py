"""``conforms`` check ``forwards``: a composite connector hands every hook on.

A connector that wraps child connectors (vLLM's ``MultiConnector``, a
facade over several backends) forwards each hook it overrides to each child
(``for c in self._connectors: c.start_load_kv(...)``). A protocol hook it does
not override answers from the base class; where that default does nothing,
its children never see the call: a child that frees blocks or aborts loads in
``handle_preemptions`` keeps reading into blocks vLLM has given to another
request. Composite means: at least ``MIN_FORWARDS`` of its own methods call
the method of the same name on the items of one of its ``self`` collections.

A facade over one engine object (``self._engine.start_load_kv(...)`` in
``start_load_kv``, and so on for at least ``MIN_FORWARDS`` hooks) owes the
same: a hook the engine's class implements that the facade does not hand
on, and that nothing else calls, never runs (a facade whose
``get_block_ids_with_load_errors`` returns ``set()`` while its engine
records the failed blocks: every failed load is taken as loaded).
"""

from __future__ import annotations

from kvflowmap.check.context import CheckContext
from kvflowmap.check.model import Finding
from kvflowmap.facts import ClassFact
from kvflowmap.lifecycle.view import walk

MIN_FORWARDS = 3


def check_forwards(ctx: CheckContext, cls: str, hooks: tuple[str, ...]) -> list[Finding]:
    """Stub hooks of the protocol base that composite ``cls`` leaves to the
    base while a connector of the analysed code overrides them."""
    base = ctx.protocol.base_class
    own = [f for f in ctx.model.defs if f.rpartition(".")[0] == cls and
           not ctx.model.defs[f].is_class]
    forwarded = sorted(f.rpartition(".")[2] for f in own if _forwards(ctx, f))
    fact = ctx.classes.class_fact(cls)
    assert fact is not None
    out = _facade(ctx, cls, fact, own, hooks)
    if len(forwarded) < MIN_FORWARDS:
        return out
    for hook in sorted(set(hooks)):
        impl = ctx.classes.find_member(cls, hook)
        if impl is None or impl.rpartition(".")[0] != base or not _does_nothing(ctx, impl):
            continue
        children = sorted(o.rpartition(".")[0].rpartition(".")[2]
                          for o in ctx.classes.overrides(impl)
                          if ctx.is_subject(ctx.model.defs[o].module) and
                          o.rpartition(".")[0] != cls)
        if not children:
            continue
        out.append(ctx.finding(
            cls, fact.line,
            f"{fact.name} forwards {', '.join(forwarded[:4])}"
            f"{' ...' if len(forwarded) > 4 else ''} to its child connectors but not {hook}: "
            f"the base's {hook} does nothing, so a child that overrides it "
            f"({', '.join(children[:3])}{' ...' if len(children) > 3 else ''}) never gets the "
            "call. Forward it to every child",
            column=fact.col,
            path=(ctx.step(impl, ctx.function(impl).line, f"the base's {hook} does nothing"),),
            anchor=f"forwards:{hook}"))
    return out


def _facade(ctx: CheckContext, cls: str, fact: ClassFact, own: list[str],
            hooks: tuple[str, ...]) -> list[Finding]:
    """Hooks a facade leaves out of what it hands its engine object, where
    the engine's class implements the hook and nothing calls that method."""
    by_attr: dict[str, dict[str, set[str]]] = {}  # self attr -> hook -> engine methods
    for f in own:
        name = f.rpartition(".")[2]
        if name not in hooks:
            continue
        for c in ctx.calls_in(f):
            recv, _, meth = (c.callee or "").rpartition(".")
            if meth != name or recv.count(".") != 1 or not recv.startswith("self."):
                continue
            targets = {t.fqn for t in ctx.resolve_call(f, c) if not t.external}
            if targets:
                by_attr.setdefault(recv, {}).setdefault(name, set()).update(targets)
    out = []
    for recv, handed in sorted(by_attr.items()):
        if len(handed) < MIN_FORWARDS:
            continue
        engines = sorted({t.rpartition(".")[0] for ts in handed.values() for t in ts})
        for hook in sorted(set(hooks) - set(handed)):
            for engine in engines:
                member = ctx.classes.find_member(engine, hook)
                if member is None or member not in ctx.model.defs or \
                        not ctx.is_subject(ctx.model.defs[member].module) or \
                        any(k in ("call", "dispatch") for _, _, k in
                            ctx.graph.in_edges(member, data="kind")) or _does_nothing(ctx, member):
                    continue
                impl = ctx.classes.find_member(cls, hook)
                mine = impl is not None and impl in ctx.model.defs and \
                    ctx.is_subject(ctx.model.defs[impl].module)
                if mine and any((c.callee or "").rpartition(".")[2] == hook
                                for c in ctx.calls_in(impl)):
                    continue  # handed on through a local (``a = getattr(self, ...)``)
                where = (impl, ctx.function(impl).line) if mine and impl else (cls, fact.line)
                out.append(ctx.finding(
                    where[0], where[1],
                    f"{fact.name} hands {', '.join(sorted(handed)[:4])}"
                    f"{' ...' if len(handed) > 4 else ''} on to {recv} "
                    f"({engine.rpartition('.')[2]}) but not {hook}: "
                    f"{'.'.join(member.split('.')[-2:])} (line {ctx.function(member).line}) is never "
                    f"called, so what it does for vLLM's {hook} never happens. Forward the "
                    "hook to it",
                    column=fact.col if where[0] == cls else 1,
                    path=(ctx.step(member, ctx.function(member).line,
                                   f"the engine's {hook}, which nothing calls"),),
                    anchor=f"facade:{hook}"))
    return out


def _forwards(ctx: CheckContext, fqn: str) -> bool:
    """``fqn`` calls the method of its own name on the items of a ``self``
    collection it loops over."""
    fn = ctx.function(fqn)
    items = {t.strip() for s in walk(fn.body) if s.kind == "for" and s.text
             and " in " in s.text and "self." in s.text.partition(" in ")[2]
             for t in s.text.partition(" in ")[0].replace("(", "").replace(")", "").split(",")}
    return any((c.callee or "").rpartition(".")[2] == fn.name and
               (c.callee or "").rpartition(".")[0] in items for c in ctx.calls_in(fqn))


def _does_nothing(ctx: CheckContext, fqn: str) -> bool:
    """A body of a docstring, ``pass``, ``...`` or a bare ``return`` /
    ``return None``: a default with no effect."""
    return all((s.kind == "simple" and not s.names) or
               (s.kind == "return" and (s.text or "None") == "None")
               for s in ctx.function(fqn).body)

