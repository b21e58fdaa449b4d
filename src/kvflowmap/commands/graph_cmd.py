"""``kvflowmap graph``: select the part of the graph to draw, render, write."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import networkx as nx

from kvflowmap.api import Analysis
from kvflowmap.console import Reporter
from kvflowmap.graph import select
from kvflowmap.render import format_from_suffix, render_graph
from kvflowmap.render.dot import RenderError
from kvflowmap.sources.config import ProjectConfig


def choose_view(g: nx.MultiDiGraph, *, focus, depth, direction, path_from, path_to,
                include, exclude, full, max_nodes, connector=()) -> nx.MultiDiGraph:
    """The subgraph the options ask for; the KV-transfer flow by default."""
    if bool(path_from) != bool(path_to):
        raise click.UsageError("--from and --to go together")
    if path_from:
        view = select.paths_view(g, path_from, path_to)
    elif focus:
        view = select.focus(g, list(focus), depth, direction)
    elif full:
        view = g
    else:
        view = select.flow_view(g, max_nodes=max_nodes, connectors=connector)
    if include or exclude:
        view = select.filter_globs(view, list(include), list(exclude))
    view.graph.update(g.graph)
    return view


def run_graph(analysis: Analysis, config: ProjectConfig, rep: Reporter, *, out, fmt, focus,
              depth, direction, path_from, path_to, include, exclude, full, max_nodes,
              link_template, show_unresolved, connector=()) -> None:
    """Render the chosen view to ``out`` (or stdout for text formats)."""
    fmt = fmt or (format_from_suffix(out) if out else None) or ("svg" if out else "dot")
    try:
        view = choose_view(analysis.graph, focus=focus, depth=depth, direction=direction,
                           path_from=path_from, path_to=path_to, include=include,
                           exclude=exclude, full=full, max_nodes=max_nodes,
                           connector=connector)
    except select.SelectError as exc:
        raise click.UsageError(str(exc)) from exc
    template = link_template or config.link_template
    title = _title(analysis, view.graph.get("connectors", []))
    try:
        data = render_graph(view, fmt, link_template=template, title=title)
    except RenderError as exc:
        raise click.ClickException(str(exc)) from exc
    if out:
        Path(out).write_bytes(data)
    elif fmt in ("svg", "png", "pdf"):
        raise click.UsageError(f"--format {fmt} needs --out FILE")
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    g = analysis.graph
    rep.note(f"{out or 'stdout'}: {view.number_of_nodes()} nodes, {view.number_of_edges()} edges "
             f"drawn (graph: {g.number_of_nodes()} nodes, {g.number_of_edges()} edges, "
             f"{len(analysis.unresolved)} unresolved calls)")
    if show_unresolved:
        for u in sorted(analysis.unresolved, key=lambda u: (u.file, u.line, u.callee)):
            click.echo(f"{u.file}:{u.line}: {u.caller}: {u.callee}", err=True)


def _title(analysis: Analysis, connectors: list[str]) -> str:
    labels = " + ".join(r.label for r in analysis.roots)
    shown = ", ".join(c.rpartition(".")[2] for c in connectors)
    return f"KV-transfer flow: {labels}" + (f" (connector: {shown})" if shown else "")
