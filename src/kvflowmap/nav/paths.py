"""``kvflowmap path A B``: how control or data gets from A to B.

Paths follow edge direction over calls, dispatch and bridges, and over the
data steps the graph models (a function produces a field that another
consumes; sets a state that another reads). They are listed shortest first;
ties in order of node ids. Each step shows the edge that makes it (its kind,
file and line; control edges are preferred over data edges when a pair has
both). When there is no path, :class:`NoPath` says what A does reach.

A step ``X --produces via its return value--> F`` (``graph.returnflow``)
says that what X returns ends up in carrier F when X is called on vLLM's
way to F. A path that reaches X by a call from W hands X's return value to
W, so the step is taken only when W stores F itself or hands its own return
value on to F in the same way (the runner's call of ``get_transfer_results``
does; NIXL's legacy ``get_finished`` wrapper, which calls the worker's
``get_transfer_results`` and that nobody in vLLM calls, does not). A
dispatch from a base method to an override keeps the caller of the base
method; any other step (a bridge, a data step) starts afresh.

A path that starts at a helper whose return value its caller returns on to
vLLM (a connector's scheduler half building the metadata its facade hands
back) begins with ``A --return--> C``: the value goes up to C, and C's own
steps (the bridge of the facade) carry it on.
"""

from __future__ import annotations

import difflib
import itertools
import json
from collections import deque
from dataclasses import asdict, dataclass, replace
from typing import Literal

import networkx as nx

from kvflowmap.graph import select
from kvflowmap.nav.where import lookup

CONTROL_KINDS = ("call", "dispatch", "bridge")
DATA_KINDS = ("produces", "consumes", "sets_state", "reads_state")
ALL_KINDS = CONTROL_KINDS + DATA_KINDS
_SRC, _DST = "\0source", "\0target"  # virtual ends: one search for many matches
_EXTRA_TIES = 50  # paths looked at beyond --max so that ties sort by name
_MAX_TRIED = 500  # candidate paths looked at in all (some repeat a node)


@dataclass(frozen=True)
class Step:
    """One edge of a path; ``lines`` holds every line of that kind when the
    pair is linked at several places (``line`` is the first)."""

    src: str
    dst: str
    kind: str
    file: str
    line: int
    root: str
    note: str = ""
    lines: tuple[int, ...] = ()
    # a ``produces via its return value`` step: the functions the value is
    # returned through and the one that stores it, as (function, file, line)
    # of each return and of the store (the last)
    up: tuple[tuple[str, str, int], ...] = ()


@dataclass(frozen=True)
class PathResult:
    """Paths from the nodes matching ``src`` to those matching ``dst``."""

    src: str
    dst: str
    paths: tuple[tuple[Step, ...], ...]


@dataclass(frozen=True)
class NoPath:
    """No path: what A reaches that looks like B, and what leads into B."""

    src: str
    dst: str
    reachable: int
    nearest: tuple[tuple[str, int], ...]  # (node, hops from A), most B-like first
    into_dst: tuple[str, ...]  # direct predecessors of B
    reverse: bool  # a path exists from B to A
    # paths exist only through a dispatch into a sibling class of A's or B's
    # (another connector object): left out as impossible
    switched: bool = False
    # paths exist only through a return value handed to a caller that does
    # not pass it on to the field (see the module docstring): left out
    returned: bool = False
    # paths exist only through a base method the object on the path overrides
    # (see ``_overridden_on_the_way``), or through the objects of two
    # connectors (see ``Families``): left out
    overridden: bool = False
    crossed: bool = False


def find_paths(g: nx.MultiDiGraph, a: str, b: str, max_paths: int = 5,
               kinds: tuple[str, ...] = ALL_KINDS) -> PathResult | NoPath:
    """Up to ``max_paths`` simple paths from ``a`` to ``b`` over ``kinds``;
    names resolve as in ``where`` (every match of an ambiguous name counts).
    A ``NoPath`` says a path exists the other way only when the same search,
    with the same rules, finds one from ``b`` to ``a``."""
    result = _find_paths(g, a, b, max_paths, kinds)
    if isinstance(result, NoPath) and "produces" in kinds:
        result = _through_callers(g, a, b, max_paths, kinds) or result
    if isinstance(result, NoPath) and result.reverse:
        back = _find_paths(g, b, a, 1, kinds)
        result = replace(result, reverse=isinstance(back, PathResult))
    return result


