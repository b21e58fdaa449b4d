"""Story pictures (``graph --view load|save``): one request's way through the
protocol, left to right, one column per stage of a protocol ``views`` entry.

Per stage, the chosen connector's implementation of each hook the stage
names is drawn with the vLLM functions that call it (the call through the
base hook is drawn as one edge, its tooltip naming the hook) and what it
delegates to inside its own package, ``depth`` calls deep. A hook the
connector inherits from an analysed class between it and the protocol base
is drawn where it is defined; one it leaves to the protocol base's default
is drawn only when a carrier of the story ends there. Bridges are drawn for
the story's carriers only, request states only when a drawn function sets
them and the stage names them, and request-keyed containers one stage fills
and a later one reads as notes between the two.

The result is a plain graph like every selection (see ``select``), plus
``graph["stages"]``: per stage its label, its ``anchors`` (the hooks and
listed functions, one rank with the stage's header) and the ``offsets`` of
the rest (columns before or after the anchors), which the DOT renderer turns
into rank constraints.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

import networkx as nx

from kvflowmap.graph import select
from kvflowmap.protocol import Stage, View

DELEGATES_PER_CALL = 3  # callees drawn per function, the most connected first
HANDOVER_REACH = 4  # calls from a drawn function to where it fills or reads a container
HANDOVERS = 6  # hand-overs (pairs of drawn functions) per story, the widest first


@dataclass
class _Placement:
    """Where each node of the story goes: (stage, column) and the edges."""

    at: dict[str, tuple[int, int]] = field(default_factory=dict)
    edges: set[tuple[str, str, object]] = field(default_factory=set)  # copied from the graph
    via: dict[tuple[str, str], tuple[str, list[dict]]] = field(default_factory=dict)
    # a delegate call drawn to the override that runs (caller, override) ->
    # (the method the call names, its call edges)
    through: dict[tuple[str, str], tuple[str, list[dict]]] = field(default_factory=dict)
    # edges to nodes the analysis graph does not have (containers): u, v, attrs, v's attrs
    extra: list[tuple[str, str, dict, dict]] = field(default_factory=list)

    def place(self, n: str, stage: int, column: int) -> None:
        self.at.setdefault(n, (stage, column))  # a node belongs to the first stage it meets


def story_view(g: nx.MultiDiGraph, view: View, base: str, *, connectors=(),
               depth: int = 1, max_nodes: int = 80,
               state: nx.MultiDiGraph | None = None) -> nx.MultiDiGraph:
    """The story ``view`` for the chosen connector (see the module doc).
    ``state`` is the graph with the request-keyed containers added
    (``nav.statelinks``): a container one stage fills and a later stage reads
    is drawn between them, where the request waits.
    Raises ``select.SelectError`` when the subject has no connector class or
    the chosen one runs none of the view's hooks."""
    chosen = set(select.choose_connectors(g, connectors))
    if not chosen:
        raise select.SelectError("no connector class in the analysed subject; --view draws "
                                 "a connector's story (give --connector CLASS)")
    carriers = set(view.carriers)
    owned = _owned_classes(g, chosen)
    # a delegate called on a declared base goes to the subclass the connector
    # constructs (only when that is known: every subclass would be a guess)
    overrides = _subclasses(g, owned) if owned else {}
    p = _Placement()
    for i, st in enumerate(view.stages):
        for hook in st.hooks:
            _place_hook(g, p, i, f"{base}.{hook}", base, chosen, carriers, depth, overrides)
        _place_functions(g, p, i, st)
    if not any(g.nodes[n].get("connectors") for n in p.at if n in g):
        names = ", ".join(sorted(c.rpartition(".")[2] for c in chosen))
        raise select.SelectError(f"{names} runs none of the hooks of the {view.name!r} view")
    _trim(g, p, max_nodes)
    _place_callers(g, p, view, base)
    if state is not None:
        _place_handovers(state, p, chosen, owned)
    for i, st in enumerate(view.stages):
        _place_states(g, p, i, st)
    return _build(g, p, view, chosen, carriers)


