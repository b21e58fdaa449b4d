"""The kvflowmap graph in every output format: Graphviz (DOT, SVG, PNG, PDF),
mermaid, node-link JSON and the PyCG call-graph JSON. Only svg/png/pdf need
the Graphviz ``dot`` program."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx

from kvflowmap.render.dot import RENDER_FORMATS, RenderError, render, to_dot
from kvflowmap.render.json_out import to_node_link, to_pycg
from kvflowmap.render.links import Templates
from kvflowmap.render.mermaid import to_mermaid

__all__ = ["FORMATS", "RenderError", "format_from_suffix", "render", "render_graph", "to_dot",
           "to_mermaid", "to_node_link", "to_pycg"]

FORMATS = ("svg", "png", "pdf", "dot", "mermaid", "json", "pycg-json")

_SUFFIXES = {".svg": "svg", ".png": "png", ".pdf": "pdf", ".dot": "dot", ".gv": "dot",
             ".mmd": "mermaid", ".mermaid": "mermaid", ".json": "json"}


def _json_bytes(data: dict) -> bytes:
    """Stable JSON, one top-level key per line and one list item (node, link)
    per line, with a trailing newline. ``indent=`` would switch ``json`` to its
    pure-Python encoder: measured 2.5 s of the 85 s ``graph --all`` on vLLM."""

    one = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode  # C encoder

    lines = []
    for key in sorted(data):
        value = data[key]
        if isinstance(value, list) and value:
            items = ",\n".join("    " + one(v) for v in value)
            text = f"[\n{items}\n  ]"
        else:
            text = one(value)
        lines.append(f"  {one(key)}: {text}")
    return ("{\n" + ",\n".join(lines) + "\n}\n").encode("utf-8")


def render_graph(g: nx.MultiDiGraph, fmt: str, *, link_template: Templates | str | None = None,
                 title: str | None = None, notes: list[str] | None = None) -> bytes:
    """``g`` in output format ``fmt`` (one of :data:`FORMATS`) as bytes.

    Raises :class:`RenderError` for an unknown format or, for svg/png/pdf,
    when Graphviz is missing or fails.
    """
    if fmt in RENDER_FORMATS:
        return render(to_dot(g, link_template=link_template, title=title), fmt, notes=notes)
    if fmt == "dot":
        return to_dot(g, link_template=link_template, title=title).encode("utf-8")
    if fmt == "mermaid":
        return to_mermaid(g).encode("utf-8")
    if fmt == "json":
        return _json_bytes(to_node_link(g))
    if fmt == "pycg-json":
        return _json_bytes(to_pycg(g))
    raise RenderError(f"unknown output format {fmt!r}; choose one of {', '.join(FORMATS)}")


def format_from_suffix(path: str | Path) -> str | None:
    """The output format implied by a file name's suffix, or None
    (``.json`` means node-link ``json``; ask for ``pycg-json`` explicitly)."""
    return _SUFFIXES.get(Path(path).suffix.lower())
