"""Tests for kvflowmap.render: DOT, SVG via dot, mermaid, node-link JSON, PyCG JSON."""

from __future__ import annotations

import os

import json
import re
import shutil
import xml.etree.ElementTree as ET

import networkx as nx
import pytest

from kvflowmap.render import FORMATS, RenderError, format_from_suffix, render_graph
from kvflowmap.render.dot import render, to_dot
from kvflowmap.render.json_out import to_node_link, to_pycg
from kvflowmap.render.mermaid import to_mermaid

SCHED = "vllm.v1.core.sched.scheduler.Scheduler"
BASE = "vllm.distributed.kv_transfer.kv_connector.v1.base.KVConnectorBase_V1"
PEGA = "pegaflow.connector.PegaKVConnector"
WORKER = "pegaflow.connector.worker.WorkerConnector"
STATE = "vllm.v1.request.RequestStatus.WAITING_FOR_REMOTE_KVS"
FIELD = "vllm.v1.outputs.KVConnectorOutput.finished_recving"
META = "vllm.v1.core.sched.output.SchedulerOutput.kv_connector_metadata"
TRICKY_DOC = 'Say "hi" to C:\\path <now> & then'
NEEDS_DOT = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed")


def _fn(pkg: str, side: str | None, file: str, line: int, **extra: object) -> dict:
    """Attributes of a function node."""
    root = "vllm 0.33.0" if pkg == "vllm" else "pegaflow-llm 0.25.1"
    d = {"kind": "function", "package": pkg, "file": file, "line": line, "root": root,
         "subject": pkg != "vllm", "flow": True, "signature": "(self)", "doc": None}
    if side:
        d["side"] = side
    d.update(extra)
    return d


def make_graph(reverse: bool = False) -> nx.MultiDiGraph:
    """A small KV-flow graph; ``reverse`` inserts everything in reverse order."""
    sf, bf = "vllm/v1/core/sched/scheduler.py", "vllm/distributed/kv_transfer/kv_connector/v1/base.py"
    nodes = [
        (f"{SCHED}.schedule", _fn("vllm", "scheduler", sf, 300, doc="Schedule one step.\nMore.")),
        (f"{SCHED}._update_from_kv_xfer_finished", _fn("vllm", "scheduler", sf, 900)),
        (f"{BASE}.get_num_new_matched_tokens", _fn("vllm", "scheduler", bf, 200, hook=True)),
        (f"{PEGA}.get_num_new_matched_tokens", _fn("pegaflow", "scheduler", "pegaflow/connector/__init__.py", 80,
                                                   signature='(self, request: "Request<T>", x="\\n")',
                                                   doc=TRICKY_DOC)),
        (f"{PEGA}.build_connector_meta", _fn("pegaflow", "scheduler", "pegaflow/connector/__init__.py", 120)),
        (f"{WORKER}.start_load_kv", _fn("pegaflow", "worker", "pegaflow/connector/worker.py", 40)),
        (f"{WORKER}.get_finished", _fn("pegaflow", "worker", "pegaflow/connector/worker.py", 90)),
        (PEGA, {"kind": "class", "package": "pegaflow", "file": "pegaflow/connector/__init__.py",
                "line": 20, "root": "pegaflow-llm 0.25.1", "subject": True, "flow": True}),
        ("pegaflow.vllm_plugin", _fn("pegaflow", None, "pegaflow/vllm_plugin.py", 1, role="module",
                                     flow=False)),
        (STATE, {"kind": "state", "package": "vllm", "file": "vllm/v1/request.py", "line": 30,
                 "root": "vllm 0.33.0", "subject": False, "flow": True}),
        (FIELD, {"kind": "field", "package": "vllm", "file": "vllm/v1/outputs.py", "line": 60,
                 "root": "vllm 0.33.0", "subject": False, "flow": True}),
        ("<builtin>.len", {"kind": "external", "flow": False}),
    ]
    ed = lambda kind, f, line, **kw: {"kind": kind, "file": f, "line": line, "root": "r", **kw}
    edges = [
        (f"{SCHED}.schedule", f"{BASE}.get_num_new_matched_tokens", ed("call", sf, 310)),
        (f"{SCHED}.schedule", f"{BASE}.get_num_new_matched_tokens", ed("call", sf, 350)),
        (f"{BASE}.get_num_new_matched_tokens", f"{PEGA}.get_num_new_matched_tokens", ed("dispatch", bf, 200)),
        (f"{PEGA}.get_num_new_matched_tokens", "<builtin>.len", ed("call", "pegaflow/connector/__init__.py", 81)),
        (f"{SCHED}.schedule", STATE, ed("sets_state", sf, 320)),
        (STATE, f"{SCHED}._update_from_kv_xfer_finished", ed("reads_state", sf, 905)),
        (f"{PEGA}.build_connector_meta", f"{WORKER}.start_load_kv",
         ed("bridge", bf, 1, carrier=META)),
        (f"{WORKER}.get_finished", f"{SCHED}._update_from_kv_xfer_finished",
         ed("bridge", bf, 2, carrier=FIELD)),
        (f"{WORKER}.get_finished", FIELD, ed("produces", "pegaflow/connector/worker.py", 95)),
        (FIELD, f"{SCHED}._update_from_kv_xfer_finished", ed("consumes", sf, 910)),
        ("pegaflow.vllm_plugin", PEGA, ed("call", "pegaflow/vllm_plugin.py", 5)),
        ("pegaflow.vllm_plugin", f"{WORKER}.get_finished", ed("call", "pegaflow/vllm_plugin.py", 6, ref=True)),
    ]
    g = nx.MultiDiGraph(roots=[{"label": "vllm 0.33.0", "path": "/src/vllm", "subject": False},
                               {"label": "pegaflow-llm 0.25.1", "path": "/src/pega", "subject": True}])
    step = -1 if reverse else 1
    for n, d in nodes[::step]:
        g.add_node(n, **d)
    for u, v, d in edges[::step]:
        g.add_edge(u, v, **d)
    return g


