"""Mermaid ``flowchart`` output for the kvflowmap graph.

Same grouping as the DOT picture (a subgraph per process side, inside it one
per package) and the same edge kinds, told apart by arrow and colour:

- ``call`` ``-->``; callback reference ``-->|ref|``
- ``dispatch`` ``-->|dispatch|`` (purple)
- ``bridge`` ``-.->|field|`` (red, thick; the carrier's field name)
- ``sets_state`` ``==>`` (green); ``reads_state`` ``-->|reads|`` (green)
- ``produces`` / ``consumes`` ``-.->`` (orange / blue)

Parallel edges of one kind are drawn once. Output is deterministic.
"""

from __future__ import annotations

import re
from collections import defaultdict

import networkx as nx

from kvflowmap.render.dot import (EDGE_STYLES, SIDES, edge_style_key, group_nodes, node_kind,
                                  package_title, short_labels)

# Node shape brackets per drawing kind.
SHAPES = {
    "function": ('("', '")'),
    "module": ('["', '"]'),
    "class": ('[["', '"]]'),
    "state": ('(["', '"])'),
    "field": ('[("', '")]'),
    "external": ('["', '"]'),
}

ARROWS = {
    "call": "-->", "call_ref": "-->|ref|", "dispatch": "-->|dispatch|", "bridge": "-.->",
    "sets_state": "==>", "reads_state": "-->|reads|", "produces": "-.->", "consumes": "-.->",
    "other": "-.->",
}

CLASS_DEFS = {
    "state": "fill:#b8e0b0,stroke:#2e7d32",
    "field": "fill:#fff2a8,stroke:#a08000",
    "class": "fill:#e8e3f3,stroke:#6a5a9a",
    "external": "fill:#ffffff,stroke:#999999,stroke-dasharray:3 3,color:#666666",
    "module": "fill:#ffffff,stroke:#555555",
    "function": "fill:#ffffff,stroke:#333333",
}


def _text(s: str) -> str:
    """Escape text for a quoted mermaid label (entity codes, ``<br/>`` breaks)."""
    s = s.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")
    return s.replace("\n", "<br/>")


def mermaid_ids(g: nx.MultiDiGraph) -> dict[str, str]:
    """Node id -> a unique mermaid identifier (``n_`` + id with every other
    character than letters, digits and ``_`` replaced by ``_``)."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for n in sorted(g):
        base = "n_" + re.sub(r"[^A-Za-z0-9_]", "_", n)
        ident, i = base, 1
        while ident in used:
            i += 1
            ident = f"{base}_{i}"
        used.add(ident)
        out[n] = ident
    return out


def _subgraph_lines(g: nx.MultiDiGraph, ids: dict[str, str]) -> list[str]:
    """Nested ``subgraph`` blocks holding the node definitions."""
    labels = short_labels(g)
    groups = group_nodes(g)
    out: list[str] = []
    for side in sorted(groups):
        out.append(f'  subgraph sg_{side[1]}["{_text(SIDES[side[1]][0])}"]')
        for pi, pkg in enumerate(sorted(groups[side])):
            out.append(f'    subgraph sg_{side[1]}_{pi}["{_text(package_title(pkg))}"]')
            for n in groups[side][pkg]:
                kind = node_kind(g.nodes[n])
                op, cl = SHAPES[kind]
                out.append(f"      {ids[n]}{op}{_text(labels[n])}{cl}:::k_{kind}")
            out.append("    end")
        out.append("  end")
    return out


def _edge_lines(g: nx.MultiDiGraph, ids: dict[str, str]) -> tuple[list[str], list[str]]:
    """Edge statements and the ``linkStyle`` lines colouring them."""
    merged = sorted({(u, v, edge_style_key(d), str(d.get("carrier") or ""))
                     for u, v, d in g.edges(data=True)})
    lines: list[str] = []
    by_kind: dict[str, list[int]] = defaultdict(list)
    for i, (u, v, kind, carrier) in enumerate(merged):
        arrow = ARROWS[kind]
        if kind == "bridge" and carrier:
            field = carrier.rsplit(".", 1)[-1]
            arrow = f"-.->|{_text(field).replace('|', '#124;')}|"
        lines.append(f"  {ids[u]} {arrow} {ids[v]}")
        by_kind[kind].append(i)
    styles = []
    for kind in sorted(by_kind):
        st = EDGE_STYLES[kind]
        width = "3px" if kind == "bridge" else "1.5px"
        idx = ",".join(str(i) for i in by_kind[kind])
        styles.append(f"  linkStyle {idx} stroke:{st['color']},stroke-width:{width}")
    return lines, styles


def to_mermaid(g: nx.MultiDiGraph) -> str:
    """Deterministic mermaid ``flowchart LR`` text for ``g``."""
    ids = mermaid_ids(g)
    edges, styles = _edge_lines(g, ids)
    kinds = sorted({node_kind(d) for _, d in g.nodes(data=True)})
    lines = ["flowchart LR"]
    lines += _subgraph_lines(g, ids)
    lines += edges
    lines += [f"  classDef k_{k} {CLASS_DEFS[k]}" for k in kinds]
    lines += styles
    return "\n".join(lines) + "\n"