def _through_callers(g: nx.MultiDiGraph, a: str, b: str, max_paths: int,
                     kinds: tuple[str, ...], depth: int = 2) -> PathResult | None:
    """Paths that start by handing A's return value up to a caller that
    returns it on (``OffloadingConnectorScheduler.build_connector_meta``,
    whose metadata the connector's own ``build_connector_meta`` returns to
    vLLM): a step ``A --return--> C`` (at C's call of A) for each caller C that calls A and
    produces, by its return value, a field A's return value produces too,
    then C's paths to B (``depth`` callers up)."""
    found: list[tuple[Step, ...]] = []
    for src in lookup(g, a):
        fields = _returned_fields(g, src)
        for caller, _, d in sorted(g.in_edges(src, data=True), key=lambda e: (e[0], str(e[2]))):
            if d.get("kind") != "call" or not fields & _returned_fields(g, caller):
                continue
            up = Step(src, caller, "return", str(d.get("file") or ""),
                      int(d.get("line") or 0), str(d.get("root") or ""))
            rest = _find_paths(g, caller, b, max_paths, kinds)
            if isinstance(rest, NoPath) and depth > 1:
                rest = _through_callers(g, caller, b, max_paths, kinds, depth - 1) or rest
            if isinstance(rest, PathResult):
                found += [(up, *p) for p in rest.paths if src not in {s.dst for s in p}]
    if not found:
        return None
    found.sort(key=lambda p: (len(p), [s.dst for s in p]))
    return PathResult(a, b, tuple(dict.fromkeys(found))[:max_paths])


def _returned_fields(g: nx.MultiDiGraph, fqn: str) -> set[str]:
    """The fields ``fqn``'s return value ends up in (``graph.returnflow``)."""
    return {v for _, v, d in g.out_edges(fqn, data=True)
            if d.get("kind") == "produces" and d.get("via") == "return"} if fqn in g else set()


def _find_paths(g: nx.MultiDiGraph, a: str, b: str, max_paths: int,
                kinds: tuple[str, ...]) -> PathResult | NoPath:
    sources, targets = lookup(g, a), lookup(g, b)
    targets = [t for t in targets if t not in sources]  # a node is no path to itself
    if not targets:
        raise select.SelectError(f"{a!r} and {b!r} name the same node(s)")
    simple = _simple(g, kinds)
    simple.add_edges_from((_SRC, s) for s in sources)
    simple.add_edges_from((t, _DST) for t in targets)
    switches = _switches(g, simple, sources + targets)
    if not nx.has_path(simple, _SRC, _DST):
        return _no_path(simple, a, b, sources, targets)
    simple.remove_edges_from(switches)
    if not nx.has_path(simple, _SRC, _DST):
        return _no_path(simple, a, b, sources, targets, switched=True)
    found: list[list[str]] = []
    # per path, the lines of the calls each step into a gated helper took (two
    # return contexts can give the same nodes through two calls: one path)
    taken: dict[tuple[str, ...], list[set[int | None]]] = {}
    overridden = crossed = False
    families = Families(g)
    # a question about a class's inherited method is about that class's objects
    asked = families.asked(a, sources) or families.asked(b, targets)
    expanded = _ReturnContexts(g, simple, kinds).graph(sources, targets)
    if _DST in expanded and nx.has_path(expanded, _SRC, _DST):
        for tried, p in enumerate(nx.shortest_simple_paths(expanded, _SRC, _DST)):
            # ``p`` has the virtual ends; those found do not
            if (len(found) >= max_paths and (len(p) - 2 > len(found[max_paths - 1])
                                             or len(found) >= max_paths + _EXTRA_TIES)) \
                    or tried >= _MAX_TRIED:
                break
            nodes = [n for n, _ in p[1:-1]]
            if len(set(nodes)) != len(nodes):
                continue  # a node twice: not a simple path
            if _overridden_on_the_way(g, nodes):
                overridden = True
                continue
            if not families.together(nodes, asked):
                crossed = True
                continue
            lines = [_call_line(live) for _, live in p[1:-1]]
            if tuple(nodes) in taken:
                for seen, line in zip(taken[tuple(nodes)], lines, strict=True):
                    seen.add(line)
                continue
            found.append(nodes)
            taken[tuple(nodes)] = [{line} for line in lines]
    if not found:
        return _no_path(simple, a, b, sources, targets, expanded=expanded,
                        overridden=overridden, crossed=crossed)
    found.sort(key=lambda p: (len(p), p))
    paths = tuple(tuple(_step(g, u, v, kinds, _calls_taken(lines), p[i - 1] if i else None)
                        for i, (u, v, lines) in enumerate(zip(p, p[1:], taken[tuple(p)][1:],
                                                              strict=False)))
                  for p in found[:max_paths])
    return PathResult(a, b, paths)