def _cluster_of(dot: str) -> dict[str, list[str]]:
    """Node id -> stack of enclosing cluster names, from the DOT text."""
    stack: list[str] = []
    where: dict[str, list[str]] = {}
    for line in dot.splitlines():
        s = line.strip()
        if m := re.match(r"subgraph (\w+) \{", s):
            stack.append(m.group(1))
        elif s == "}" and stack:
            stack.pop()
        elif m := re.match(r'"((?:[^"\\]|\\.)*)" \[', s):
            where[m.group(1)] = list(stack)
    return where


def _edge_line(dot: str, u: str, v: str) -> str:
    lines = [ln for ln in dot.splitlines() if ln.strip().startswith(f'"{u}" -> "{v}"')]
    assert len(lines) == 1, lines
    return lines[0]


def test_dot_is_deterministic_and_order_independent() -> None:
    a = to_dot(make_graph(), link_template=None, title="KV flow")
    assert a == to_dot(make_graph(), link_template=None, title="KV flow")
    assert a == to_dot(make_graph(reverse=True), link_template=None, title="KV flow")
    assert 'label="KV flow"' in a


def test_dot_clusters_by_side_then_package() -> None:
    where = _cluster_of(to_dot(make_graph()))
    assert where[f"{SCHED}.schedule"] == ["cluster_scheduler", "cluster_scheduler_1"]
    assert where[f"{PEGA}.build_connector_meta"] == ["cluster_scheduler", "cluster_scheduler_0"]
    assert where[f"{WORKER}.get_finished"][0] == "cluster_worker"
    assert where[STATE][0] == "cluster_scheduler"  # request states live in the scheduler
    assert where["&lt;builtin&gt;.len"][0] == "cluster_external"
    dot = to_dot(make_graph())
    assert 'label="vLLM"' in dot and 'label="pegaflow"' in dot
    assert 'label="scheduler process"' in dot and 'label="worker process"' in dot
    g = make_graph()
    g.nodes[f"{SCHED}.schedule"]["side"] = "both"
    assert _cluster_of(to_dot(g))[f"{SCHED}.schedule"][0] == "cluster_both"
    assert "both processes" in to_mermaid(g)


