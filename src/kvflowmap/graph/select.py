"""Selections over the kvflowmap graph: the default flow picture, a focus
around some symbols, the paths between two symbols, and glob filters.

Every function here is pure: it returns a NEW ``MultiDiGraph`` (attributes
copied, nodes and edges inserted in sorted order so output built from it is
deterministic) and never modifies its input.

Symbol names given by a user are matched with :func:`match_nodes`: a full node
id matches itself; otherwise a name matches every node whose id ends with
``"." + name`` (``get_finished`` matches ``...Worker.get_finished`` and
``...Connector.get_finished``), and so does a module-level alias of a class
(its ``aliases``); ``Class.member`` for an inherited member is the
definition the class's MRO finds.
"""

from __future__ import annotations

import copy
import difflib
import fnmatch
import itertools
from collections.abc import Iterable
from typing import Literal

import networkx as nx

Direction = Literal["callers", "callees", "both"]

KEEP_KINDS = frozenset({"state", "field"})


class SelectError(ValueError):
    """A selection could not be made; the message says why and what to try."""


def match_nodes(g: nx.MultiDiGraph, name: str) -> list[str]:
    """Node ids that ``name`` designates: itself if it is an id, else every id
    ending with ``.name`` (sorted), else the classes registered under that
    name. Empty when nothing matches."""
    if name in g:
        return [name]
    suffix = "." + name.lstrip(".")
    # a class also answers to the module-level names bound to it
    # (``NixlConnectorWorker = NixlPullConnectorWorker``: ``aliases``)
    found = sorted({n for n in g if n.endswith(suffix)} | {
        n for n, aliases in g.nodes(data="aliases") if aliases
        and any(a["id"] == name or a["id"].endswith(suffix) for a in aliases)})
    # the name vLLM's factory knows a connector by (``NixlConnector``, an
    # alias of ``NixlPullConnector``)
    return found or sorted(n for n, names in g.nodes(data="registered_names")
                           if names and name in names) or _inherited(g, name)


def aliases_named(g: nx.MultiDiGraph, node: str, name: str) -> list[dict]:
    """The module-level aliases of class ``node`` that ``name`` designates
    (its full id or the end of one); empty when ``name`` names the node itself."""
    if name == node or node.endswith("." + name.lstrip(".")):
        return []
    suffix = "." + name.lstrip(".")
    return [a for a in g.nodes[node].get("aliases") or ()
            if a["id"] == name or a["id"].endswith(suffix)]


def _inherited(g: nx.MultiDiGraph, name: str) -> list[str]:
    """``Class.member`` for a member the class inherits: the definition its
    analysed MRO finds first (``NixlPullConnector.get_transfer_results`` is
    ``NixlBaseConnector.get_transfer_results``)."""
    cls_name, _, member = name.rpartition(".")
    if not cls_name or not member:
        return []
    mro = g.graph.get("mro", {})
    classes = [n for n in match_nodes(g, cls_name) if n in mro]
    out = set()
    for cls in classes:
        hit = next((f"{b}.{member}" for b in mro[cls] if f"{b}.{member}" in g), None)
        if hit is not None:
            out.add(hit)
    return sorted(out)


def resolve(g: nx.MultiDiGraph, names: Iterable[str], *, unique: bool = False) -> list[str]:
    """Match every name; raise :class:`SelectError` naming close candidates
    for each name that matches nothing. Returns the sorted union. With
    ``unique``, a name that designates several analysed nodes (two classes
    called ``WorkerConnector`` in different modules) is an error listing
    them, as ``where`` answers, rather than a silent merge."""
    found: set[str] = set()
    missing: list[str] = []
    ambiguous: list[str] = []
    for name in names:
        hits = match_nodes(g, name)
        inside = [n for n in hits if g.nodes[n].get("kind") != "external"]
        if unique and len(inside) > 1:
            ambiguous.append(f"{name!r} names {len(inside)} nodes; give one of: "
                             + ", ".join(inside[:8]) + (" ..." if len(inside) > 8 else ""))
        elif hits:
            found.update(inside if unique and inside else hits)
        else:
            missing.append(name)
    if missing or ambiguous:
        raise SelectError("\n".join([_no_match_message(g, m) for m in missing] + ambiguous))
    return sorted(found)