def _overridden_on_the_way(g: nx.MultiDiGraph, nodes: list[str]) -> bool:
    """The path runs a base method ``B.m`` on its own object, calls a method
    there and dispatches to the override in a class ``K`` that overrides
    ``m`` itself (without calling the base's): on a ``K`` object ``B.m``
    never runs, so that dispatch cannot follow it. Nor can a dispatch follow
    an override's ``super()`` call (``_super_call``), or a data step into the
    base method (its own body read the value: it is running, not being
    dispatched away from). vLLM's default
    ``get_transfer_results`` calls ``get_finished``; NIXL overrides the
    former, so no NIXL ``get_finished`` is reached that way."""
    mro: dict[str, tuple[str, ...]] = g.graph.get("mro", {})
    for x, y, z in zip(nodes, nodes[1:], nodes[2:], strict=False):
        if _kinds(g, y, z) == {"dispatch"} and not _kinds(g, x, y) & set(CONTROL_KINDS):
            # ``y`` reads the value in its own body (a data step): it runs,
            # it is not a name a call dispatches from
            return True
        if "call" not in _kinds(g, x, y) or "dispatch" not in _kinds(g, y, z):
            continue
        if _super_call(mro, x, y):
            return True
        base, _, name = x.rpartition(".")
        cls = z.rpartition(".")[0]
        if base not in mro.get(cls, ()) or base == cls:
            continue
        runs = _first_in_mro(g, mro, cls, name) or x
        if runs != x and not _calls(g, runs, x):
            return True
    return False


class Families:
    """Which connector each analysed class can run for. A connector class (one
    deriving from the protocol's base) and the classes its code constructs,
    transitively (``self.connector_worker = NixlPullConnectorWorker(...)``),
    are one family; a class serves every connector whose family holds it or
    a subclass of it. A path through classes no one connector serves joins
    two objects that never meet at run time: vLLM's NIXL pull connector
    builds the pull scheduler and the pull worker, the push connector the
    push ones, so the pull scheduler's metadata never reaches the push
    worker. A method serves only the connectors whose objects run it: the
    base's default ``get_transfer_results`` serves no connector that
    overrides it. Classes no connector constructs (vLLM's scheduler, a
    metadata class both build) constrain nothing."""

    def __init__(self, g: nx.MultiDiGraph) -> None:
        self.g = g
        self.mro: dict[str, tuple[str, ...]] = g.graph.get("mro", {})
        self.family: dict[str, set[str]] = {}  # connector -> the classes it constructs
        self._cache: dict[str, set[str] | None] = {}
        base = g.graph.get("connector_base")
        methods: dict[str, list[str]] = {}
        for n, kind in g.nodes(data="kind"):
            owner = n.rpartition(".")[0]
            if kind == "function" and owner in self.mro:
                methods.setdefault(owner, []).append(n)
        self.serves: dict[str, set[str]] = {}  # class -> connectors it serves
        for c in sorted(k for k, m in self.mro.items() if base and base in m[1:]):
            family, todo = {c}, [c]
            while todo:
                member = todo.pop()
                for k in self.mro.get(member, ()):
                    for f in methods.get(k, ()):
                        for _, v, kind in g.out_edges(f, data="kind"):
                            built = v.rpartition(".")[0]
                            # (``super().__init__()`` builds no new object)
                            if kind == "call" and v.endswith(".__init__") and \
                                    built in self.mro and built not in self.mro[member] and \
                                    built not in family:
                                family.add(built)
                                todo.append(built)
            self.family[c] = family
            for member in family:
                for k in self.mro[member]:
                    self.serves.setdefault(k, set()).add(c)

    def asked(self, name: str, nodes: list[str]) -> set[str] | None:
        """The connectors the class a question names serves, when the name
        (``NixlPullConnectorWorker.get_finished``) resolved to ``nodes``
        inherited from a base (``NixlBaseConnectorWorker.get_finished``): a
        path from there runs on that class's objects only. None when the name
        names no class, or the nodes are its own."""
        cls_part = name.rpartition(".")[0]
        if not cls_part:
            return None
        classes = [c for c in self.mro if c == cls_part or c.endswith("." + cls_part)]
        if not classes or all(self._class_of(n) in classes for n in nodes):
            return None
        served = set().union(*(self.serves.get(c, set()) for c in classes))
        return served or None

    def together(self, nodes: list[str], start: set[str] | None = None) -> bool:
        """Some one connector (of ``start`` when given) is served by every
        class on the path that serves any."""
        common: set[str] | None = set(start) if start else None
        for i, n in enumerate(nodes):
            if i + 1 < len(nodes) and "dispatch" in _kinds(self.g, n, nodes[i + 1]):
                continue  # the base method a call names, on its way to the override
            mine = self._served(n)
            if mine:
                common = set(mine) if common is None else common & mine
                if not common:
                    return False
        return True

    def _served(self, node: str) -> set[str] | None:
        """The connectors ``node`` runs for: its class's, and for a method
        only those whose objects resolve the method to this very one (the
        base's default ``get_transfer_results`` does not run for a
        connector that overrides it)."""
        if node in self._cache:
            return self._cache[node]
        cls = self._class_of(node)
        mine = self.serves.get(cls) if cls else None
        if mine and cls:
            name = node[len(cls) + 1:].partition(".")[0]
            method = f"{cls}.{name}"
            if self.g.nodes.get(method, {}).get("kind") == "function":
                mine = {c for c in mine if any(
                    cls in self.mro[w] and self._runs(w, name, method) for w in self.family[c])}
        self._cache[node] = mine
        return mine

    def _runs(self, cls: str, name: str, method: str) -> bool:
        """An object of ``cls`` runs ``method`` for ``name``: its MRO's first
        ``name`` is that method, or calls it (``super().name()``)."""
        first = _first_in_mro(self.g, self.mro, cls, name)
        return first == method or (first is not None and _calls(self.g, first, method))

    def _class_of(self, node: str) -> str | None:
        """The class a method, a nested function or an attribute node is of."""
        head = node.rpartition(".")[0]
        while head and head not in self.mro:
            head = head.rpartition(".")[0]
        return head or None