def _place_hook(g: nx.MultiDiGraph, p: _Placement, i: int, hook: str, base: str,
                chosen: set[str], carriers: set[str], depth: int,
                overrides: dict[str, list[str]]) -> None:
    """The connector's implementation of ``hook``, its callers and delegates."""
    if hook not in g:
        return
    impls = sorted(n for n, d in g.nodes(data=True)
                   if d.get("implements") == hook and chosen & set(d.get("connectors", ())))
    if not impls and _bridged(g, hook, carriers):
        impls = [hook]  # the base default runs, and the story's data ends there
    if not impls:
        return
    callers = _callers(g, hook, base, chosen)
    if not callers and any(d.get("kind") == "call" for *_, d in g.in_edges(hook, data=True)):
        # vLLM calls the hook, but never this connector's: it overrides the
        # caller (NIXL's get_transfer_results, so its get_finished is dead)
        return
    # columns: 0 the vLLM caller (or the one calling the base default), 1 the
    # base default in between, 2 the hook itself (the stage's anchor), 3.. what
    # it delegates to
    for m in impls:
        p.place(m, i, 2)
        for outer, inner, ds in callers:
            if inner is None:
                p.place(outer, i, 1)
                p.via[(outer, m)] = (hook, ds)
            else:  # vLLM -> the inherited base default -> this implementation
                p.place(outer, i, 0)
                p.place(inner, i, 1)
                p.edges.update((outer, inner, k) for k in g[outer][inner])
                p.via[(inner, m)] = (hook, ds)
        if m != hook:  # the base default's body is vLLM's: it calls the hooks drawn
            _place_delegates(g, p, i, m, depth, overrides)


def _bridged(g: nx.MultiDiGraph, n: str, carriers: set[str]) -> bool:
    return any(d.get("kind") == "bridge" and str(d.get("carrier", "")).rpartition(".")[2]
               in carriers for *_, d in (*g.in_edges(n, data=True), *g.out_edges(n, data=True)))


def _callers(g: nx.MultiDiGraph, hook: str, base: str,
             chosen: set[str]) -> list[tuple[str, str | None, list[dict]]]:
    """vLLM functions calling ``hook``: ``(caller, None, edges)``, or, when the
    call reaches it through a base default the connector does not override
    (vLLM 0.33's ``get_transfer_results`` calls ``get_finished``),
    ``(caller, default, edges)``. Other connectors' methods (MultiConnector
    forwarding to its children) are not this connector's callers."""
    out: list[tuple[str, str | None, list[dict]]] = []
    for u in sorted(set(g.predecessors(hook))):
        ds = [d for d in g[u][hook].values() if d.get("kind") == "call"]
        if not ds or g.nodes[u].get("kind") != "function":
            continue
        if u.rpartition(".")[0] == base:
            overrides = [n for n, d in g.nodes(data=True)
                         if d.get("implements") == u and chosen & set(d.get("connectors", ()))]
            if overrides:
                # the default runs only where the override calls it (super())
                out += [(o, u, ds) for o in overrides if g.has_edge(o, u)]
                continue
            out += [(c, u, ds) for c, _, _ in _callers(g, u, base, chosen)
                    if c.rpartition(".")[0] != base]
        elif not select.connector_method(g, u, base):
            out.append((u, None, ds))
    return out


def _place_delegates(g: nx.MultiDiGraph, p: _Placement, i: int, start: str, depth: int,
                     overrides: dict[str, list[str]]) -> None:
    """What ``start`` calls inside its own package, breadth first. A call to
    a method the connector's own subclass overrides is drawn to that override
    (NIXL's ``self.connector_scheduler`` is declared a
    ``NixlBaseConnectorScheduler``, whose ``update_state_after_alloc`` raises
    ``NotImplementedError``; the Pull connector builds a
    ``NixlPullConnectorScheduler``)."""
    pkg = g.nodes[start].get("package")
    frontier = [start]
    for level in range(depth):
        nxt: list[str] = []
        for n in frontier:
            callees = sorted({v for _, v, k in g.out_edges(n, data="kind") if k == "call"
                              and _delegate(g, v, pkg)},
                             key=lambda v: (-g.degree(v), v))[:DELEGATES_PER_CALL]
            for v in callees:
                runs = [o for o in _overriding(g, v, overrides) if _delegate(g, o, pkg)]
                for o in runs:
                    p.place(o, i, 3 + level)
                    p.through[(n, o)] = (v, [d for d in g[n][v].values() if d.get("kind") == "call"])
                    nxt.append(o)
                if not runs:
                    p.place(v, i, 3 + level)
                    p.edges.update((n, v, k) for k in g[n][v])
                    nxt.append(v)
        frontier = nxt