def _no_match_message(g: nx.MultiDiGraph, name: str) -> str:
    """Explain that ``name`` matched nothing, with close matches."""
    ids = sorted(g)
    short = sorted({n.rsplit(".", 1)[-1] for n in ids})
    close = difflib.get_close_matches(name, ids, n=5, cutoff=0.6)
    for s in difflib.get_close_matches(name.rsplit(".", 1)[-1], short, n=5):
        close.extend(n for n in ids if n.endswith("." + s) and n not in close)
    msg = f"no node matches {name!r} (give a full id or the end of one, e.g. 'Class.method')"
    if close:
        msg += "; did you mean: " + ", ".join(sorted(set(close))[:8])
    return msg


def subgraph(g: nx.MultiDiGraph, nodes: Iterable[str],
              edges: Iterable[tuple] | None = None) -> nx.MultiDiGraph:
    """A deterministic copy holding ``nodes`` and either the given
    ``(u, v, key)`` edges or all edges among ``nodes``."""
    keep = set(nodes)
    out = nx.MultiDiGraph()
    out.graph.update(copy.deepcopy(g.graph))
    for n in sorted(keep):
        out.add_node(n, **copy.deepcopy(g.nodes[n]))
    if edges is None:
        edges = ((u, v, k) for u, v, k in g.edges(keys=True) if u in keep and v in keep)
    for u, v, k in sorted(set(edges), key=_edge_sort_key(g)):
        out.add_edge(u, v, key=k, **copy.deepcopy(g.edges[u, v, k]))
    return out


def _edge_sort_key(g: nx.MultiDiGraph):
    """Sort key for ``(u, v, key)`` triples that never compares mixed types."""
    def key(e: tuple) -> tuple:
        u, v, k = e
        d = g.edges[u, v, k]
        return (u, v, str(d.get("kind", "")), int(d.get("line") or 0), str(k))
    return key


def choose_connectors(g: nx.MultiDiGraph, names: Iterable[str] = ()) -> list[str]:
    """Connector classes to draw: those named, else the subject connector
    that overrides the most protocol hooks in its own code (the main one of
    a package; hooks inherited from vLLM's MultiConnector do not count); a
    host (vLLM's own connector driving the subject) only when the subject
    has no connector of its own."""
    names = list(names)
    if names:
        found = resolve(g, names, unique=True)
        return [n for n in found if g.nodes[n].get("connector_hooks")] or found
    # ties go to a class nothing derives from (the concrete connector, not
    # the intermediate base whose hooks it inherits)
    bases = {b for m in g.graph.get("mro", {}).values() for b in m[1:]}
    cands = [(bool(d.get("host")), -int(d.get("subject_hooks", 0)),
              -int(d.get("connector_hooks", 0)), n in bases, n)
             for n, d in g.nodes(data=True) if d.get("connector_hooks") and d.get("subject")]
    return [min(cands)[-1]] if cands else []