def _super_call(mro: dict[str, tuple[str, ...]], x: str, y: str) -> bool:
    """``x`` (``K.m``) calls ``y``, the same method of a base of ``K``
    (``super().m()``): the object is a ``K``, whose ``m`` is ``x`` itself, so
    ``y`` dispatches nowhere from there (vLLM 0.34's NIXL push scheduler's
    ``build_connector_meta`` calls the base's, which does not come back down
    to the push or pull override)."""
    (kx, _, mx), (ky, _, my) = x.rpartition("."), y.rpartition(".")
    return mx == my and kx != ky and ky in mro.get(kx, ())


def _first_in_mro(g: nx.MultiDiGraph, mro: dict[str, tuple[str, ...]], cls: str,
                  name: str) -> str | None:
    """The method ``name`` an object of ``cls`` runs: the first of its MRO."""
    return next((f"{k}.{name}" for k in mro.get(cls, ())
                 if g.nodes.get(f"{k}.{name}", {}).get("kind") == "function"), None)


def _kinds(g: nx.MultiDiGraph, u: str, v: str) -> set[str]:
    return {d.get("kind") for d in g[u][v].values()} if g.has_edge(u, v) else set()


def _calls(g: nx.MultiDiGraph, u: str, v: str, depth: int = 3) -> bool:
    """``u`` reaches ``v`` over calls within ``depth`` (``super().m()``)."""
    todo, seen = [(u, 0)], {u}
    while todo:
        n, d = todo.pop()
        for _, w, k in g.out_edges(n, data="kind"):
            if k != "call" or w in seen:
                continue
            if w == v:
                return True
            if d + 1 < depth:
                seen.add(w)
                todo.append((w, d + 1))
    return False


def _switches(g: nx.MultiDiGraph, simple: nx.DiGraph, ends: list[str]) -> list[tuple[str, str]]:
    """Dispatch edges into a class unrelated to the class of an end of the
    query below the same base. A path from ``DecodeBenchConnector``'s
    metadata to ``NixlPullConnector.start_load_kv`` through the base's
    ``start_load_kv`` switches objects on the way: at run time one connector
    object builds and loads, so such a path does not exist."""
    mro: dict[str, tuple[str, ...]] = g.graph.get("mro", {})
    mine = [m for m in (mro.get(e.rpartition(".")[0]) for e in ends) if m]
    out = []
    for u, v in simple.edges():
        base, cls = u.rpartition(".")[0], v.rpartition(".")[0]
        if cls not in mro or base == cls or base not in mro[cls]:
            continue
        if not any(g[u][v][k].get("kind") == "dispatch" for k in g[u][v]):
            continue
        if any(base in m and m[0] != base and m[0] not in mro[cls] and cls not in m
               for m in mine):
            out.append((u, v))
    return out


# What a node of the path remembers of the way the path came: for a function,
# the carrier fields its return value may still reach (None: any), or the
# field it was entered reading when it passes that field on; for a field or
# state, the function that wrote it on the path (or None).
Live = frozenset[str] | str | None
State = tuple[str, Live]
# a ``Live`` of a helper entered by a call: ``_CALLED + caller``, and, for a
# helper whose writes are gated on a parameter, ``+ "\0" + line`` of the call
_CALLED = "\0called:"