def _overriding(g: nx.MultiDiGraph, method: str, overrides: dict[str, list[str]]) -> list[str]:
    """The overrides of ``method`` that run on the subclasses in ``overrides``
    (the first definition along each one's MRO before the method's class)."""
    owner, _, name = method.rpartition(".")
    mros = g.graph.get("mro", {})
    runs: set[str] = set()
    for sub in overrides.get(owner, ()):
        for cls in mros.get(sub, (sub,)):
            if cls == owner:
                break
            if f"{cls}.{name}" in g:
                runs.add(f"{cls}.{name}")
                break
    return sorted(runs)


def _delegate(g: nx.MultiDiGraph, n: str, pkg: object) -> bool:
    d = g.nodes[n]
    return (d.get("kind") == "function" and d.get("role") != "module" and bool(pkg)
            and d.get("package") == pkg and not d.get("implements") and not d.get("hook")
            and not n.rpartition(".")[2].startswith("__"))


def _place_functions(g: nx.MultiDiGraph, p: _Placement, i: int, st: Stage) -> None:
    """The stage's vLLM functions; one called by another listed before it
    goes a column to the right."""
    column: dict[str, int] = {}
    for f in st.functions:
        if f in g:
            column[f] = 1 + max((column[u] for u in g.predecessors(f) if u in column),
                                default=1)
            p.place(f, i, column[f])


def _trim(g: nx.MultiDiGraph, p: _Placement, max_nodes: int) -> None:
    """Keep at most ``max_nodes``: the deepest, least connected delegates go first."""
    extra = len(p.at) - max_nodes
    if extra <= 0:
        return
    ranked = sorted((n for n, (_, col) in p.at.items() if col >= 3),
                    key=lambda n: (-p.at[n][1], g.degree(n), n))
    for n in ranked[:extra]:
        del p.at[n]


def _place_handovers(sg: nx.MultiDiGraph, p: _Placement, chosen: set[str],
                     owned: set[str]) -> None:
    """Request-keyed containers the connector hands a request over in: filled
    below a drawn function of one stage, read below one of a later stage
    (NIXL's ``_read_blocks`` puts the handle into ``_recving_transfers``,
    ``get_transfer_results`` takes the finished ids out). Drawn between the
    two, with a ``produces`` and a ``consumes`` edge naming the function and
    line that fill and read it."""
    drawn_for = {o for _, o in p.through}
    mine = [n for n in p.at if n in sg and (n in drawn_for
                                             or chosen & set(sg.nodes[n].get("connectors", ())))]
    subclasses = _subclasses(sg, owned)
    reach = {n: _reach(sg, n, subclasses) for n in mine}
    found = []
    for c, d in sg.nodes(data=True):
        if d.get("kind") != "field" or c in p.at or _sibling(sg, c.rpartition(".")[0], owned):
            continue
        ins = [(u, e) for u, _, e in sg.in_edges(c, data=True) if e.get("via") == "state"]
        outs = [(v, e) for _, v, e in sg.out_edges(c, data=True) if e.get("via") == "state"]
        src = [(p.at[n], n, u, e) for n in mine for u, e in ins if u in reach[n]]
        dst = [(p.at[n], n, v, e) for n in mine for v, e in outs if v in reach[n]]
        if not src or not dst:
            continue
        s_at, s_node, s_fn, s_edge = min(src, key=lambda t: (t[0][0], -t[0][1], t[1]))
        later = [t for t in dst if t[0][0] > s_at[0]]
        if not later:
            continue
        d_at, d_node, d_fn, d_edge = min(later, key=lambda t: (t[0][0], -t[0][1], t[1]))
        found.append((s_at[0] - d_at[0], c, (s_node, s_fn, s_edge), (d_node, d_fn, d_edge)))
    # one note per hand-over (filled below A, read below B), listing its containers
    groups: dict[tuple[str, str], list[tuple]] = {}
    for _, c, src_t, dst_t in sorted(found):
        groups.setdefault((src_t[0], dst_t[0]), []).append((c, src_t, dst_t))
    for k, ((s_node, d_node), items) in enumerate(sorted(groups.items())[:HANDOVERS]):
        # an id no function's ends like (labels are shortened to their ends)
        node_id = f"{items[0][0].rpartition('.')[0]}.<handover{k + 1}>"
        p.place(node_id, p.at[s_node][0], p.at[s_node][1] + 1)
        owners = sorted({c.rpartition(".")[0].rpartition(".")[2] for c, _, _ in items})
        lines = [f"{c.rpartition('.')[0].rpartition('.')[2] + '.' if len(owners) > 1 else ''}"
                 f"{c.rpartition('.')[2]}" for c, _, _ in items]
        first = sg.nodes[items[0][0]]
        node = {**first, "side": sg.nodes[s_node].get("side"),
                "connectors": sg.nodes[s_node].get("connectors")
                or (sorted(chosen) if s_node in drawn_for else None),
                "label": "\n".join(([owners[0]] if len(owners) == 1 else []) + lines),
                "doc": "request-keyed state: " + ", ".join(c for c, _, _ in items)}
        puts = "; ".join(_via(e, fn, s_node) for _, (_, fn, e), _ in items)
        reads = "; ".join(_via(e, fn, d_node) for _, _, (_, fn, e) in items)
        s_edge, d_edge = items[0][1][2], items[0][2][2]
        p.extra.append((s_node, node_id, {**s_edge, "kind": "produces", "carrier": None,
                                          "note": puts}, node))
        p.extra.append((node_id, d_node, {**d_edge, "kind": "consumes", "carrier": None,
                                          "note": reads}, node))


