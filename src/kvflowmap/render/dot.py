"""Graphviz DOT output for the kvflowmap graph, and rendering with ``dot``.

The DOT text is written by hand so that it is byte-for-byte deterministic:
clusters, nodes and edges are emitted in sorted order. Parallel edges of the
same kind between the same two nodes are drawn once; their lines are listed
in the edge tooltip.

Layout: a cluster per process side (scheduler with the request states, worker, both,
what is carried between them, process not known,
external code), inside it a cluster per top-level package; a legend cluster for
the node and edge kinds present. The grouping and labelling helpers are shared
with the mermaid renderer.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import urllib.parse
from collections import defaultdict
from collections.abc import Iterator

import networkx as nx

from kvflowmap.render import links
from kvflowmap.render.links import Templates

RENDER_FORMATS = ("svg", "png", "pdf")
EXTERNAL_FULL_LABEL = 40  # longest external id drawn in full

# Sides in drawing order: key -> (cluster title, fill, border).
SIDES = {
    "scheduler": ("scheduler process", "#eef4fb", "#4a7fb5"),
    "worker": ("worker process", "#fdf3ea", "#c0762c"),
    "both": ("both processes", "#f5f0fa", "#8e6bb0"),
    "shared": ("carried between the processes", "#f6f6f6", "#999999"),
    "unknown": ("process not known", "#fafafa", "#bbbbbb"),
    "external": ("outside the analysed sources", "#ffffff", "#cccccc"),
}

NODE_STYLES: dict[str, dict[str, str]] = {
    "function": {"shape": "box", "style": "rounded,filled", "fillcolor": "#ffffff"},
    "module": {"shape": "tab", "style": "filled", "fillcolor": "#ffffff"},
    "class": {"shape": "component", "style": "filled", "fillcolor": "#e8e3f3"},
    "state": {"shape": "ellipse", "style": "filled", "fillcolor": "#b8e0b0", "color": "#2e7d32"},
    "field": {"shape": "note", "style": "filled", "fillcolor": "#fff2a8", "color": "#a08000"},
    "external": {"shape": "box", "style": "dotted", "color": "#999999", "fontcolor": "#666666"},
}

EDGE_STYLES: dict[str, dict[str, str]] = {
    "call": {"color": "#333333"},
    "call_ref": {"color": "#999999", "arrowhead": "vee"},
    "hook_call": {"color": "#7b3294", "penwidth": "1.6"},
    "dispatch": {"color": "#7b3294", "arrowhead": "empty"},
    "bridge": {"color": "#d7191c", "style": "dashed,bold", "penwidth": "2.2",
               "fontcolor": "#d7191c"},
    "sets_state": {"color": "#1a7f37", "penwidth": "2"},
    "reads_state": {"color": "#66bb6a", "arrowhead": "vee"},
    "produces": {"color": "#e08214", "style": "dotted", "penwidth": "1.6"},
    "consumes": {"color": "#2c7fb8", "style": "dotted", "penwidth": "1.6"},
    "other": {"color": "#bbbbbb", "style": "dotted"},
}


class RenderError(RuntimeError):
    """The picture could not be produced; the message says what to do."""


def node_kind(d: dict) -> str:
    """Drawing kind of a node: a key of :data:`NODE_STYLES`."""
    kind = d.get("kind", "function")
    if kind == "function" and d.get("role") == "module":
        return "module"
    return kind if kind in NODE_STYLES else "external"


def edge_style_key(d: dict) -> str:
    """Drawing kind of an edge: a key of :data:`EDGE_STYLES`."""
    kind = d.get("kind", "other")
    if kind == "call" and d.get("ref"):
        return "call_ref"
    if kind == "call" and d.get("via"):
        return "hook_call"
    return kind if kind in EDGE_STYLES else "other"


def group_key(n: str, d: dict) -> tuple[tuple[int, str], str]:
    """``((side order, side), package)`` cluster of a node."""
    if node_kind(d) == "external":
        side = "external"
    elif d.get("side") in SIDES:
        side = d["side"]
    elif d.get("kind") == "state":
        side = "scheduler"  # a request's status lives in the scheduler's Request
    elif d.get("connector_hooks"):
        side = "both"  # a connector class: one object per process, hooks of both
    elif d.get("kind") == "field":
        side = "shared"
    else:
        side = "unknown"
    pkg = d.get("package") or ("builtins" if n.startswith("<builtin>") else n.split(".")[0])
    return (list(SIDES).index(side), side), str(pkg)


def package_title(pkg: str) -> str:
    """Human title of a top-level package cluster."""
    return {"vllm": "vLLM", "builtins": "Python builtins", "builtin": "Python builtins"}.get(pkg, pkg)


def short_labels(g: nx.MultiDiGraph) -> dict[str, str]:
    """Node id -> the last 2 dotted components, lengthened where two nodes
    would otherwise share a label. Module-code nodes are marked; external
    nodes keep their full id when it is short enough."""
    parts = {n: n.split(".") for n in g}
    size = dict.fromkeys(g, 2)
    while True:
        seen: dict[str, list[str]] = defaultdict(list)
        for n in g:
            seen[".".join(parts[n][-size[n]:])].append(n)
        grow = [n for ns in seen.values() if len(ns) > 1 for n in ns if size[n] < len(parts[n])]
        if not grow:
            break
        for n in grow:
            size[n] += 1
    labels = {n: ".".join(parts[n][-size[n]:]) for n in g}
    for n, d in g.nodes(data=True):
        if node_kind(d) == "module":
            labels[n] += "\n(module code)"
        elif node_kind(d) == "external" and len(n) <= EXTERNAL_FULL_LABEL:
            labels[n] = n  # `<builtin>.None.x`, `torch.cuda.synchronize`: keep the origin
    return labels


# characters a line of a wrapped name may hold (more when its class name is
# longer): a box's, and an ellipse's, which widens its text by about 1.4
WRAP_AT = 28
WRAP_ELLIPSE_AT = 13


def _wrap_name(tail: str, width: int) -> list[str]:
    """``tail`` (``.method`` or ``.STATE``) in as few lines of at most
    ``width`` characters as its ``_`` boundaries allow, the longest line as
    short as it can be; each continued line starts with its ``_`` (a
    dunder's underscores stay with their word). A piece longer than
    ``width`` widens the lines to its length."""
    pieces = re.findall(r"_*[^_]+(?:_+$)?|_+$", tail)
    if len(tail) <= width or len(pieces) == 1:
        return [tail]
    width = max(width, *map(len, pieces))

    def splits(parts: list[str], n: int) -> Iterator[list[str]]:
        if n == 1:
            yield ["".join(parts)]
            return
        for i in range(1, len(parts) - n + 2):
            for rest in splits(parts[i:], n - 1):
                yield ["".join(parts[:i]), *rest]

    for n in range(2, len(pieces) + 1):
        best = min(splits(pieces, n), key=lambda lines: max(map(len, lines)))
        if max(map(len, best)) <= width:
            return best
    return pieces  # not reached: one piece a line fits the widened width


def _two_lines(label: str, *, ellipse: bool = False) -> str:
    """``Class.method`` as ``Class`` over ``.method`` (one line when short,
    unless the node is an ``ellipse``, which widens a one-line label most);
    a long method or state name wrapped at its ``_`` to about the class
    name's width (:func:`_wrap_name`), so that no node sets a column's width
    by its name alone (``Scheduler._update_requests_with_invalid_blocks``:
    283 -> 156 pt at 14 pt; ``RequestStatus.WAITING_FOR_REMOTE_KVS``: 308 -> 167)."""
    head, dot, tail = label.rpartition(".")
    if not dot or "\n" in label or (len(label) <= 24 and not ellipse):
        return label
    width = max(WRAP_ELLIPSE_AT if ellipse else WRAP_AT, len(head))
    return "\n".join([head, *_wrap_name(f".{tail}", width)])


def esc(text: object) -> str:
    """Escape text for a double-quoted DOT string (labels, tooltips, URLs).

    Backslashes and quotes are escaped for DOT; ``&``, ``<`` and ``>`` become
    XML entities (Graphviz decodes them in labels and keeps them in SVG
    attributes); newlines become DOT's ``\\n``.
    """
    s = str(text).replace("\\", "\\\\").replace('"', '\\"')
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return s.replace("\r", "").replace("\n", "\\n")


def _attrs(**kw: object) -> str:
    """``[a="x", b="y"]`` (values already escaped), keys sorted, None left out."""
    items = [f'{k}="{v}"' for k, v in sorted(kw.items()) if v is not None]
    return "[" + ", ".join(items) + "]" if items else ""


def _link(template: Templates | str | None, roots: dict[str, str], root: str | None,
          file: str | None, line: object) -> str | None:
    """The URL of a source location, or None when the location is unknown."""
    if not file:
        return None
    line = line or 1
    chosen = links.pick(template, root or "")
    if chosen is None:
        return f"{urllib.parse.quote(file)}#L{line}"
    # {root} is the label (stable across machines); {path} (or {root_path},
    # the older spelling) the folder: the same placeholders as ``docs``.
    folder = roots.get(root or "") or root or ""
    try:
        return links.fill(chosen, root or "", folder, file, line) or None  # "": no link
    except ValueError as exc:
        raise RenderError(str(exc)) from exc


def _tooltip(n: str, d: dict) -> str:
    """Full id, kind and location, signature and first doc line."""
    where = f"{d.get('root', '')} {d.get('file', '')}:{d.get('line', '')}" if d.get("file") else ""
    parts = [n, f"{node_kind(d)} {where}".strip(), str(d.get("signature") or "")]
    doc = str(d.get("doc") or "").strip()
    parts.append(doc.splitlines()[0] if doc else "")
    return "\n".join(p for p in parts if p)


def _node_stmt(n: str, d: dict, label: str, url: str | None, indent: str) -> str:
    """One node statement."""
    style = dict(NODE_STYLES[node_kind(d)])
    if d.get("subject") is False and node_kind(d) in ("function", "module"):
        style["fillcolor"] = "#eeeeee"
    return f'{indent}"{esc(n)}" ' + _attrs(label=esc(label), tooltip=esc(_tooltip(n, d)),
                                           URL=esc(url) if url else None, **style)


def group_nodes(g: nx.MultiDiGraph) -> dict[tuple[int, str], dict[str, list[str]]]:
    """Node ids by (side, package), the clusters both DOT and mermaid draw."""
    groups: dict[tuple[int, str], dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for n in sorted(g):
        side, pkg = group_key(n, g.nodes[n])
        groups[side][pkg].append(n)
    return groups


def _cluster_lines(g: nx.MultiDiGraph, link_template: Templates | str | None,
                   roots: dict[str, str]) -> list[str]:
    """Side clusters containing package clusters containing node statements."""
    labels = short_labels(g)
    # pictures read left to right: short lines keep the columns narrow (the
    # class over the member, a long name wrapped at its underscores; an
    # external keeps its id on one line: it says where it comes from)
    labels = {n: t if node_kind(g.nodes[n]) == "external"
              else _two_lines(t, ellipse=node_kind(g.nodes[n]) == "state")
              for n, t in labels.items()}
    groups = group_nodes(g)
    out: list[str] = []
    for side in sorted(groups):
        title, fill, border = SIDES[side[1]]
        out.append(f"  subgraph cluster_{side[1]} {{")
        out.append(f'    label="{esc(title)}"; style="filled,rounded"; fillcolor="{fill}"; '
                   f'color="{border}"; penwidth="1.5"; fontsize="14";')
        for pi, pkg in enumerate(sorted(groups[side])):
            out.append(f"    subgraph cluster_{side[1]}_{pi} {{")
            out.append(f'      label="{esc(package_title(pkg))}"; style="filled,rounded"; '
                       'fillcolor="#ffffff"; color="#bbbbbb"; penwidth="1"; fontsize="13";')
            for n in groups[side][pkg]:
                d = g.nodes[n]
                url = _link(link_template, roots, d.get("root"), d.get("file"), d.get("line"))
                out.append(_node_stmt(n, d, d.get("label") or labels[n], url, "      "))
            out.append("    }")
        out.append("  }")
    return out


def _edge_lines(g: nx.MultiDiGraph, link_template: Templates | str | None, roots: dict[str, str],
                *, outside: bool = False) -> list[str]:
    """Edge statements; parallel edges of one style (and carrier) are merged.

    A bridge is labelled with its carrier's field name, once per (carrier,
    target): many connector overrides feed the same vLLM receiver. With
    ``outside`` the label is an ``xlabel``, placed once the nodes are:
    an edge ``label`` is a node of its own in a rank of its own, and in the
    flow picture those ranks made PegaFlow 0.25.1's flow 2492 pt wide
    instead of 2237."""
    merged: dict[tuple[str, str, str, str], list[dict]] = defaultdict(list)
    for u, v, d in g.edges(data=True):
        merged[(u, v, edge_style_key(d), str(d.get("carrier") or ""))].append(d)
    out: list[str] = []
    labelled: set[tuple[str, str]] = set()
    for (u, v, kind, carrier), ds in sorted(merged.items()):
        ds.sort(key=lambda d: (str(d.get("file", "")), int(d.get("line") or 0)))
        locs = ", ".join(f"{d.get('file', '?')}:{d.get('line', '?')}" for d in ds[:12])
        more = f" (+{len(ds) - 12} more)" if len(ds) > 12 else ""
        via = f" via {carrier}" if carrier else ""
        if ds[0].get("kind") == "call" and ds[0].get("via"):
            via = f" through the hook {ds[0]['via']}"
        elif ds[0].get("kind") == "call" and ds[0].get("through"):
            via = f" (named {ds[0]['through']}; this override runs)"
        elif ds[0].get("note"):
            via = f": {ds[0]['note']}"
        tip = esc(f"{u}\n{kind.replace('_', ' ')}{via} → {v}\n{locs}{more}")
        first = ds[0]
        url = _link(link_template, roots, first.get("root"), first.get("file"), first.get("line"))
        label = None
        if carrier and (carrier, v) not in labelled:
            labelled.add((carrier, v))
            label = esc(carrier.rsplit(".", 1)[-1])
        texts = {"xlabel" if outside else "label": label}
        out.append(f'  "{esc(u)}" -> "{esc(v)}" ' + _attrs(
            **texts, tooltip=tip, labeltooltip=tip if label else None,
            constraint="false" if any(d.get("constraint") is False for d in ds) else None,
            URL=esc(url) if url else None, **EDGE_STYLES[kind]))
    return out


def _write_anchors(g: nx.MultiDiGraph) -> list[str]:
    """An invisible ``field -> writer`` edge per field vLLM's own code
    assigns (``output.finished_sending = ...`` in the model runner, not a
    return value): the field is ranked next to the vLLM code that fills it
    instead of being pushed a column further by every consumer. Without
    them the flow pictures of PegaFlow, NIXL and LMCache are 2500-2900 pt
    wide instead of about 1900, too wide for their text at 1600 px."""
    pairs = sorted({(v, u) for u, v, d in g.edges(data=True)
                    if d.get("kind") == "produces" and d.get("via") != "return"
                    and g.nodes[v].get("kind") == "field"
                    and not g.nodes[u].get("subject", False)})
    return [f'  "{esc(f)}" -> "{esc(w)}" [style="invis", arrowhead="none"];' for f, w in pairs]


LEGEND_GLYPHS = {"call": "───▶", "call_ref": "───&gt;", "hook_call": "<B>───▶</B>", "dispatch": "───▷", "bridge": "<B>╍╍╍▶</B>",
                 "sets_state": "━━━▶", "reads_state": "───&gt;", "produces": "┈┈┈▶",
                 "consumes": "┈┈┈▶", "other": "┈┈┈&gt;"}
LEGEND_NAMES = {"call_ref": "reference (callback)", "hook_call": "call of a protocol hook", "module": "module code",
                "bridge": "bridge (label: carrier field)", "dispatch": "dispatch (base → override)"}


def _legend_kinds(g: nx.MultiDiGraph) -> list[str]:
    """The node kinds present in ``g``, in legend order."""
    return sorted({node_kind(d) for _, d in g.nodes(data=True)}, key=list(NODE_STYLES).index)


def _legend_lines(g: nx.MultiDiGraph) -> list[str]:
    """A legend cluster for the node kinds and edge styles present in ``g``:
    one sample node per kind, one HTML table of line samples for the edges
    (real sample edges would stretch across the picture's rank columns)."""
    kinds = _legend_kinds(g)
    edges = sorted({edge_style_key(d) for *_, d in g.edges(data=True)},
                   key=list(EDGE_STYLES).index)
    out = ["  subgraph cluster_legend {",
           '    label="legend"; style="rounded"; color="#888888"; fontsize="13";']
    for k in kinds:
        out.append(f'    "legend:node:{k}" ' + _attrs(label=LEGEND_NAMES.get(k, k), tooltip=k,
                                                      **NODE_STYLES[k]))
    if edges:
        rows = "".join(
            f'<TR><TD><FONT COLOR="{EDGE_STYLES[k]["color"]}">{LEGEND_GLYPHS[k]}</FONT></TD>'
            f'<TD ALIGN="LEFT">{esc(LEGEND_NAMES.get(k, k.replace("_", " ")))}</TD></TR>'
            for k in edges)
        out.append('    "legend:edges" [shape="plaintext", fontsize="13", tooltip="edge kinds", '
                   f'label=<<TABLE BORDER="0" CELLSPACING="0" CELLPADDING="1">{rows}</TABLE>>];')
    out.append("  }")
    return out


def to_dot(g: nx.MultiDiGraph, *, link_template: Templates | str | None = None,
           title: str | None = None) -> str:
    """Deterministic Graphviz DOT text for ``g``.

    ``link_template`` builds each node's and edge's ``URL`` with the
    placeholders ``{root}`` (the root's label), ``{path}``/``{root_path}`` (its folder),
    ``{file}`` and ``{line}``; without a template the URL is the
    relative ``file#L<line>``. ``title`` is drawn above the picture.
    """
    roots = {r.get("label", ""): r.get("path", "") for r in g.graph.get("roots", [])}
    story = bool(g.graph.get("stages"))
    graph_attrs = _attrs(rankdir="LR", fontname="Helvetica", newrank="true", nodesep="0.25",
                         ranksep="0.5", labelloc="t", fontsize="22" if story else "18",
                         tooltip="kvflowmap", label=esc(title) if title else None)
    node_font, edge_font = (STORY_FONT, "13") if story else (FLOW_FONT, FLOW_FONT)
    lines = ['digraph "kvflowmap" {',
             f"  graph {graph_attrs};",
             f'  node [fontname="Helvetica", fontsize="{node_font}", height="0.35"];',
             f'  edge [fontname="Helvetica", fontsize="{edge_font}", arrowsize="0.7"];']
    lines += _cluster_lines(g, link_template, roots)
    lines += _stage_lines(g) if story else _hook_columns(g)
    lines += _legend_lines(g)
    lines += _edge_lines(g, link_template, roots, outside=not story)
    lines += _write_anchors(g)
    lines.append("}")
    return "\n".join(lines) + "\n"


STORY_FONT = "14"  # a story's nodes: one column per stage leaves room for larger text


def _stage_lines(g: nx.MultiDiGraph) -> list[str]:
    """For a story picture (``graph["stages"]``): a header per stage and one
    rank per stage, chained left to right by invisible edges, so the stages
    read in order whatever the lanes hold.

    Everything a stage draws (its hooks, their vLLM callers, what they
    delegate to, the hand-over notes it fills) shares the stage's rank: the
    lanes stack it in one column, callers above or below their hook, and
    the picture is as many columns wide as the story has stages. (Callers
    and delegates in columns of their own, as before, made the load story
    of PegaFlow 0.25.1 3336 pt wide: 5 px text when shown 1600 px wide.)
    The legend joins the last stage's column instead of taking one."""
    stages = g.graph.get("stages") or ()
    if not stages:
        return []
    # the headers in one borderless cluster: Graphviz keeps a cluster in one
    # piece, so they line up in a row above or below the lanes
    out: list[str] = ['  subgraph cluster_stages {', '    style="invis";']
    for i, stage in enumerate(stages):
        out.append(f'    "stage:{i}" ' + _attrs(
            label=esc(f"{i + 1}. {stage['label']}"), shape="plaintext", fontsize="18",
            fontcolor="#444444", tooltip=esc(stage["label"])))
    out.append("  }")
    legend = [f"legend:node:{k}" for k in _legend_kinds(g)] + ["legend:edges"]
    for i, stage in enumerate(stages):
        head = f"stage:{i}"
        if i:
            out.append(f'  "stage:{i - 1}" -> "{head}" [style="invis", weight="10"];')
        column = [*stage["anchors"], *sorted(stage.get("offsets", {}))]
        if i == len(stages) - 1:
            column += legend
        members = "".join(f' "{esc(n)}";' for n in column)
        out.append(f'  {{rank="same"; "{head}";{members}}}')
    return out


FLOW_FONT = "14"


def _hook_columns(g: nx.MultiDiGraph) -> list[str]:
    """For the flow picture: each connector override shares the rank of the
    base hook it overrides, and so do its calls into its own package (the
    connector's scheduler or worker half), stacked down the lanes instead of
    one column further right each. PegaFlow 0.25.1's flow: 3167 -> 2456 pt
    wide at 14 pt text instead of 11 (5.6 -> 9 px when shown 1600 px wide)."""
    parent: dict[str, str] = {}

    def find(n: str) -> str:
        while parent.setdefault(n, n) != n:
            n = parent[n]
        return n

    def join(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    overrides = set()
    for u, v, d in g.edges(data=True):
        if edge_style_key(d) == "dispatch":
            join(u, v)
            overrides.add(v)
    for u, v, d in g.edges(data=True):
        if (u in overrides and edge_style_key(d) == "call" and u != v
                and group_key(u, g.nodes[u]) == group_key(v, g.nodes[v])):
            join(u, v)
    columns: dict[str, list[str]] = defaultdict(list)
    for n in sorted(parent):
        columns[find(n)].append(n)
    out = []
    for _, members in sorted(columns.items()):
        if len(members) > 1:
            out.append('  {rank="same";' + "".join(f' "{esc(n)}";' for n in members) + "}")
    return out


def _dot_program() -> str:
    """Path of Graphviz ``dot``, or a :class:`RenderError` explaining the fix."""
    path = shutil.which("dot")
    if path is None:
        raise RenderError(
            "Graphviz `dot` was not found on PATH, so svg/png/pdf cannot be drawn.\n"
            "Install Graphviz: `apt-get install graphviz` (Debian/Ubuntu), "
            "`brew install graphviz` (macOS), or see https://graphviz.org/download/.\n"
            "The dot, mermaid, json and pycg-json formats work without it.")
    return path


LAYOUT_TIMEOUT = 120.0  # seconds dot may take before the fast fallback layout is used
# the fallback: a force-directed layout with straight edges, seconds where
# dot's layered one takes an hour on a few thousand nodes (clusters are drawn
# only as far as sfdp supports them)
FALLBACK_ARGS = ("-Goverlap=prism", "-Gsplines=false", "-Goutputorder=edgesfirst")


def render(dot_text: str, fmt: str, *, timeout: float | None = None,
           notes: list[str] | None = None) -> bytes:
    """Run Graphviz ``dot -T<fmt>`` on ``dot_text`` (svg, png or pdf) and
    return the bytes. ``SOURCE_DATE_EPOCH`` is pinned so dates embedded by
    the output backends do not change between runs. When dot takes longer
    than ``timeout`` seconds (``KVFLOWMAP_DOT_TIMEOUT``, else
    :data:`LAYOUT_TIMEOUT`), the picture is laid out with ``sfdp`` instead and
    ``notes`` gets a line saying so; when that too runs out of time, a
    :class:`RenderError` says what to draw instead."""
    if fmt not in RENDER_FORMATS:
        raise RenderError(f"dot cannot draw {fmt!r}; use one of {', '.join(RENDER_FORMATS)}")
    if timeout is None:
        timeout = float(os.environ.get("KVFLOWMAP_DOT_TIMEOUT") or LAYOUT_TIMEOUT)
    dot = _dot_program()
    try:
        return _run([dot, f"-T{fmt}"], dot_text, timeout)
    except subprocess.TimeoutExpired:
        pass
    sfdp = shutil.which("sfdp") or os.path.join(os.path.dirname(dot), "sfdp")
    try:
        data = _run([sfdp, *FALLBACK_ARGS, f"-T{fmt}"], dot_text, timeout)
    except (subprocess.TimeoutExpired, FileNotFoundError) as exc:
        raise RenderError(
            f"Graphviz did not lay the picture out within {timeout:g} s (dot, then sfdp): it is "
            "too big to draw. Draw a part (--focus SYMBOL, --connector CLASS, --view load), "
            "raise KVFLOWMAP_DOT_TIMEOUT, or write --format dot/json/mermaid, which need no "
            f"layout ({type(exc).__name__}).") from exc
    if notes is not None:
        notes.append(f"dot did not finish within {timeout:g} s; laid out with sfdp instead "
                     "(straight edges; --focus or --connector draw a readable part)")
    return data


def _run(cmd: list[str], dot_text: str, timeout: float) -> bytes:
    env = {**os.environ, "SOURCE_DATE_EPOCH": os.environ.get("SOURCE_DATE_EPOCH", "0")}
    proc = subprocess.run(cmd, input=dot_text.encode("utf-8"), capture_output=True,
                          check=False, env=env, timeout=timeout)
    if proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip()
        raise RenderError(f"Graphviz {os.path.basename(cmd[0])} failed (exit "
                          f"{proc.returncode}): {msg}")
    return proc.stdout