class _ReturnContexts:
    """The path graph with each node paired with its ``Live`` (see the
    module docstring): a ``produces via its return value`` step into a field
    the function's return value does not reach on the way the path came is
    not taken. Only the functions whose return value may end up in such a
    step through calls and dispatch tell their ways apart; every other node
    is one node, as in the plain graph."""

    def __init__(self, g: nx.MultiDiGraph, simple: nx.DiGraph, kinds: tuple[str, ...]) -> None:
        self.g, self.simple, self.kinds = g, simple, kinds
        self.returns: dict[str, set[str]] = {}  # function -> fields its return value fills
        self.stores: dict[str, set[str]] = {}  # function -> fields it fills otherwise
        if "produces" in kinds:
            for u, v, d in g.edges(data=True):
                if d.get("kind") == "produces":
                    into = self.returns if d.get("via") == "return" else self.stores
                    into.setdefault(u, set()).add(v)
                elif d.get("kind") == "sets_state":
                    # the writer of a state whose test reads a callee's
                    # return value (``graph.returnstates``) takes that value
                    self.stores.setdefault(u, set()).add(v)
        self.fields = frozenset(f for fs in self.returns.values() for f in fs)
        # function -> field -> the attributes that field is written as a copy
        # of (``meta.push_registrations = dict(self._pending_registrations)``)
        self.copied: dict[str, dict[str, set[str]]] = {}
        # function -> state field -> the names the writing statements depend on
        self.deps: dict[str, dict[str, set[str]]] = {}
        # function -> callee (or state it sets) -> the names the calling
        # (setting) statements depend on
        self.call_deps: dict[str, dict[str, set[str]]] = {}
        # function -> callee -> the locals the calls' results are bound to
        self.binds: dict[str, dict[str, set[str]]] = {}
        # helper -> field -> the callers that hand the helper that container
        self.fillers: dict[str, dict[str, set[str]]] = {}
        for u, v, d in g.edges(data=True):
            if d.get("kind") == "produces" and d.get("copied"):
                self.copied.setdefault(u, {}).setdefault(v, set()).update(d["copied"])
            if d.get("kind") == "produces" and d.get("deps"):
                self.deps.setdefault(u, {}).setdefault(v, set()).update(d["deps"])
            if d.get("kind") in ("call", "sets_state") and d.get("deps"):
                self.call_deps.setdefault(u, {}).setdefault(v, set()).update(d["deps"])
            if d.get("kind") == "call" and d.get("binds"):
                self.binds.setdefault(u, {}).setdefault(v, set()).update(d["binds"])
            if d.get("kind") == "produces" and d.get("fillers"):
                self.fillers.setdefault(u, {}).setdefault(v, set()).update(d["fillers"])
        # helper -> field -> the parameters (and their truth) its write runs under
        self.gates: dict[str, dict[str, tuple[tuple[str, bool], ...]]] = {}
        # (caller, helper) -> call line -> (the truth of the literals it passes
        # to the gating parameters, the names the calling statement depends on)
        self.calls_of: dict[tuple[str, str], dict[int, tuple[dict[str, bool], set[str]]]] = {}
        for u, v, d in g.edges(data=True):
            if d.get("kind") == "produces" and d.get("gates"):
                self.gates.setdefault(u, {})[v] = tuple(d["gates"])
        for u, v, d in g.edges(data=True):
            if d.get("kind") == "call" and v in self.gates and not d.get("ref"):
                self.calls_of.setdefault((u, v), {})[int(d.get("line") or 0)] = (
                    dict(d.get("literals") or ()), set(d.get("deps") or ()))
        # function -> the fields it both reads and writes (vLLM's aggregator
        # copies each worker's ``invalid_block_ids`` into the merged output's):
        # what it read of one it passes on into the same one
        self.passes: dict[str, set[str]] = {}
        if {"produces", "consumes"} <= set(kinds):
            read: dict[str, set[str]] = {}
            for u, v, d in g.edges(data=True):
                if d.get("kind") == "consumes":
                    read.setdefault(v, set()).add(u)
            for f in sorted(set(self.returns) | set(self.stores)):
                both = read.get(f, set()) & (self.returns.get(f, set()) | self.stores.get(f, set()))
                if both:
                    self.passes[f] = both
        self.relevant: set[str] = set()
        todo = list(self.returns)
        while todo:
            n = todo.pop()
            if n not in self.relevant:
                self.relevant.add(n)
                todo += [u for u, _, k in g.in_edges(n, data="kind")
                         if k in ("call", "dispatch") and k in kinds]

    def graph(self, sources: list[str], targets: list[str]) -> nx.DiGraph:
        """The expanded graph from the virtual source to the virtual target:
        nodes are ``State``s, the ends ``_SRC`` and ``_DST``."""
        starts: list[State] = [(s, None) for s in sources]
        inner: list[tuple[State, State]] = []
        ends: list[State] = []
        seen = set(starts)
        queue = deque(starts)
        while queue:
            node = queue.popleft()
            u, live = node
            if u in targets:
                ends.append(node)
            for v in self.simple.successors(u):
                if v == _DST or (isinstance(live, str) and v == live):
                    continue  # (back into the function that wrote the field: a cycle)
                nxt = self._step(u, v, live)
                if nxt is False:
                    continue
                for state in self._by_call(u, v, live, nxt):
                    inner.append((node, state))
                    if state not in seen:
                        seen.add(state)
                        queue.append(state)
        # in the order ``find_paths`` builds the plain graph (sorted, then the
        # virtual ends as the names matched): the path search meets the same
        # nodes in the same order
        out = nx.DiGraph()
        out.add_nodes_from(sorted(seen, key=_order))
        out.add_edges_from(sorted(inner, key=lambda e: (_order(e[0]), _order(e[1]))))
        out.add_edges_from((_SRC, n) for n in starts)
        out.add_edges_from((n, _DST) for n in sorted(
            ends, key=lambda n: (targets.index(n[0]), _order(n))))
        return out

    def _by_call(self, u: str, v: str, live: Live, nxt: Live) -> list[State]:
        """The states of ``v`` the step ``u -> v`` makes: one per call of a
        helper with gated writes (each call passes its own literals, and
        depends on its own names), else one."""
        calls = self.calls_of.get((u, v))
        if not calls or nxt != _CALLED + u:
            return [(v, nxt)]
        field = live.rpartition(".")[2] if isinstance(live, str) and \
            not live.startswith(_CALLED) else None
        return [(v, f"{nxt}\0{line}") for line, (_, deps) in sorted(calls.items())
                if field is None or not deps or field in deps]

    def _step(self, u: str, v: str, live: Live) -> Live | Literal[False]:
        """The ``Live`` of ``v`` when the path steps ``u -> v`` with ``u``'s
        ``live``; False when the step is not taken."""
        edges = [d for d in self.g[u][v].values() if d.get("kind") in self.kinds]
        kinds = {d.get("kind") for d in edges}
        if isinstance(live, str) and live.startswith(_CALLED):
            caller, _, at = live[len(_CALLED):].partition("\0")
            if "produces" in kinds and v in self.fillers.get(u, {}) and \
                    caller not in self.fillers[u][v]:
                return False  # this caller hands the helper another container, or none
            if "produces" in kinds and at and v in self.gates.get(u, {}):
                passed = self.calls_of.get((caller, u), {}).get(int(at), ({}, set()))[0]
                if any(p in passed and passed[p] != want for p, want in self.gates[u][v]):
                    return False  # this call passes a literal that skips the write
            live = None
        if isinstance(live, str) and "produces" in kinds and v != live and \
                live in self.passes.get(u, ()) and v in self.passes.get(u, ()):
            return False  # what it read of one field it writes into that field only
        if isinstance(live, str) and "produces" in kinds and v in self.copied.get(u, {}) and \
                live.rpartition(".")[2] not in self.copied[u][v]:
            return False  # a copy of another attribute than the one the path read
        if isinstance(live, str) and "produces" in kinds and v in self.deps.get(u, {}) and \
                live.rpartition(".")[2] not in self.deps[u][v]:
            return False  # the write does not depend on the field the path read
        if isinstance(live, str) and kinds in ({"call"}, {"sets_state"}) and \
                v in self.call_deps.get(u, {}) and \
                live.rpartition(".")[2] not in self.call_deps[u][v]:
            return False  # the call (or state write) does not depend on the field read
        if kinds == {"consumes"} and (u in self.passes.get(v, ()) or v in self.copied
                                      or v in self.deps or v in self.call_deps):
            # entered reading a field it passes on, copies, writes from, or
            # hands to the calls that depend on it
            return u
        if (v in self.fillers or v in self.gates) and \
                self.g.nodes[v].get("kind") == "function" and \
                any(d.get("kind") == "call" for d in edges) and v not in self.relevant:
            # entered from this caller: fills only what it hands over, and
            # writes only what the literals it passes let run
            return _CALLED + u
        if not self.fields:
            return None
        if self.g.nodes[v].get("kind") != "function":
            if v in self.fields and kinds == {"produces"} and \
                    all(d.get("via") == "return" for d in edges) and \
                    isinstance(live, frozenset) and v not in live:
                return False
            # a field or state remembers who wrote it: no path goes back into
            # the writer with its return value free again
            return u if u in self.relevant else None
        if v not in self.relevant:
            return None
        if "dispatch" in kinds:
            # the override returns to the base method's caller
            return live if isinstance(live, frozenset) else None
        if any(d.get("kind") == "call" and not d.get("ref") for d in edges):
            mine = self._through_result(u, v)
            reach = (mine & live if isinstance(live, frozenset) else mine) | \
                (self.stores.get(u, set()) & self.fields)
            return None if reach >= self.fields else frozenset(reach)
        return None

    def _through_result(self, u: str, v: str) -> set[str]:
        """The fields ``u``'s return value fills that the result of its call
        of ``v`` can reach: those whose returned value depends on a local
        the result is bound to (all of them when that is not known)."""
        mine = self.returns.get(u, set())
        binds = self.binds.get(u, {}).get(v)
        if not binds:
            return mine
        deps = self.deps.get(u, {})
        return {f for f in mine if f not in deps or binds & deps[f]}


