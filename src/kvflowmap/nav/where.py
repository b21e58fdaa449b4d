"""``kvflowmap where NAME``: where a symbol is defined and what touches it.

A name is a full node id or the end of one (``get_finished``,
``Worker.get_finished``, ``finished_recving``), or a module-level alias of a
class (``NixlConnectorWorker``). When several nodes match and exactly one of
them is analysed code (not an ``external`` node), that one is meant; otherwise
the caller gets an :class:`Ambiguous` listing the candidates.

Given the model, attributes declared in the body of an analysed class count
as candidates too, node or not: ``finished_recving`` is a field node of
``KVConnectorOutput`` but also declared by ``KVConnectorTransferResults``,
so the short name is ambiguous rather than silently the node's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import networkx as nx

from kvflowmap.graph import select

if TYPE_CHECKING:
    from kvflowmap.model.classes import ClassIndex
    from kvflowmap.model.core import Model

FLOW_KINDS = ("call", "dispatch", "bridge")

# (relation name, direction seen from the node, edge kinds). States and fields
# only ever have the data edges in one direction and functions in the other,
# so one table serves every node kind.
RELATIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("callers", "in", FLOW_KINDS),
    ("callees", "out", FLOW_KINDS),
    ("setters", "in", ("sets_state",)),
    ("sets", "out", ("sets_state",)),
    ("readers", "out", ("reads_state",)),
    ("reads", "in", ("reads_state",)),
    ("producers", "in", ("produces",)),
    ("produces", "out", ("produces",)),
    ("consumers", "out", ("consumes",)),
    ("consumes", "in", ("consumes",)),
)

# Edge attributes worth showing next to a site (all short names or text of a
# test; never whole statements).
NOTE_KEYS = ("carrier", "registry", "ref", "property", "guard", "via", "test")


@dataclass(frozen=True)
class Site:
    """One place that links the queried node with ``node``."""

    node: str
    kind: str
    file: str
    line: int
    root: str
    note: str = ""


@dataclass(frozen=True)
class WhereResult:
    """Everything ``where`` knows about one node."""

    node: str
    kind: str
    file: str
    line: int
    root: str
    side: str
    subject: bool
    signature: str
    doc: str
    relations: tuple[tuple[str, tuple[Site, ...]], ...]
    members: tuple[Site, ...] = ()
    # the module-level aliases of this class the queried name designates
    # (``kind`` "alias", ``node`` the alias's id)
    aliases: tuple[Site, ...] = ()

    def get(self, relation: str) -> tuple[Site, ...]:
        """The sites of one relation (empty when it has none)."""
        return dict(self.relations).get(relation, ())


@dataclass(frozen=True)
class Candidate:
    """One of several nodes an ambiguous name matches."""

    node: str
    kind: str
    file: str
    line: int
    root: str


@dataclass(frozen=True)
class Ambiguous:
    """A name that matches several nodes."""

    name: str
    candidates: tuple[Candidate, ...]


def lookup(g: nx.MultiDiGraph, name: str, declared: dict[str, Candidate] | None = None
           ) -> list[str]:
    """Nodes ``name`` designates, preferring analysed code over externals;
    with ``declared`` (:func:`declared_attributes`), also the ids of the
    declared class attributes it designates that are no node.

    Raises :class:`~kvflowmap.graph.select.SelectError` (with close matches)
    when nothing matches."""
    extra = sorted(a for a in declared or {} if a not in g)
    if name in g or name in extra:
        return [name]  # an exact id
    try:
        hits = select.resolve(g, [name])
    except select.SelectError:
        if not extra:
            raise
        hits = []
    hits = sorted(set(hits) | set(extra))
    inside = [n for n in hits if n not in g or g.nodes[n].get("kind") != "external"]
    return inside if len(inside) == 1 else hits


def declared_attributes(model: "Model", name: str) -> dict[str, Candidate]:
    """The attributes bound in the body of an analysed class
    (``finished_recving: set[str] | None = None``, an enum member) that
    ``name`` designates (the full id or the end of one), by id."""
    suffix = "." + name.lstrip(".")
    short = suffix.rpartition(".")[2]
    out: dict[str, Candidate] = {}
    for module, ff in model.facts.items():
        classes = {c.qualname for c in ff.classes}
        for a in ff.assigns:
            if a.target != short or a.scope not in classes:
                continue
            fqn = f"{module}.{a.scope}.{a.target}"
            if (fqn == name or fqn.endswith(suffix)) and fqn not in out:
                sf = model.source(module)
                out[fqn] = Candidate(fqn, "attribute", sf.rel if sf else "", a.line,
                                     sf.root.label if sf else "")
    return out


def instance_attributes(model: "Model", name: str, classes: "ClassIndex | None" = None
                        ) -> dict[str, tuple[Candidate, tuple[tuple[str, tuple[Site, ...]], ...]]]:
    """The attributes the analysed methods of a class set on ``self``
    (``self.only_removed = {}`` in ``__init__``) that ``name`` designates and
    that are no node of the graph, by id: where the class first sets each,
    and the functions (of the class, its bases and subclasses) that write it
    (assignments, puts), take out of it, and read it."""
    cls_name, _, attr = name.lstrip(".").rpartition(".")
    if not cls_name or not attr.isidentifier():
        return {}
    out: dict[str, tuple[Candidate, tuple[tuple[str, tuple[Site, ...]], ...]]] = {}
    for module, ff in sorted(model.facts.items()):
        sf = model.source(module)
        if sf is None or not sf.subject:
            continue
        for c in ff.classes:
            fqn = f"{module}.{c.qualname}"
            if not (fqn == cls_name or fqn.endswith("." + cls_name)):
                continue
            first = min((a.line for a in ff.assigns if a.target == f"self.{attr}"
                         and a.scope.rpartition(".")[0] == c.qualname), default=None)
            if first is None:
                continue
            family = {fqn, *(classes.mro(fqn) if classes else ()),
                      *(classes.all_subclasses(fqn) if classes else ())}
            out[f"{fqn}.{attr}"] = (
                Candidate(f"{fqn}.{attr}", "instance attribute", sf.rel, first, sf.root.label),
                _attribute_uses(model, family, attr))
    return out


def _attribute_uses(model: "Model", family: set[str], attr: str
                    ) -> tuple[tuple[str, tuple[Site, ...]], ...]:
    """Per relation (``writers``, ``removers``, ``readers``), each use of
    ``self.<attr>`` in a method of one of the ``family`` classes."""
    from kvflowmap.lifecycle.containers import ADD_OPS, REMOVE_OPS, RESET_OPS

    chain = f"self.{attr}"
    uses: dict[str, dict[tuple[str, int], Site]] = {"writers": {}, "removers": {}, "readers": {}}
    for module, ff in sorted(model.facts.items()):
        sf = model.source(module)
        if sf is None:
            continue
        owners = {c.qualname for c in ff.classes if f"{module}.{c.qualname}" in family}
        stores = {(a.scope, a.line) for a in ff.assigns if a.target == chain and not a.aug}
        found: list[tuple[str, str, int, str]] = []  # (relation, scope, line, how)
        found += [("writers", a.scope, a.line, "aug" if a.aug else "assign")
                  for a in ff.assigns if a.target == chain]
        found += [("writers" if op.op in ADD_OPS else "removers" if (
                   op.op in REMOVE_OPS or op.op in RESET_OPS) else "readers",
                   op.scope, op.line, op.op) for op in ff.containers if op.container == chain]
        found += [("readers", r.scope, r.line, "read") for r in ff.reads
                  if r.base == "self" and r.attr == attr and (r.scope, r.line) not in stores]
        found += [("readers", c.scope, c.line, "call") for c in ff.calls
                  if (c.callee or "").startswith(chain + ".")]
        for rel, scope, line, how in found:
            if scope.rpartition(".")[0] in owners:
                site = Site(f"{module}.{scope}", how, sf.rel, line, sf.root.label)
                uses[rel].setdefault((site.node, line), site)
    return tuple((rel, tuple(sorted(sites.values(), key=lambda s: (s.file, s.line, s.node))))
                 for rel, sites in uses.items() if sites)


def inherited_fields(g: nx.MultiDiGraph, name: str, classes: "ClassIndex") -> list[str]:
    """The state nodes of a field asked for under the class that defines it
    (``NixlBaseConnectorWorker._recving_transfers``): request-keyed state is
    one node per concrete class whose objects hold it
    (``NixlPullConnectorWorker._recving_transfers`` and the Push worker's),
    so the name designates those of the classes deriving from it."""
    cls, _, attr = name.rpartition(".")
    if not cls or not attr:
        return []
    owners = {c for c in classes.bases if c == cls or c.endswith("." + cls)}
    if not owners:
        return []
    return sorted(n for n, d in g.nodes(data=True)
                  if d.get("kind") == "field" and n.rpartition(".")[2] == attr
                  and owners & set(classes.mro(n.rpartition(".")[0])))


def where(g: nx.MultiDiGraph, name: str, model: "Model | None" = None,
          classes: "ClassIndex | None" = None) -> WhereResult | Ambiguous:
    """Definition, callers, callees and data relations of the node ``name``
    designates, or the candidates when the name is ambiguous (with ``model``,
    class attributes declared under the same name count, see the module
    docstring; with ``classes``, a field named under the class that defines it
    designates the per-class nodes, :func:`inherited_fields`)."""
    declared = declared_attributes(model, name) if model is not None else {}
    try:
        hits = lookup(g, name, declared)
    except select.SelectError:
        hits = inherited_fields(g, name, classes) if classes is not None else []
        if not hits:
            # an attribute the methods set on ``self`` that the graph does not follow
            found = instance_attributes(model, name, classes) if model is not None else {}
            if len(found) == 1:
                cand, uses = next(iter(found.values()))
                return replace(_attribute(cand), relations=uses)
            if found:
                return Ambiguous(name, tuple(c for c, _ in found.values()))
            raise
    if len(hits) > 1:
        return Ambiguous(name, tuple(_candidate(g, n) if n in g else declared[n]
                                     for n in hits))
    if hits[0] not in g:
        return _attribute(declared[hits[0]])
    return describe(g, hits[0], name)


def describe(g: nx.MultiDiGraph, node: str, name: str = "") -> WhereResult:
    """The :class:`WhereResult` of a node id known to be in ``g`` (``name``:
    what the user asked for, to say which alias of a class it is)."""
    d = g.nodes[node]
    relations = _decisions(g, node, tuple((rel, sites) for rel, direction, kinds in RELATIONS
                                    if (sites := edge_sites(g, node, direction, kinds))))
    if fed := _fed_by(g, node):
        relations += (("fed", fed),)
    aliases = tuple(Site(str(a["id"]), "alias", str(a.get("file") or ""), int(a.get("line") or 0),
                         str(a.get("root") or ""))
                    for a in select.aliases_named(g, node, name)) if name else ()
    return WhereResult(
        node=node, kind=str(d.get("kind", "")), file=str(d.get("file") or ""),
        line=int(d.get("line") or 0), root=str(d.get("root") or ""),
        side=str(d.get("side") or ""), subject=bool(d.get("subject")),
        signature=str(d.get("signature") or ""), doc=str(d.get("doc") or "").strip(),
        relations=relations, members=_members(g, node) if d.get("kind") == "class" else (),
        aliases=aliases)


def _decisions(g: nx.MultiDiGraph, node: str,
               relations: tuple[tuple[str, tuple[Site, ...]], ...]
               ) -> tuple[tuple[str, tuple[Site, ...]], ...]:
    """A ``produces`` edge into a state is a decision (``graph.returnstates``:
    the function's return value is tested where the state is set), named so
    apart from the fields a function fills: ``deciders`` of a state,
    ``decides`` of a function."""
    out: list[tuple[str, tuple[Site, ...]]] = []
    for rel, sites in relations:
        if rel not in ("producers", "produces"):
            out.append((rel, sites))
            continue
        state = node if rel == "producers" else None  # the state is this node or the site's
        states = tuple(s for s in sites if g.nodes[state or s.node].get("kind") == "state")
        rest = tuple(s for s in sites if s not in states)
        if rest:
            out.append((rel, rest))
        if states:
            out.append(("deciders" if rel == "producers" else "decides", states))
    return tuple(out)


def _fed_by(g: nx.MultiDiGraph, node: str) -> tuple[Site, ...]:
    """For a carrier field: where the ids it is given by return value first
    enter the connector's state. A producer through its return value
    (``get_finished``) hands on a request-keyed container it reads; the
    functions that put ids into that container (``_complete_pull_task``) are
    where a request is first marked done."""
    if g.nodes[node].get("kind") != "field":
        return ()
    # producer -> the names its returned value is made of (None: not known)
    producers: dict[str, set[str] | None] = {}
    for u, _, e in g.in_edges(node, data=True):
        if e.get("kind") == "produces" and e.get("via") == "return":
            deps = e.get("deps")
            known = producers.get(u, set())
            producers[u] = None if not deps or known is None else \
                known | {d.rpartition(".")[2] for d in deps}
    sites: set[Site] = set()
    for p, made_of in producers.items():
        for state, _, e in g.in_edges(p, data=True):
            if e.get("kind") != "consumes" or e.get("via") != "state" or (
                    made_of is not None and state.rpartition(".")[2] not in made_of):
                continue
            for q, _, f in g.in_edges(state, data=True):
                if f.get("kind") == "produces" and q not in producers:
                    sites.add(Site(node=q, kind="produces", file=str(f.get("file") or ""),
                                   line=int(f.get("line") or 0), root=str(f.get("root") or ""),
                                   note=f"puts ids into {_last_two(state)}, which "
                                        f"{_last_two(p)} reads"))
    return tuple(sorted(sites, key=lambda s: (s.root, s.file, s.line, s.node, s.note)))


def _last_two(fqn: str) -> str:
    return ".".join(fqn.split(".")[-2:])


def _attribute(c: Candidate) -> WhereResult:
    """A declared class attribute that is no node of the graph: where it is
    declared, and no relations (the graph does not follow it)."""
    return WhereResult(node=c.node, kind=c.kind, file=c.file, line=c.line, root=c.root,
                       side="", subject=False, signature="", doc="", relations=())


def edge_sites(g: nx.MultiDiGraph, node: str, direction: str,
               kinds: tuple[str, ...]) -> tuple[Site, ...]:
    """Sites of the edges of ``kinds`` into (``in``) or out of (``out``) ``node``,
    sorted by place; one site per edge."""
    edges = g.in_edges(node, data=True) if direction == "in" else g.out_edges(node, data=True)
    sites = {
        Site(node=u if direction == "in" else v, kind=str(e.get("kind")),
             file=str(e.get("file") or ""), line=int(e.get("line") or 0),
             root=str(e.get("root") or ""), note=_note(e))
        for u, v, e in edges if e.get("kind") in kinds
    }
    return tuple(sorted(sites, key=lambda s: (s.root, s.file, s.line, s.kind, s.node, s.note)))


def _note(e: dict) -> str:
    parts = []
    for key in NOTE_KEYS:
        value = e.get(key)
        if value is True:
            parts.append(key)
        elif value:
            parts.append(f"{key}: {value}")
    return "; ".join(parts)


def _members(g: nx.MultiDiGraph, cls: str) -> tuple[Site, ...]:
    """Functions defined directly in the class body (not nested deeper)."""
    prefix = cls + "."
    out = []
    for n in sorted(g):
        if n.startswith(prefix) and "." not in n[len(prefix):]:
            d = g.nodes[n]
            if d.get("kind") == "function":
                out.append(Site(n, "member", str(d.get("file") or ""), int(d.get("line") or 0),
                                str(d.get("root") or "")))
    return tuple(sorted(out, key=lambda s: (s.line, s.node)))


def _candidate(g: nx.MultiDiGraph, n: str) -> Candidate:
    d = g.nodes[n]
    return Candidate(n, str(d.get("kind", "")), str(d.get("file") or ""),
                     int(d.get("line") or 0), str(d.get("root") or ""))