def test_dot_shapes_and_edge_styles() -> None:
    dot = to_dot(make_graph())
    bridge = _edge_line(dot, f"{PEGA}.build_connector_meta", f"{WORKER}.start_load_kv")
    # in the flow picture the carrier is an xlabel: an edge label would take a rank of its own
    assert 'style="dashed,bold"' in bridge and ' xlabel="kv_connector_metadata"' in bridge
    assert ' label=' not in bridge
    assert META in bridge  # the full carrier is in the tooltip
    g = make_graph()
    g.add_edge(f"{BASE}.get_num_new_matched_tokens", f"{WORKER}.start_load_kv", kind="bridge",
               file="b.py", line=3, root="r", carrier=META)
    again = _edge_line(to_dot(g), f"{BASE}.get_num_new_matched_tokens", f"{WORKER}.start_load_kv")
    assert 'style="dashed,bold"' in again and "label=" not in again  # one label per target
    assert 'xlabel="kv_connector_metadata"' in _edge_line(
        to_dot(g), f"{PEGA}.build_connector_meta", f"{WORKER}.start_load_kv")
    call = _edge_line(dot, f"{SCHED}.schedule", f"{BASE}.get_num_new_matched_tokens")
    assert "dashed" not in call and "310" in call and "350" in call  # parallel edges merged
    assert 'arrowhead="empty"' in _edge_line(dot, f"{BASE}.get_num_new_matched_tokens",
                                             f"{PEGA}.get_num_new_matched_tokens")
    assert 'style="dotted"' in _edge_line(dot, f"{WORKER}.get_finished", FIELD)
    state_line = next(ln for ln in dot.splitlines() if ln.strip().startswith(f'"{STATE}" ['))
    assert 'shape="ellipse"' in state_line and 'style="filled"' in state_line
    # short lines keep the columns narrow: the class over the member, a long
    # name wrapped at its underscores (an ellipse widens its text most)
    assert 'label="RequestStatus\\n.WAITING_FOR\\n_REMOTE_KVS"' in state_line
    ext = next(ln for ln in dot.splitlines() if ln.strip().startswith('"&lt;builtin&gt;.len" ['))
    assert 'label="&lt;builtin&gt;.len"' in ext and 'style="dotted"' in ext
    g = make_graph()
    g.add_node("<builtin>.None.get_finished", kind="external")
    assert 'label="&lt;builtin&gt;.None.get_finished"' in to_dot(g)
    assert 'shape="component"' in next(ln for ln in dot.splitlines() if ln.strip().startswith(f'"{PEGA}" ['))


@pytest.mark.parametrize("label,ellipse,lines", [
    ("Scheduler.schedule", False, ["Scheduler.schedule"]),
    ("PegaKVConnector.get_finished", False, ["PegaKVConnector", ".get_finished"]),
    # a long name in balanced lines, each continued at an underscore
    ("Scheduler._update_requests_with_invalid_blocks", False,
     ["Scheduler", "._update_requests", "_with_invalid_blocks"]),
    # as wide as the class name allows before it wraps
    ("KVConnectorModelRunnerMixin._get_kv_connector_output", False,
     ["KVConnectorModelRunnerMixin", "._get_kv_connector_output"]),
    ("RequestStatus.PREEMPTED", True, ["RequestStatus", ".PREEMPTED"]),
    ("RequestStatus.WAITING_FOR_REMOTE_KVS", True, ["RequestStatus", ".WAITING_FOR", "_REMOTE_KVS"]),
    # a dunder keeps its underscores with its words; a piece longer than the
    # width widens the lines instead of being cut
    ("PegaConnectorMetadata.__init__", False, ["PegaConnectorMetadata", ".__init__"]),
    ("A.__very_long_dunder_method_name_here__", False, ["A", ".__very_long_dunder", "_method_name_here__"]),
    ("Conn.averyveryverylongnamewithoutunderscores_x", False,
     ["Conn", ".averyveryverylongnamewithoutunderscores", "_x"]),
])
def test_dot_labels_wrap_long_names_at_underscores(label: str, ellipse: bool,
                                                   lines: list[str]) -> None:
    from kvflowmap.render.dot import _two_lines

    assert _two_lines(label, ellipse=ellipse).split("\n") == lines