def _order(node: State) -> tuple:
    """Sort key of an expanded node: by the node, then its ``Live`` (None first)."""
    n, live = node
    if live is None:
        return (n, ())
    return (n, (2, live) if isinstance(live, str) else (1, *sorted(live)))


def _simple(g: nx.MultiDiGraph, kinds: tuple[str, ...]) -> nx.DiGraph:
    """A DiGraph of the chosen edge kinds, built in sorted order so that the
    path search (and its tie order) is deterministic."""
    simple = nx.DiGraph()
    simple.add_nodes_from((n, {"kind": g.nodes[n].get("kind")}) for n in sorted(g))
    simple.add_edges_from(sorted({(u, v) for u, v, k in g.edges(data="kind") if k in kinds}))
    return simple


def _call_line(live: Live) -> int | None:
    """The line of the call a ``Live`` of a gated helper was entered by."""
    if isinstance(live, str) and live.startswith(_CALLED) and "\0" in live[len(_CALLED):]:
        return int(live.rpartition("\0")[2])
    return None


def _calls_taken(lines: set[int | None]) -> frozenset[int] | None:
    """The call lines a step may show; None when some path took it freely."""
    return None if None in lines else frozenset(x for x in lines if x is not None)


def _step(g: nx.MultiDiGraph, u: str, v: str, kinds: tuple[str, ...],
          call_lines: frozenset[int] | None = None, came_from: str | None = None) -> Step:
    """The step ``u -> v``; ``call_lines``: the calls the path took, when it
    matters (a helper whose writes depend on the literals a call passes);
    ``came_from``: the node before ``u``, whose call the return value of a
    ``produces via its return value`` step goes back to first."""
    edges = [d for d in g[u][v].values() if d.get("kind") in kinds]
    if call_lines is not None:
        edges = [d for d in edges if d.get("kind") != "call"
                 or int(d.get("line") or 0) in call_lines] or edges
    edges.sort(key=lambda d: (ALL_KINDS.index(d["kind"]), int(d.get("line") or 0)))
    first = edges[0]
    same = sorted({int(d.get("line") or 0) for d in edges if d["kind"] == first["kind"]})
    note = str(first.get("carrier") or ("its return value" if first.get("via") == "return"
                                        else ""))
    if first.get("test"):  # ``graph.returnstates``: the test that chooses the state
        note += f", tested `{first['test']}` in {str(first.get('tester')).rpartition('.')[2]}" \
            f" (line {first.get('test_line')})"
    ways = [tuple((str(f), str(file), int(line)) for f, file, line in way)
            for way in first.get("up") or ()]
    # the way back through the caller the path came from, else the one that
    # skips no override on the way (then the shortest)
    ways.sort(key=lambda w: (_skipped_overrides(g, u, w), len(w)))
    up = next((w for w in ways if came_from and w[0][0] == came_from), ways[0] if ways else ())
    return Step(u, v, str(first["kind"]), str(first.get("file") or ""),
                int(first.get("line") or 0), str(first.get("root") or ""), note,
                tuple(same) if len(same) > 1 else (), up)


