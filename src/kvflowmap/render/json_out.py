"""JSON outputs: the full graph as networkx node-link data, and the PyCG
"simple" call-graph format (``{caller: [callees...]}``) for comparison with
PyCG and tools that read its output."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import networkx as nx


_SCALARS = frozenset({type(None), bool, int, float, str})


def _plain(value: Any) -> Any:
    """``value`` made JSON-serialisable: tuples and lists to lists, sets to
    sorted lists, mappings to dicts with string keys, other objects to str."""
    if type(value) in _SCALARS:  # most values: skip the isinstance chain
        return value
    if type(value) is dict:  # a node's or link's attributes: mostly scalars
        return {k if type(k) is str else str(k): v if type(v) in _SCALARS else _plain(v)
                for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted((_plain(v) for v in value), key=repr)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def to_node_link(g: nx.MultiDiGraph) -> dict:
    """networkx node-link data (keys ``directed``, ``multigraph``, ``graph``,
    ``nodes``, ``links``) with every attribute kept, nodes sorted by id and
    links by (source, target, kind, line, key). ``nx.node_link_graph(data,
    edges="links")`` reads it back."""
    data = nx.node_link_data(g, edges="links")
    data["nodes"].sort(key=lambda d: str(d["id"]))
    data["links"].sort(key=lambda d: (str(d["source"]), str(d["target"]), str(d.get("kind", "")),
                                      int(d.get("line") or 0), str(d.get("key", ""))))
    return _plain(data)


def _call_targets(g: nx.MultiDiGraph, n: str) -> set[str]:
    """Targets of ``n``'s call edges plus everything reachable from each of
    them by dispatch edges (a call to a base method may run any override)."""
    direct = {v for _, v, kind in g.out_edges(n, data="kind") if kind == "call"}
    found = set(direct)
    stack = sorted(direct)
    while stack:
        t = stack.pop()
        for _, o, kind in g.out_edges(t, data="kind"):
            if kind == "dispatch" and o not in found:
                found.add(o)
                stack.append(o)
    return found


def to_pycg(g: nx.MultiDiGraph) -> dict[str, list[str]]:
    """The PyCG "simple" format: every function node (module-code nodes
    included) maps to the sorted distinct targets of its ``call`` edges, plus
    the dispatch targets reachable from those. As PyCG does, every target
    (class, external such as ``<builtin>.len``) also appears as a key, with
    its own callees or ``[]``. Keys are sorted."""
    out: dict[str, list[str]] = {}
    for n, kind in g.nodes(data="kind"):
        if kind == "function":
            targets = _call_targets(g, n)
            out[n] = sorted(targets)
    for callees in list(out.values()):
        for t in callees:
            out.setdefault(t, sorted(_call_targets(g, t)))
    return dict(sorted(out.items()))
