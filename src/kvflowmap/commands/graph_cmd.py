"""``kvflowmap graph``: select the part of the graph to draw, render, write."""

from __future__ import annotations


import click
import networkx as nx

from kvflowmap.api import Analysis
from kvflowmap.commands.graph_result import GraphResult
from kvflowmap.graph import select, story
from kvflowmap.nav.statelinks import with_state_links
from kvflowmap.protocol import Protocol
from kvflowmap.render.graph_out import format_from_suffix, render_graph
from kvflowmap.render.dot import RenderError
from kvflowmap.sources.config import ProjectConfig


LARGE_PICTURE = 1500  # nodes beyond which a Graphviz layout is slow enough to warn
LOCAL_LINKS = "file://{path}/{file}#L{line}"  # links of a picture with no --link-template


def choose_view(g: nx.MultiDiGraph, *, focus, depth, direction, path_from, path_to,
                include, exclude, full, max_nodes, connector=(), view_name: str = "all",
                protocol: Protocol | None = None,
                state: nx.MultiDiGraph | None = None) -> nx.MultiDiGraph:
    """The subgraph the options ask for; the KV-transfer flow by default."""
    if bool(path_from) != bool(path_to):
        raise click.UsageError("--from and --to go together")
    if view_name != "all":
        views = protocol.views if protocol else {}
        if view_name not in views:
            raise click.UsageError(f"--view {view_name!r}: the protocol file has the views "
                                   + ", ".join(["all", *sorted(views)]))
        if focus or path_from or full:
            raise click.UsageError("--view draws a story; it does not combine with --focus, "
                                   "--from/--to or --full")
        assert protocol is not None
        view = story.story_view(g, views[view_name], protocol.base_class, connectors=connector,
                                max_nodes=max_nodes, state=state)
    elif path_from:
        view = select.paths_view(g, path_from, path_to)
    elif focus:
        view = select.focus(g, list(focus), depth, direction, max_nodes=max_nodes)
    elif full:
        view = g
    else:
        view = select.flow_view(g, max_nodes=max_nodes, connectors=connector)
    if include or exclude:
        view = select.filter_globs(view, list(include), list(exclude))
    view.graph.update(g.graph)
    return view


def produce_graph(analysis: Analysis, config: ProjectConfig, *, out, fmt, focus, depth,
                  direction, path_from, path_to, include, exclude, full, max_nodes,
                  link_template, show_unresolved, connector=(), view: str = "all") -> GraphResult:
    """Select and render the picture the options ask for (``view``: all, or
    a story of the protocol file)."""
    fmt = fmt or (format_from_suffix(out) if out else None) or ("svg" if out else "dot")
    if not out and fmt in ("svg", "png", "pdf"):
        raise click.UsageError(f"--format {fmt} needs --out FILE")
    # The data formats are for other tools: the whole graph unless a part is
    # asked for (the ~80-node flow picture is for reading)
    whole = fmt in ("json", "pycg-json") and not (focus or path_from or connector)
    try:
        picture = choose_view(
            analysis.graph, focus=focus, depth=depth, direction=direction, path_from=path_from,
            path_to=path_to, include=include, exclude=exclude,
            full=(full or whole) and view == "all", max_nodes=max_nodes,
            connector=connector, view_name=view, protocol=analysis.linker.protocol,
            state=with_state_links(analysis.linker) if view != "all" else None)
    except select.SelectError as exc:
        raise click.UsageError(str(exc)) from exc
    template = dict(link_template or {})
    if "" not in template and fmt in ("svg", "pdf"):
        # a picture opened from disk: absolute links reach the sources from
        # wherever the file is (root-relative ones went nowhere)
        template[""] = LOCAL_LINKS
    title = _title(analysis, picture.graph.get("connectors", []), picture.graph.get("view"))
    if fmt in ("svg", "png", "pdf") and picture.number_of_nodes() > LARGE_PICTURE:
        # Graphviz's layout grows much faster than the graph: --full on
        # vllm-ascend ran dot for more than ten minutes
        click.echo(f"kvflowmap: drawing {picture.number_of_nodes()} nodes with Graphviz may take "
                   "many minutes; --focus, --connector or --format json/dot/mermaid answer "
                   "at once", err=True)
    try:
        layout_notes: list[str] = []
        data = render_graph(picture, fmt, link_template=template or None, title=title,
                            notes=layout_notes)
    except RenderError as exc:
        raise click.ClickException(str(exc)) from exc
    g = analysis.graph
    note = (f"{picture.number_of_nodes()} nodes, {picture.number_of_edges()} edges drawn (graph: "
            f"{g.number_of_nodes()} nodes, {g.number_of_edges()} edges, "
            f"{len(analysis.unresolved)} unresolved calls)")
    for line in layout_notes:
        note += f"; {line}"
    if picture.graph.get("cut"):
        note += (f"; --focus reached {picture.graph['cut']} nodes within --depth {depth}, the "
                 f"{picture.number_of_nodes()} nearest are drawn (--max-nodes to draw more)")
    unresolved = tuple(f"{u.file}:{u.line}: {u.caller}: {u.callee}" for u in sorted(
        analysis.unresolved, key=lambda u: (u.file, u.line, u.callee))) if show_unresolved else ()
    return GraphResult(data, fmt, note, unresolved)


def _title(analysis: Analysis, connectors: list[str], view: str | None = None) -> str:
    labels = " + ".join(r.label for r in analysis.roots)
    shown = ", ".join(c.rpartition(".")[2] for c in connectors)
    if view:
        return f"{analysis.linker.protocol.views[view].title}: {shown or 'connector'} — {labels}"
    return f"KV-transfer flow: {labels}" + (f" (connector: {shown})" if shown else "")