def _skipped_overrides(g: nx.MultiDiGraph, start: str,
                       way: tuple[tuple[str, str, int], ...]) -> int:
    """Hops of ``way`` (after ``start``) from a method of class A to a base
    class's method that A (or a class between them) overrides: for an A
    object the override runs there, reaching the base one through
    ``super()``, so the way skips it. vLLM 0.34.0's offloading connector
    returns through its own ``get_transfer_results``, not straight through
    the base one."""
    mro: dict[str, tuple[str, ...]] = g.graph.get("mro", {})
    skipped = 0
    fns = [start, *(f for f, _, _ in way)]
    for i, (a, b) in enumerate(zip(fns, fns[1:], strict=False)):
        owner, _, name = b.rpartition(".")
        chain = mro.get(a.rpartition(".")[0], ())
        overrides = {f"{k}.{name}" for k in chain[:chain.index(owner)]
                     if f"{k}.{name}" in g} if owner in chain[1:] else set()
        # returning from the base method into the override that called it
        # through ``super()`` is the way, not a skip
        if overrides and (i + 2 >= len(fns) or fns[i + 2] not in overrides):
            skipped += 1
    return skipped


def _no_path(simple: nx.DiGraph, a: str, b: str, sources: list[str],
             targets: list[str], switched: bool = False,
             expanded: nx.DiGraph | None = None, overridden: bool = False,
             crossed: bool = False) -> NoPath:
    """``expanded``: the graph of return contexts the paths were looked for
    in, when only it has none (what A reaches is counted there)."""
    # Hops from A (the virtual source is one hop before it); A itself and
    # externals (leaves outside the analysed code) are not useful hints.
    reached: dict[str, int] = {}
    for n, h in nx.single_source_shortest_path_length(
            simple if expanded is None else expanded, _SRC).items():
        node = n if expanded is None or n in (_SRC, _DST) else n[0]
        # B itself, reached in a return context no path can use, is no hint
        if node not in (_SRC, _DST) and h > 1 and node not in sources and node not in targets:
            reached[node] = min(h - 1, reached.get(node, h))
    inside = {n: h for n, h in reached.items() if simple.nodes[n].get("kind") != "external"}
    want = b.rsplit(".", 1)[-1].lower()

    def likeness(n: str) -> float:
        return difflib.SequenceMatcher(None, n.rsplit(".", 1)[-1].lower(), want).ratio()

    ranked = sorted(inside or reached, key=lambda n: (-round(likeness(n), 6), reached[n], n))
    into = sorted({p for t in targets for p in simple.predecessors(t) if p != _SRC})
    back = nx.DiGraph(simple)
    back.remove_nodes_from([_SRC, _DST])
    reverse = any(nx.has_path(back, t, s) for t, s in itertools.product(targets, sources)
                  if t != s)
    return NoPath(a, b, len(reached), tuple((n, reached[n]) for n in ranked[:5]),
                  tuple(into[:8]), reverse, switched,
                  expanded is not None and not (overridden or crossed), overridden, crossed)