def flow_view(g: nx.MultiDiGraph, max_nodes: int = 80,
              connectors: Iterable[str] = ()) -> nx.MultiDiGraph:
    """The default picture: the connector-independent flow (``flow=True``:
    vLLM entry points, the hooks they call, states and carrier fields) plus
    the chosen connectors' hook implementations and what they delegate to
    (see ``choose_connectors``), and the edges among them.

    When there are more than ``max_nodes``, nodes are ranked and the top
    ``max_nodes`` kept. Rank, best first:

    1. tier 0: states, fields, protocol hooks (nodes with ``hook=True``, or
       endpoints of a ``dispatch`` edge: a base hook and its overrides) and
       endpoints of bridge edges; tier 1: other nodes with a ``side``;
       tier 2: the rest;
    2. within a tier, higher degree inside the flow subgraph first;
    3. ties by node id.

    Then nodes left without any edge by the cut (they had some in the full
    flow) are dropped, and their places go to the next ranked nodes that
    connect to what is kept.
    """
    chosen = set(choose_connectors(g, connectors))
    flow = [n for n, d in g.nodes(data=True)
            if (d.get("flow") and d.get("connector") in (None, *chosen))
            or d.get("connector") in chosen or chosen & set(d.get("connectors", ()))
            or n in chosen]
    flow += _hook_callers(g, flow)
    view = subgraph(g, flow)
    # a state nothing in the flow sets or reads (``FINISHED_REPETITION``)
    # says nothing about the KV flow: drawn, it only floats alone; nor does
    # one the protocol does not list for the KV lifecycle (``kv_states``)
    kv_states = tuple(g.graph.get("kv_states") or ("*",))
    view = subgraph(view, [n for n in view if view.nodes[n].get("kind") != "state"
                            or (view.degree(n) and any(
                                fnmatch.fnmatchcase(n.rpartition(".")[2], p) for p in kv_states))])
    # nothing floats alone: a node with no edge in the flow (the connector
    # class itself, a hook whose base no analysed vLLM code calls) says nothing
    view = subgraph(view, [n for n in view if view.degree(n)])
    view.graph["connectors"] = sorted(chosen)
    if view.number_of_nodes() <= max_nodes:
        return view
    ranked = sorted(view, key=lambda n: (_tier(view, n), -view.degree(n), n))
    keep = set(ranked[:max(max_nodes, 0)])
    keep -= {n for n in keep if view.degree(n) and not _touches(view, n, keep)}
    for n in ranked[max(max_nodes, 0):]:
        if len(keep) >= max_nodes:
            break
        if _touches(view, n, keep):
            keep.add(n)
    keep -= {n for n in keep if view.nodes[n].get("kind") == "state" and
             not _touches(view, n, keep)}
    return subgraph(view, keep)


def connector_method(g: nx.MultiDiGraph, n: str, base: str) -> bool:
    """Whether ``n`` belongs to a connector class: its innermost enclosing
    class derives from the protocol base ``base`` (the base's own defaults
    are vLLM's code, not a connector's)."""
    mros = g.graph.get("mro", {})
    parts = n.split(".")
    owner = next((".".join(parts[:k]) for k in range(len(parts) - 1, 0, -1)
                  if ".".join(parts[:k]) in mros), None)
    return owner is not None and owner != base and base in mros[owner]


def _hook_callers(g: nx.MultiDiGraph, nodes: list[str]) -> list[str]:
    """Every drawn hook implementation has its caller: the base hook it
    implements and the vLLM functions calling that (``register_kv_caches``
    from ``ActiveKVConnector.__init__``), when the flow lacks them."""
    have = set(nodes)
    out: list[str] = []
    for n in nodes:
        base_hook = g.nodes[n].get("implements")
        if not base_hook or base_hook not in g or base_hook in have:
            continue
        base = base_hook.rpartition(".")[0]
        callers = sorted(u for u, _, k in g.in_edges(base_hook, data="kind") if k == "call"
                         and g.nodes[u].get("kind") == "function"
                         and not connector_method(g, u, base))
        if callers:
            out += [base_hook, *[u for u in callers if u not in have]]
            have.update(out)
    return out


def _touches(g: nx.MultiDiGraph, n: str, nodes: set[str]) -> bool:
    """Whether ``n`` has an edge to or from another node of ``nodes``."""
    return any(m in nodes and m != n for m in itertools.chain(g.predecessors(n), g.successors(n)))


def _tier(g: nx.MultiDiGraph, n: str) -> int:
    """Keep-priority tier of a node (0 kept first), see :func:`flow_view`."""
    d = g.nodes[n]
    if d.get("kind") in KEEP_KINDS or d.get("hook"):
        return 0
    incident = itertools.chain(g.in_edges(n, data="kind"), g.out_edges(n, data="kind"))
    if any(kind in ("bridge", "dispatch") for _, _, kind in incident):
        return 0
    return 1 if d.get("side") else 2