def _via(e: dict, fn: str, drawn: str) -> str:
    """An edge note naming the function that really fills or reads, when the
    edge starts or ends at one of its callers."""
    note = str(e.get("carrier") or "")
    if fn == drawn:
        return note
    return f"{note} (in {fn.rpartition('.')[0].rpartition('.')[2]}.{fn.rpartition('.')[2]}, " \
           f"line {e.get('line')})"


def _sibling(g: nx.MultiDiGraph, cls: str, owned: set[str]) -> bool:
    """``cls`` is a sibling of a class the connector constructs (it shares a
    base with it but is neither it nor one of its bases): its objects, and
    the state on them, belong to another connector (the Push worker's
    ``_recv_failures`` in the Pull connector's story)."""
    mros = g.graph.get("mro", {})
    if not owned or cls in owned or cls not in mros:
        return False
    if any(cls in mros.get(o, ()) for o in owned):
        return False
    bases = set(mros[cls][1:]) & set(mros)  # analysed bases: ``object`` is shared by all
    return any(bases & set(mros.get(o, ())[1:]) for o in owned)


def _owned_classes(g: nx.MultiDiGraph, chosen: set[str]) -> set[str]:
    """Classes the chosen connectors construct in their own methods (NIXL's
    Pull connector builds a ``NixlPullConnectorScheduler``, never the Push one)."""
    mros = g.graph.get("mro", {})
    mine = {c for cls in chosen for c in mros.get(cls, (cls,))}
    owned: set[str] = set()
    for n in g:
        if n.rpartition(".")[0] in mine:
            owned.update(v.rpartition(".")[0] for _, v, k in g.out_edges(n, data="kind")
                         if k == "call" and v.endswith(".__init__"))
    return owned


def _subclasses(g: nx.MultiDiGraph, owned: set[str]) -> dict[str, list[str]]:
    """Base class -> the subclasses a call to its method may land in: those
    the connector constructs (``owned``), or every one when none is known."""
    out: dict[str, list[str]] = {}
    for cls, mro in g.graph.get("mro", {}).items():
        if not owned or cls in owned:
            for b in mro[1:]:
                out.setdefault(b, []).append(cls)
    return out


def _reach(g: nx.MultiDiGraph, start: str, subclasses: dict[str, list[str]]) -> set[str]:
    """Functions of ``start``'s package it reaches within HANDOVER_REACH calls,
    a call to a method standing for its overrides in ``subclasses`` too
    (NIXL's connector calls ``NixlBaseConnectorScheduler.request_finished`` on
    what is a ``NixlPullConnectorScheduler``)."""
    pkg = g.nodes[start].get("package")
    seen = {start}
    frontier = [start]
    for _ in range(HANDOVER_REACH):
        called = [v for n in frontier for _, v, k in g.out_edges(n, data="kind") if k == "call"]
        called += [f"{sub}.{name}" for v in called for owner, _, name in [v.rpartition(".")]
                   for sub in subclasses.get(owner, ())]
        frontier = sorted({v for v in called if v in g and v not in seen
                           and g.nodes[v].get("package") == pkg
                           and g.nodes[v].get("kind") == "function"})
        seen.update(frontier)
    return seen


def _place_states(g: nx.MultiDiGraph, p: _Placement, i: int, st: Stage) -> None:
    """States the stage names that a drawn function sets (what only reads a
    state says little about the request's way)."""
    for n in list(p.at):
        for _, s, kind in g.out_edges(n, data="kind"):
            if kind == "sets_state" and g.nodes[s].get("kind") == "state" and \
                    any(fnmatch.fnmatchcase(s.rpartition(".")[2], pat) for pat in st.states):
                p.place(s, i, p.at[n][1] + 1 if p.at[n][0] == i else 2)


