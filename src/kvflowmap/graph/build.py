"""Build the networkx graph: definitions, calls, dispatch and registry edges."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import networkx as nx

from kvflowmap.facts import FunctionFact
from kvflowmap.model.calls import CallResolver
from kvflowmap.model.classes import ClassIndex
from kvflowmap.model.core import Model
from kvflowmap.model.values import Evaluator
from kvflowmap.protocol import Protocol


@dataclass(frozen=True)
class Unresolved:
    """A call site no target was found for."""

    caller: str
    callee: str
    file: str
    line: int


@dataclass
class Linker:
    """Everything the graph passes share."""

    model: Model
    protocol: Protocol
    classes: ClassIndex = field(init=False)
    values: Evaluator = field(init=False)
    calls: CallResolver = field(init=False)
    graph: nx.MultiDiGraph = field(default_factory=nx.MultiDiGraph)
    unresolved: list[Unresolved] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    registrations: list[tuple[str, str, str, str]] = field(default_factory=list)
    _edge_keys: set = field(default_factory=set)
    _where: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.classes = ClassIndex(self.model)
        self.values = Evaluator(self.model, self.classes)
        self.calls = CallResolver(self.model, self.classes, self.values)

    # -- helpers -------------------------------------------------------------
    def where(self, module: str) -> dict:
        """``file`` and ``root`` attributes of what ``module`` defines (a fresh dict)."""
        found = self._where.get(module)
        if found is None:
            sf = self.model.source(module)
            found = self._where[module] = {"file": sf.rel if sf else "",
                                           "root": sf.root.label if sf else ""}
        return dict(found)

    def scope_node(self, module: str, scope: str) -> str:
        return f"{module}.{scope}" if scope else module

    def add_edge(self, u: str, v: str, kind: str, module: str, line: int, **attrs) -> None:
        # a bridge per carrier: finished_recving and finished_sending join the
        # same two functions at the same line
        key = (u, v, kind, line, attrs.get("carrier"))
        if key in self._edge_keys:
            return
        self._edge_keys.add(key)
        for node in (u, v):
            if node not in self.graph:
                self.graph.add_node(node, kind="external", file="", line=0, root="",
                                    package=node.lstrip("<").split(".")[0].rstrip(">"),
                                    subject=False)
        carrier = attrs.get("carrier")
        self.graph.add_edge(u, v, key=f"{kind}:{line}" + (f":{carrier}" if carrier else ""),
                            kind=kind, line=line, **self.where(module), **attrs)


def add_definitions(lk: Linker) -> None:
    """One node per module, class and function of the indexed code."""
    g = lk.graph
    for module in sorted(lk.model.facts):
        sf = lk.model.source(module)
        ff = lk.model.facts[module]
        base = {"root": sf.root.label if sf else "", "file": sf.rel if sf else "",
                "subject": bool(sf and sf.subject), "package": module.split(".")[0],
                **({"host": True} if sf and sf.host else {})}
        g.add_node(module, kind="function", role="module", line=1, **base)
        for c in ff.classes:
            g.add_node(f"{module}.{c.qualname}", kind="class", line=c.line, doc=c.doc,
                       signature=f"class {c.name}({', '.join(c.bases)})", **base)
            # the analysed MRO of each class, for navigation that must stay
            # within one class hierarchy (``nav.paths``)
            g.graph.setdefault("mro", {})[f"{module}.{c.qualname}"] = \
                tuple(lk.classes.mro(f"{module}.{c.qualname}"))
        for f in ff.functions:
            g.add_node(f"{module}.{f.qualname}", kind="function", line=f.line, doc=f.doc,
                       signature=_signature(f), is_async=f.is_async, **base)
    _add_aliases(lk)


def member_line(model: Model, module: str, cls_qualname: str, name: str) -> int:
    """The line of the class body of ``cls_qualname`` that binds ``name`` (an
    enum member, a declared field), 0 when the body does not."""
    return next((a.line for a in model.facts[module].assigns
                 if a.scope == cls_qualname and a.target == name), 0)


def _add_aliases(lk: Linker) -> None:
    """``aliases`` on a class node: every other module-level name bound to it
    (``NixlConnectorWorker = NixlPullConnectorWorker``; ``from m import A as
    B``; ``from m import A`` with ``A`` in the module's ``__all__``), each as
    ``{"id", "file", "line", "root"}`` sorted by id, so navigation finds the
    class by the name code imports it as."""
    g = lk.graph
    found: dict[str, dict[str, dict]] = {}
    for module in sorted(lk.model.facts):
        ff = lk.model.facts[module]
        binds = [(a.target, a.value, a.line) for a in ff.assigns
                 if a.scope == "" and not a.aug and a.target.isidentifier() and a.value
                 and all(p.isidentifier() for p in a.value.split("."))]
        exported = set(ff.dunder_all or ())
        binds += [(i.asname or i.name, i.asname or i.name, i.line) for i in ff.imports
                  if i.scope == "" and i.name and i.name != "*"
                  and ((i.asname and i.asname != i.name) or (i.asname or i.name) in exported)]
        for local, value, line in binds:
            alias = f"{module}.{local}"
            if alias in g:
                continue  # the name of a node of its own (the class itself)
            for kind, cls in lk.values.eval((module, ""), value):
                if kind == "class" and cls != alias and g.nodes.get(cls, {}).get("kind") == "class":
                    found.setdefault(cls, {}).setdefault(
                        alias, {"id": alias, "line": line, **lk.where(module)})
    for cls, aliases in found.items():
        g.nodes[cls]["aliases"] = [aliases[a] for a in sorted(aliases)]


def _signature(f) -> str:
    parts = []
    for p in f.params:
        star = {"vararg": "*", "kwarg": "**"}.get(p.kind, "")
        text = star + p.name + (f": {p.annotation}" if p.annotation else "")
        parts.append(text + (f" = {p.default}" if p.default else ""))
    ret = f" -> {f.returns}" if f.returns else ""
    return f"{'async ' if f.is_async else ''}def {f.name}({', '.join(parts)}){ret}"


# Builtins that call a function argument (the key= of sorted/min/max too).
HIGHER_ORDER = frozenset({"<builtin>.map", "<builtin>.filter", "<builtin>.sorted",
                          "<builtin>.min", "<builtin>.max", "functools.reduce"})


def add_calls(lk: Linker) -> None:
    """Call edges from call sites, callbacks, loops over instances
    (``__iter__``/``__next__``) and property reads."""
    register = lk.protocol.register
    for module in sorted(lk.model.facts):
        ff = lk.model.facts[module]
        for call in ff.calls:
            ctx = (module, call.scope)
            caller = lk.scope_node(module, call.scope)
            targets = lk.calls.resolve(ctx, call)
            if not targets:
                lk.unresolved.append(Unresolved(caller, call.callee or "<expression>",
                                                ff.path, call.line))
            for t in targets:
                lk.add_edge(caller, t.fqn, "call", module, call.line)
                if t.fqn in HIGHER_ORDER:
                    _add_applied(lk, ctx, caller, call, module)
                if t.fqn == register and len(call.literal_args) >= 3:
                    name, mod, cls = call.literal_args[:3]
                    if name and mod and cls:
                        lk.registrations.append((name, mod, cls, caller))
        for ref in ff.refs:
            for t in lk.calls.reference((module, ref.scope), ref.name):
                lk.add_edge(lk.scope_node(module, ref.scope), t.fqn, "call", module, ref.line,
                            ref=True)
        for loop in ff.binds:
            if loop.origin != "for" or not loop.value:
                continue
            for kind, fqn in lk.values.eval((module, loop.scope), loop.value[:-2]):
                if kind == "inst" and lk.classes.is_class(fqn):
                    for method in lk.values.iteration(fqn, 0):
                        lk.add_edge(lk.scope_node(module, loop.scope), method, "call", module,
                                    loop.line, iteration=True)
        for read in ff.reads:
            for t in lk.calls.property_read((module, read.scope), read.base, read.attr):
                lk.add_edge(lk.scope_node(module, read.scope), t.fqn, "call", module, read.line,
                            property=True)


def _add_applied(lk: Linker, ctx: tuple[str, str], caller: str, call, module: str) -> None:
    """``map(f, xs)``, ``sorted(xs, key=f)``: the builtin calls the analysed
    function it is given, on the caller's behalf (a call edge, not a reference)."""
    texts = [a for a in call.args if a] + [v for k, v in call.kwargs if k == "key" and v]
    for text in texts:
        for t in lk.calls.reference(ctx, text):
            lk.add_edge(caller, t.fqn, "call", module, call.line, applied=True)


def add_dispatch(lk: Linker) -> None:
    """Base method -> each override in analysed subclasses."""
    for fqn in sorted(lk.model.defs):
        d = lk.model.defs[fqn]
        if d.is_class or cast(FunctionFact, d.fact).class_qualname is None:
            continue
        name = d.fact.name
        if name.startswith("__") and name != "__call__":
            continue  # constructors and dunders are reached by explicit calls
        for sub in lk.classes.overrides(fqn):
            lk.add_edge(fqn, sub, "dispatch", lk.model.defs[sub].module,
                        lk.model.defs[sub].fact.line)


def add_registry(lk: Linker) -> None:
    """``create_connector`` -> the constructor of every registered connector."""
    create = lk.protocol.create
    if create not in lk.model.defs:
        return
    create_module = lk.model.defs[create].module
    for name, mod, cls, _caller in sorted(set(lk.registrations)):
        target = lk.model.canonical(f"{mod}.{cls}")
        if target not in lk.model.defs and mod in lk.model.facts:
            # a module-level alias (``NixlConnector = NixlPullConnector``)
            target = next((f for k, f in lk.values.eval((mod, ""), cls) if k == "class"), target)
        if target not in lk.model.defs:
            continue  # registered module not indexed (lazy mode) or not analysed
        ctor = lk.calls.constructor(target)
        lk.add_edge(create, ctor, "call", create_module, lk.model.defs[create].fact.line,
                    registry=name)
        names = lk.graph.nodes[target].setdefault("registered_names", [])
        if name not in names:
            names.append(name)  # in sorted order: the first is the one pages show