def focus(g: nx.MultiDiGraph, symbols: list[str], depth: int,
          direction: Direction = "both", max_nodes: int | None = None) -> nx.MultiDiGraph:
    """The symbols plus everything within ``depth`` edges of them, following
    edges backwards (``callers``), forwards (``callees``) or both ways; all
    edges among the kept nodes are included. With ``max_nodes``, at most that
    many: nearest hops first, within a hop analysed nodes before externals,
    the subject's before its context's, and higher degree first; ``graph["cut"]`` then says how many were found."""
    if direction not in ("callers", "callees", "both"):
        raise SelectError(f"direction must be callers, callees or both, not {direction!r}")
    if depth < 0:
        raise SelectError(f"depth must be 0 or more, not {depth}")
    start = resolve(g, symbols, unique=True)
    seen = set(start)
    frontier = set(start)
    rings: list[set[str]] = []
    for _ in range(depth):
        nxt: set[str] = set()
        for n in frontier:
            if direction in ("callers", "both"):
                nxt.update(g.predecessors(n))
            if direction in ("callees", "both"):
                nxt.update(g.successors(n))
        frontier = nxt - seen
        seen |= frontier
        rings.append(frontier)
    if max_nodes is None or len(seen) <= max_nodes:
        return subgraph(g, seen)
    keep = set(start)
    for ring in rings:
        ranked = sorted(ring, key=lambda n: (g.nodes[n].get("kind") == "external",
                                             not g.nodes[n].get("subject"), -g.degree(n), n))
        keep.update(ranked[:max(max_nodes - len(keep), 0)])
    view = subgraph(g, keep)
    view.graph["cut"] = len(seen)
    return view


def find_paths(g: nx.MultiDiGraph, src: str, dst: str, max_paths: int = 10) -> list[list[str]]:
    """Up to ``max_paths`` simple paths along edge direction from any node
    matching ``src`` to any node matching ``dst``: shortest first, ties in
    lexicographic order of node ids. Empty when there is none."""
    sources, targets = resolve(g, [src]), resolve(g, [dst])
    simple = nx.DiGraph()
    simple.add_nodes_from(sorted(g))
    simple.add_edges_from(sorted({(u, v) for u, v in g.edges()}))
    found: list[list[str]] = []
    for s in sources:
        for t in targets:
            if s == t or not nx.has_path(simple, s, t):
                continue
            found.extend(itertools.islice(nx.shortest_simple_paths(simple, s, t), max_paths))
    found.sort(key=lambda p: (len(p), p))
    return found[:max_paths]


def paths_view(g: nx.MultiDiGraph, src: str, dst: str, max_paths: int = 10) -> nx.MultiDiGraph:
    """The union of :func:`find_paths`: their nodes and every edge (all
    kinds, all lines) between consecutive nodes. Raises :class:`SelectError`
    when no path exists."""
    paths = find_paths(g, src, dst, max_paths)
    if not paths:
        raise SelectError(
            f"no path from {src!r} to {dst!r} along edge direction; try swapping them "
            "or `focus` with direction 'both'")
    pairs = {(u, v) for p in paths for u, v in zip(p, p[1:], strict=False)}
    nodes = {n for p in paths for n in p}
    edges = [(u, v, k) for u, v in pairs for k in g[u][v]]
    return subgraph(g, nodes, edges)


def filter_globs(g: nx.MultiDiGraph, include: list[str], exclude: list[str]) -> nx.MultiDiGraph:
    """Keep nodes whose id matches any ``include`` glob (all nodes when
    ``include`` is empty) and no ``exclude`` glob; case-sensitive fnmatch."""
    def hit(n: str, pats: list[str]) -> bool:
        return any(fnmatch.fnmatchcase(n, p) for p in pats)

    keep = [n for n in g if (not include or hit(n, include)) and not hit(n, exclude)]
    return subgraph(g, keep)