def _place_callers(g: nx.MultiDiGraph, p: _Placement, view: View, base: str) -> None:
    """A stage function nothing drawn calls or feeds gets its vLLM callers
    (``_handle_failed_recving`` is called from ``update_from_output``): no
    node floats alone."""
    listed = {f for st in view.stages for f in st.functions}
    for n, (i, col) in sorted(p.at.items()):
        if n not in listed or any(
                u in p.at for u in g.predecessors(n) if u != n):
            continue
        for u in sorted(set(g.predecessors(n))):
            if g.nodes[u].get("kind") == "function" and not select.connector_method(g, u, base) and \
                    any(d.get("kind") == "call" for d in g[u][n].values()):
                p.place(u, i, col - 1)


def _build(g: nx.MultiDiGraph, p: _Placement, view: View, chosen: set[str],
           carriers: set[str]) -> nx.MultiDiGraph:
    keep = {n for n in p.at if n in g}
    # a pair drawn through a hook is one edge (vLLM's caller -> the base
    # default it calls, which is also the hook of a stage)
    edges = {e for e in p.edges if e[0] in keep and e[1] in keep and (e[0], e[1]) not in p.via}
    for u, v, k, d in g.edges(keys=True, data=True):
        if u not in keep or v not in keep or (u, v) in p.via:
            continue
        kind = d.get("kind")
        if kind == "bridge" and str(d.get("carrier", "")).rpartition(".")[2] in carriers \
                or kind == "sets_state" \
                or kind == "call" and not d.get("ref") and _same_story(p, u, v):
            edges.add((u, v, k))
    out = select.subgraph(g, keep, edges)
    for u, v, attrs, node in p.extra:
        c = v if u in g else u
        out.add_node(c, **{**node, "kind": "field"})
        out.add_edge(u, v, key=f"state:{attrs.get('line')}", **attrs)
    for u, v, k in out.edges(keys=True):
        if p.at[u] > p.at[v]:
            # a call back to an earlier stage (a delegate two stages share):
            # drawn, but it must not pull the columns out of order
            out.edges[u, v, k]["constraint"] = False
    for (u, v), (hook, ds) in sorted(p.via.items()):
        if u in keep and v in keep:
            first = min(ds, key=lambda d: (str(d.get("file", "")), int(d.get("line") or 0)))
            out.add_edge(u, v, key=f"via:{hook}", kind="call", via=hook,
                         **{a: first[a] for a in ("file", "line", "root") if a in first})
    for (u, v), (named, ds) in sorted(p.through.items()):
        if u in keep and v in keep and ds:
            first = min(ds, key=lambda d: (str(d.get("file", "")), int(d.get("line") or 0)))
            out.add_edge(u, v, key=f"through:{named}", kind="call", through=named,
                         **{a: first[a] for a in ("file", "line", "root") if a in first})
    stages = []
    for i, st in enumerate(view.stages):
        mine = sorted(n for n, (si, _) in p.at.items() if si == i)
        # the hooks and the stage's own functions share the stage's column;
        # the rest is placed by its edges (same-rank edges across lanes are
        # what Graphviz's dot cannot draw)
        anchors = [n for n in mine if p.at[n][1] == 2 and g.nodes[n].get("kind") != "state"]
        offsets = {n: p.at[n][1] - 2 for n in mine if n not in anchors}
        stages.append({"label": st.label, "anchors": anchors, "offsets": offsets})
    # lanes: inside each process, vLLM and the connector (vLLM's own
    # connectors live in the vllm package too)
    lane = "connector " + ", ".join(sorted(c.rpartition(".")[2] for c in chosen))
    drawn_for = {o for _, o in p.through}
    for n, d in out.nodes(data=True):
        if n in drawn_for:  # the connector's own subclass runs it
            d["connectors"] = sorted(chosen)
        if chosen & set(d.get("connectors") or ()):
            d["package"] = lane
    out.graph["stages"] = stages
    out.graph["connectors"] = sorted(chosen)
    out.graph["view"] = view.name
    return out


def _same_story(p: _Placement, u: str, v: str) -> bool:
    """A call between two drawn nodes that keeps left to right (or within a
    stage): a call back to an earlier stage would only tangle the picture."""
    return p.at[u] <= p.at[v]