def test_dot_legend_lists_present_kinds() -> None:
    where = _cluster_of(to_dot(make_graph()))
    legend = {n for n, stack in where.items() if stack == ["cluster_legend"]}
    assert {"legend:node:state", "legend:node:field", "legend:node:module",
            "legend:edges"} <= legend
    table = next(ln for ln in to_dot(make_graph()).splitlines() if '"legend:edges"' in ln)
    for text in ("bridge (label: carrier field)", "dispatch", "sets state", "reads state",
                 "produces", "consumes", "reference (callback)", ">call<"):
        assert text in table
    bare = nx.MultiDiGraph()
    bare.add_node("m.f", kind="function")
    assert '"legend:edges"' not in to_dot(bare) and '"legend:node:function"' in to_dot(bare)


def test_dot_links_and_escaping() -> None:
    dot = to_dot(make_graph())
    assert 'URL="vllm/v1/core/sched/scheduler.py#L300"' in dot
    node = next(ln for ln in dot.splitlines() if ln.strip().startswith(f'"{PEGA}.get_num_new_matched_tokens" ['))
    assert r'Say \"hi\" to C:\\path &lt;now&gt; &amp; then' in node
    assert "<" not in node and "Schedule one step." in dot and "More." not in dot
    linked = to_dot(make_graph(), link_template="vscode://file{root_path}/{file}:{line}")
    assert 'URL="vscode://file/src/vllm/vllm/v1/core/sched/scheduler.py:300"' in linked
    with pytest.raises(RenderError, match="placeholders"):
        to_dot(make_graph(), link_template="{nope}")


@NEEDS_DOT
def test_svg_is_deterministic_and_tooltips_survive() -> None:
    dot = to_dot(make_graph(), title='A "quoted" <title>')
    svg = render(dot, "svg")
    assert svg == render(dot, "svg")
    root = ET.fromstring(svg)
    titles = [a.get("{http://www.w3.org/1999/xlink}title") or "" for a in root.iter("{http://www.w3.org/2000/svg}a")]
    tip = next(t for t in titles if t.startswith(f"{PEGA}.get_num_new_matched_tokens"))
    # one backslash each: Graphviz 2.43 unescapes tooltips twice, so runs of
    # backslashes collapse there even though the DOT text is correct
    assert TRICKY_DOC in tip and '(self, request: "Request<T>", x="\\n")' in tip
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "<builtin>.len" in texts and 'A "quoted" <title>' in texts


def test_missing_dot_explains_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda *_a, **_k: None)
    with pytest.raises(RenderError) as err:
        render_graph(make_graph(), "svg")
    msg = str(err.value)
    assert "apt-get install graphviz" in msg and "brew install graphviz" in msg
    assert "mermaid" in msg and "json" in msg
    assert render_graph(make_graph(), "mermaid").startswith(b"flowchart LR")


