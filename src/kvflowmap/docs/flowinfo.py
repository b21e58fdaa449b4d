"""Facts about connectors and hooks that several pages share.

Everything is read from the graph and the linker (never from source text):
which classes are connectors, which class implements each protocol method,
which vLLM functions call it, what it delegates to, what state it touches,
which rules cover it, and which step of the flow a function belongs to.
"""

from __future__ import annotations

import fnmatch
from collections import deque
from collections.abc import Sequence
from typing import Any

import networkx as nx

from kvflowmap.graph.build import Linker
from kvflowmap.nav.where import FLOW_KINDS, Site, edge_sites
from kvflowmap.graph import select

TOUCH_RELATIONS = (("out", ("sets_state",)), ("in", ("reads_state",)),
                   ("out", ("produces",)), ("in", ("consumes",)))


def base_method(lk: Linker, method: str) -> str:
    """FQN of a protocol method on the base class."""
    return f"{lk.protocol.base_class}.{method}"


def protocol_methods(lk: Linker) -> list[tuple[str, str]]:
    """(side, method) in the protocol file's order, scheduler side first."""
    return [(side, m) for side, ms in lk.protocol.methods.items() for m in ms]


def qual(lk: Linker, fqn: str) -> str:
    """``Class.method`` (the name inside its module) of a definition."""
    d = lk.model.defs.get(fqn)
    return d.fact.qualname if d is not None else ".".join(fqn.split(".")[-2:])


def connector_classes(lk: Linker, g: nx.MultiDiGraph, *, subject: bool = True) -> list[str]:
    """Analysed subclasses of the protocol's base class (subject or context)."""
    base = lk.protocol.base_class
    out = []
    for cls in lk.classes.all_subclasses(base):
        if cls in g and bool(g.nodes[cls].get("subject")) == subject:
            out.append(cls)
    return sorted(out)


def implementation(lk: Linker, cls: str, method: str) -> str | None:
    """The definition of ``method`` the class uses (its own, inherited, or the
    base default); None when nothing along the MRO defines it."""
    return lk.classes.find_member(cls, method)


def overrides(lk: Linker, cls: str, method: str) -> bool:
    """Whether ``cls`` (or an analysed class between it and the base) overrides it."""
    impl = implementation(lk, cls, method)
    return impl is not None and impl != base_method(lk, method)


def vllm_callers(g: nx.MultiDiGraph, lk: Linker, method: str, impl: str | None) -> list[Site]:
    """Calls from context code (vLLM) into the base method or the
    implementation; another connector forwarding to its children
    (MultiConnector) is not vLLM calling this one."""
    sites: set[Site] = set()
    base = lk.protocol.base_class
    for target in {t for t in (base_method(lk, method), impl) if t is not None}:
        if target in g:
            for s in edge_sites(g, target, "in", ("call",)):
                if s.node in g and not g.nodes[s.node].get("subject") and \
                        not select.connector_method(g, s.node, base):
                    sites.add(s)
    return sorted(sites, key=_place)


def preferred_caller(lk: Linker, side: str, callers: Sequence[Site]) -> Site | None:
    """The caller to draw: a protocol entry point of ``side`` first (in the
    protocol file's order), else the first by place."""
    entries = list(lk.protocol.entry_points.get(side, ()))
    ranked = sorted(callers, key=lambda s: (entries.index(s.node) if s.node in entries
                                            else len(entries), _place(s)))
    return ranked[0] if ranked else None


def delegates(g: nx.MultiDiGraph, fn: str) -> list[Site]:
    """Calls from ``fn`` to analysed functions and classes (not externals)."""
    if fn not in g:
        return []
    return [s for s in edge_sites(g, fn, "out", FLOW_KINDS)
            if s.kind == "call" and g.nodes[s.node].get("kind") in ("function", "class")]


def touches(g: nx.MultiDiGraph, lk: Linker, fn: str) -> list[Site]:
    """States set or read, carrier fields produced or consumed, and the
    ``self.`` containers written (``ContainerOpFact``) by ``fn``."""
    out: list[Site] = []
    if fn in g:
        for direction, kinds in TOUCH_RELATIONS:
            # a return value tested where a state is set decides it
            # (``graph.returnstates``)
            out += [Site(s.node, "decides (return value)" if s.kind == "produces" and
                         g.nodes[s.node].get("kind") == "state" else s.kind,
                         s.file, s.line, s.root)
                    for s in edge_sites(g, fn, direction, kinds)]
    d = lk.model.defs.get(fn)
    if d is not None and not d.is_class:
        sf = lk.model.source(d.module)
        for c in lk.model.facts[d.module].containers:
            if c.scope == d.fact.qualname and c.container.startswith("self."):
                out.append(Site(c.container, f"container {c.op}", sf.rel if sf else "", c.line,
                                sf.root.label if sf else ""))
    return sorted(set(out), key=_place)


def rule_applies(rule: Any, lk: Linker, cls: str) -> bool:
    """Whether a rule's ``applies_to`` selects class ``cls``."""
    at = rule.applies_to
    if not (at.base_class or at.classes or at.modules):
        return True
    module = lk.model.defs[cls].module if cls in lk.model.defs else cls.rpartition(".")[0]
    mro = lk.classes.mro(cls)
    return (any(b in mro for b in at.base_class)
            or any(fnmatch.fnmatchcase(cls, p) for p in at.classes)
            or any(fnmatch.fnmatchcase(module, p) for p in at.modules))


def rule_mentions(rule: Any, method: str) -> bool:
    """Whether the rule's parameters name ``method`` (rules name the hooks
    they look at: ``probe_method``, ``report_methods``...)."""
    def walk(v: Any) -> bool:
        if isinstance(v, str):
            return v == method or v.endswith("." + method)
        if isinstance(v, dict):
            return any(walk(x) for x in v.values())
        if isinstance(v, (list, tuple)):
            return any(walk(x) for x in v)
        return False
    return walk(rule.params)


def steps_of(g: nx.MultiDiGraph, lk: Linker, depth: int = 4) -> dict[str, str]:
    """Function -> the protocol method whose implementation (the base default
    or a subject override) reaches it first, by calls within one package in
    ``depth`` hops; protocol order breaks ties."""
    owner: dict[str, str] = {}
    starts = []
    for _, m in protocol_methods(lk):
        base = base_method(lk, m)
        for impl in [base, *lk.classes.overrides(base)]:
            if impl in g and (impl == base or g.nodes[impl].get("subject")):
                starts.append((impl, m))
    queue = deque((fn, m, 0) for fn, m in starts)
    for fn, m in starts:
        owner.setdefault(fn, m)
    while queue:
        fn, m, d = queue.popleft()
        if d >= depth:
            continue
        pkg = g.nodes[fn].get("package")
        for s in edge_sites(g, fn, "out", ("call",)):
            nd = g.nodes[s.node]
            if s.node not in owner and nd.get("kind") == "function" and \
                    nd.get("package") == pkg and nd.get("role") != "module":
                owner[s.node] = m
                queue.append((s.node, m, d + 1))
    return owner


def _place(s: Site) -> tuple:
    return (s.root, s.file, s.line, s.node, s.kind)
