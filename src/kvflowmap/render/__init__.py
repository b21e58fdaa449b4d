"""Rendering: the graph in every output format (``graph_out``: Graphviz,
mermaid, JSON), source links (``links``), the lifecycle text.

The names of ``graph_out`` are reachable from here but imported only when
asked for: ``from kvflowmap.render import links`` (a warm ``docs`` or
``trace`` run) loads neither networkx nor the renderers."""

from __future__ import annotations

from typing import Any

__all__ = ["FORMATS", "RenderError", "format_from_suffix", "render", "render_graph", "to_dot",
           "to_mermaid", "to_node_link", "to_pycg"]


def __getattr__(name: str) -> Any:
    """A name of :mod:`kvflowmap.render.graph_out`, imported on first use."""
    if name in __all__:
        from kvflowmap.render import graph_out

        return getattr(graph_out, name)
    raise AttributeError(f"module 'kvflowmap.render' has no attribute {name!r}")