def test_mermaid_basics() -> None:
    text = to_mermaid(make_graph())
    assert text == to_mermaid(make_graph(reverse=True))
    lines = [ln.strip() for ln in text.splitlines()]
    assert lines[0] == "flowchart LR"
    assert sum(ln.startswith("subgraph ") for ln in lines) == lines.count("end") >= 4
    defined = {m.group(1) for ln in lines if (m := re.match(r"(\w+)[\[(]", ln)) and not ln.startswith("subgraph")}
    edges = [ln for ln in lines if re.match(r"\w+ [-=.]", ln)]
    assert len(edges) == 11  # the two parallel call edges are drawn once
    for ln in edges:
        src, dst = ln.split()[0], ln.split()[-1]
        assert src in defined and dst in defined
        assert re.fullmatch(r"n_[A-Za-z0-9_]+", src)
    assert any("-.->|kv_connector_metadata|" in ln for ln in edges)
    assert any(" ==> " in ln and "WAITING_FOR_REMOTE_KVS" in ln for ln in edges)
    assert "#lt;builtin#gt;.len" in text and "<builtin>" not in text
    assert "linkStyle" in text and "classDef k_state" in text


def test_pycg_includes_dispatch_targets_and_externals() -> None:
    cg = to_pycg(make_graph())
    assert cg[f"{SCHED}.schedule"] == [f"{PEGA}.get_num_new_matched_tokens",  # via dispatch
                                       f"{BASE}.get_num_new_matched_tokens"]
    assert cg[f"{PEGA}.get_num_new_matched_tokens"] == ["<builtin>.len"]
    assert cg["<builtin>.len"] == []
    # PyCG's conventions: ``C()`` with no ``__init__`` is no edge, and a
    # function only referenced (``ref``) is not called
    assert cg["pegaflow.vllm_plugin"] == [] and PEGA not in cg
    assert cg[f"{WORKER}.get_finished"] == []  # bridges and produces are not calls
    assert cg[f"{BASE}.get_num_new_matched_tokens"] == []  # dispatch edges are not calls
    assert STATE not in cg and FIELD not in cg
    assert list(cg) == sorted(cg)
    assert json.loads(render_graph(make_graph(), "pycg-json")) == cg


def test_pycg_class_targets_and_relative_names() -> None:
    g = nx.MultiDiGraph(roots=[{"label": "snip", "path": "/x", "subject": True,
                                "prefix": "snip"}],
                        mro={"snip.main.A": ("snip.main.A", "ext.Parent")})
    g.add_node("snip.main", kind="function")
    g.add_node("snip.main.A", kind="class")
    g.add_node("snip.main.f", kind="function")
    g.add_edge("snip.main", "snip.main.A", kind="call", line=3)
    g.add_edge("snip.main", "snip.main.f", kind="call", line=4)
    assert to_pycg(g) == {"ext.Parent.__init__": [], "main": ["ext.Parent.__init__", "main.f"],
                          "main.f": []}


def test_node_link_json() -> None:
    data = to_node_link(make_graph())
    assert set(data) >= {"nodes", "links", "graph", "directed", "multigraph"}
    assert json.dumps(data) == json.dumps(to_node_link(make_graph()))
    unkeyed = lambda d: [{k: v for k, v in e.items() if k != "key"} for e in d["links"]]
    assert unkeyed(data) == unkeyed(to_node_link(make_graph(reverse=True)))
    assert data["nodes"] == to_node_link(make_graph(reverse=True))["nodes"]
    assert [n["id"] for n in data["nodes"]] == sorted(n["id"] for n in data["nodes"])
    bridge = next(e for e in data["links"] if e.get("carrier") == FIELD)
    assert bridge["kind"] == "bridge" and bridge["source"] == f"{WORKER}.get_finished"
    back = nx.node_link_graph(json.loads(render_graph(make_graph(), "json")), edges="links",
                              directed=True, multigraph=True)
    assert back.number_of_edges() == 12 and back.nodes[STATE]["kind"] == "state"
    assert back.graph["roots"][0]["path"] == "/src/vllm"


def test_formats_and_suffixes() -> None:
    assert FORMATS == ("svg", "png", "pdf", "dot", "mermaid", "json", "pycg-json")
    assert format_from_suffix("out/flow.SVG") == "svg"
    assert format_from_suffix("x.mmd") == format_from_suffix("x.mermaid") == "mermaid"
    assert format_from_suffix("x.gv") == format_from_suffix("x.dot") == "dot"
    assert format_from_suffix("x.json") == "json" and format_from_suffix("x.txt") is None
    assert render_graph(make_graph(), "dot").startswith(b'digraph "kvflowmap"')
    with pytest.raises(RenderError, match="unknown output format"):
        render_graph(make_graph(), "bmp")