def paths_text(result: PathResult | NoPath) -> str:
    """Human-readable paths, or the explanation of why there is none."""
    if isinstance(result, NoPath):
        return _no_path_text(result)
    out = []
    for i, path in enumerate(result.paths, 1):
        out.append(f"path {i} ({len(path)} step{'s' if len(path) != 1 else ''}):")
        out.append(f"  {path[0].src}")
        for s in path:
            where = f"{s.file}:{s.line}" if s.file else "-"
            more = f" (also {', '.join(map(str, s.lines[1:]))})" if s.lines else ""
            if s.up:
                # the value climbs through each function's return to the store
                out.append(f"    --return--> {where}{more}")
                for k, (fn, file, line) in enumerate(s.up):
                    out.append(f"  {fn}")
                    kind = "produces" if k == len(s.up) - 1 else "return"
                    out.append(f"    --{kind}--> {file}:{line}")
                out.append(f"  {s.dst}")
                continue
            via = f" via {s.note}" if s.note else ""
            out.append(f"    --{s.kind}{via}--> {where}{more}")
            out.append(f"  {s.dst}")
    return "\n".join(out) + "\n"


def _no_path_text(r: NoPath) -> str:
    lines = [f"no path from {r.src!r} to {r.dst!r} over calls, dispatch, bridges and data "
             f"steps; {r.src!r} reaches {r.reachable} nodes."]
    if r.returned:
        lines.append("the only paths take a function's return value into the field through a "
                     "caller that does not hand it on there (a return value goes back to the "
                     "caller on the path): left out")
    if r.overridden:
        lines.append("the only paths run a base method that the object on the path "
                     "overrides (at run time the override runs instead): left out")
    if r.crossed:
        lines.append("the only paths go through the objects of two different connectors "
                     "(one connector builds its own scheduler and worker halves): left out")
    if r.nearest:
        lines.append(f"reachable from {r.src!r}, closest to {r.dst!r} by name:")
        lines += [f"  {n}  ({h} step{'s' if h != 1 else ''})" for n, h in r.nearest]
    if r.into_dst:
        lines.append(f"{r.dst!r} is entered from:")
        lines += [f"  {n}" for n in r.into_dst]
    if r.switched:
        lines.append("the only paths dispatch from a base class into a sibling of the class "
                     f"of {r.src!r} or {r.dst!r} (another object at run time): left out")
    if r.reverse:
        lines.append(f"a path exists the other way: try `kvflowmap path {r.dst} {r.src}`")
    return "\n".join(lines) + "\n"


def _step_json(s: Step) -> dict:
    """A step as JSON; ``up`` (the functions a return value climbs through,
    each ``{"function", "file", "line"}``) only on a step that has it."""
    d = asdict(s)
    d.pop("up")
    if s.up:
        d["up"] = [{"function": f, "file": file, "line": line} for f, file, line in s.up]
    return d


def paths_json(result: PathResult | NoPath) -> str:
    """Stable JSON of the paths (``{"paths": [[step, ...], ...]}``) or of the
    no-path explanation (``{"no_path": {...}}``)."""
    if isinstance(result, NoPath):
        data: dict = {"src": result.src, "dst": result.dst, "no_path": asdict(result)}
    else:
        data = {"src": result.src, "dst": result.dst,
                "paths": [[_step_json(s) for s in p] for p in result.paths]}
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
