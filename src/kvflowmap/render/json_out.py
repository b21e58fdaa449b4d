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
    """What ``n`` calls, by PyCG's conventions: targets of its ``call`` edges
    that are not references (a function only named, passed or returned is not
    called), plus everything reachable from each of them by dispatch edges (a
    call to a base method may run any override). A class target (``C()`` with
    no ``__init__`` along an analysed MRO) becomes the first external base's
    ``__init__``, or nothing."""
    direct: set[str] = set()
    for _, v, d in g.out_edges(n, data=True):
        if d.get("kind") != "call" or d.get("ref"):
            continue
        if g.nodes[v].get("kind") == "class":
            ext = next((k for k in g.graph.get("mro", {}).get(v, ())
                        if g.nodes.get(k, {}).get("kind") != "class"), None)
            if ext is None or ext.startswith("<builtin>."):
                continue
            v = f"{ext}.__init__"
        direct.add(v)
    found = set(direct)
    stack = sorted(direct)
    while stack:
        t = stack.pop()
        if t not in g:
            continue
        for _, o, kind in g.out_edges(t, data="kind"):
            if kind == "dispatch" and o not in found:
                found.add(o)
                stack.append(o)
    return found


# How PyCG's call graphs name the methods of builtin types (``<**PyStr**>.join``).
PYCG_TYPES = {"str": "<**PyStr**>", "dict": "<**PyDict**>", "list": "<**PyList**>",
              "set": "<**PySet**>", "tuple": "<**PyTuple**>", "int": "<**PyInt**>",
              "float": "<**PyFloat**>"}


def to_pycg(g: nx.MultiDiGraph) -> dict[str, list[str]]:
    """The PyCG "simple" format: every function node (module-code nodes
    included) maps to the sorted distinct callees of ``_call_targets``. As
    PyCG does, every callee (external such as ``<builtin>.len`` included) also
    appears as a key, with its own callees or ``[]``. Module names are
    relative to the analysed folder (``prefix`` of a subject root: the
    package folder given, when it sits in a package). Keys are sorted."""
    prefixes = tuple(f"{r['prefix']}." for r in g.graph.get("roots", ())
                     if r.get("subject") and r.get("prefix"))

    def rel(name: str) -> str:
        for p in prefixes:
            if name.startswith(p):
                return name[len(p):]
        head, _, method = name.removeprefix("<builtin>.").partition(".")
        if name.startswith("<builtin>.") and head in PYCG_TYPES and method:
            return f"{PYCG_TYPES[head]}.{method}"
        return name

    out: dict[str, list[str]] = {}
    for n, kind in g.nodes(data="kind"):
        if kind == "function":
            out[rel(n)] = sorted({rel(t) for t in _call_targets(g, n)})
    for callees in list(out.values()):
        for t in callees:
            if t not in out:
                full = next((p + t for p in prefixes if p + t in g), t)
                out[t] = sorted({rel(c) for c in _call_targets(g, full)}) if full in g else []
    return dict(sorted(out.items()))