def _fake_graphviz(tmp_path, monkeypatch, sfdp_sleeps: bool) -> None:
    """``dot`` that never finishes in time, and an ``sfdp`` that answers."""
    import stat

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scripts = {"dot": "#!/bin/sh\nexec sleep 5\n",
               "sfdp": "#!/bin/sh\n" + ("exec sleep 5\n" if sfdp_sleeps else "") +
               "cat > /dev/null\necho '<svg>sfdp</svg>'\n"}
    for name, text in scripts.items():
        (bin_dir / name).write_text(text, encoding="utf-8")
        (bin_dir / name).chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("KVFLOWMAP_DOT_TIMEOUT", "0.3")


def test_slow_dot_falls_back_to_sfdp_and_says_so(tmp_path, monkeypatch) -> None:
    from kvflowmap.render.dot import render

    _fake_graphviz(tmp_path, monkeypatch, sfdp_sleeps=False)
    notes: list[str] = []
    assert render("digraph { a -> b }", "svg", notes=notes) == b"<svg>sfdp</svg>\n"
    assert notes and "within 0.3 s" in notes[0] and "sfdp" in notes[0]


def test_a_picture_too_big_for_both_layouts_is_a_clear_error(tmp_path, monkeypatch) -> None:
    from kvflowmap.render.dot import render

    _fake_graphviz(tmp_path, monkeypatch, sfdp_sleeps=True)
    with pytest.raises(RenderError, match=r"within 0.3 s \(dot, then sfdp\).*--focus"):
        render("digraph { a -> b }", "svg")


def test_flow_dot_stacks_an_override_with_its_base_hook_and_own_helpers() -> None:
    """The override, the base hook it overrides and what it calls in its own
    package share one rank (one column): a chain base -> override -> helper
    took three columns and made real flow pictures 3000+ pt wide. A call out
    of the package (<builtin>.len) keeps its own column."""
    g = make_graph()
    g.add_node(f"{PEGA}._helper", **_fn("pegaflow", "scheduler", "pegaflow/connector/__init__.py",
                                        90))
    g.add_edge(f"{PEGA}.get_num_new_matched_tokens", f"{PEGA}._helper",
               kind="call", file="pegaflow/connector/__init__.py", line=82, root="r")
    dot = to_dot(g)
    (column,) = [ln for ln in dot.splitlines() if ln.startswith('  {rank="same";')]
    assert f'"{BASE}.get_num_new_matched_tokens";' in column
    assert f'"{PEGA}.get_num_new_matched_tokens";' in column
    assert f'"{PEGA}._helper";' in column and "<builtin>" not in column
    assert 'fontsize="14", height="0.35"' in dot
    assert to_dot(make_graph(reverse=True)).count('{rank="same";') == 1


@NEEDS_DOT
def test_flow_picture_text_is_readable_at_1600_px() -> None:
    """The default flow picture of the minivllm fixture shown 1600 px wide:
    every text (boxes, carrier labels, cluster titles, legend) 10 px or more.
    It was 1902 pt wide with a 10 pt legend (8.4 px): the carrier labels
    were edge labels, each a rank of its own, and long names set a column's
    width; now 1474 pt, the smallest text 13 pt (14.1 px)."""
    from kvflowmap.graph import select
    from tests.navdocs_support import minivllm_analysis

    view = select.flow_view(minivllm_analysis().graph)
    dot = to_dot(view)
    assert " xlabel=" in dot  # the carrier labels take no rank
    svg = render(dot, "svg").decode()
    width = float(re.search(r'<svg width="([0-9.]+)pt"', svg).group(1))
    smallest = min(float(x) for x in re.findall(r'font-size="([0-9.]+)"', svg))
    assert smallest * 1600 / width >= 10, (width, smallest)
