"""The foundation's promises, checked on vllm 0.33.0 + pegaflow-llm 0.25.1."""

from __future__ import annotations

import json
import subprocess
import sys

import networkx as nx
import pytest

pytestmark = pytest.mark.integration

SCHED = "vllm.v1.core.sched.scheduler.Scheduler"
MIXIN = "vllm.v1.worker.kv_connector_model_runner_mixin.KVConnectorModelRunnerMixin"
STATE = "vllm.v1.request.RequestStatus.WAITING_FOR_REMOTE_KVS"
RECV = "vllm.v1.outputs.KVConnectorOutput.finished_recving"


def reaches(g: nx.MultiDiGraph, a: str, b: str) -> bool:
    assert a in g, f"{a} missing from the graph"
    assert b in g, f"{b} missing from the graph"
    return nx.has_path(g, a, b)


def test_scheduler_reaches_pegaflow_probe(pegaflow_analysis) -> None:
    g = pegaflow_analysis.graph
    assert reaches(g, f"{SCHED}.schedule", "pegaflow.connector.PegaKVConnector.get_num_new_matched_tokens")
    assert reaches(g, f"{SCHED}.schedule",
                   "pegaflow.connector.scheduler.SchedulerConnector.get_num_new_matched_tokens")


def test_worker_mixin_reaches_pegaflow_load(pegaflow_analysis) -> None:
    g = pegaflow_analysis.graph
    assert reaches(g, f"{MIXIN}._get_kv_connector_output",
                   "pegaflow.connector.worker.WorkerConnector.start_load_kv")


def test_schedule_parks_requests(pegaflow_analysis) -> None:
    g = pegaflow_analysis.graph
    kinds = {d["kind"] for _, v, d in g.out_edges(f"{SCHED}.schedule", data=True) if v == STATE}
    assert "sets_state" in kinds
    assert g.nodes[STATE]["kind"] == "state"


def test_finished_recving_crosses_from_worker_to_scheduler(pegaflow_analysis) -> None:
    g = pegaflow_analysis.graph
    producers = {u for u, _, k in g.in_edges(RECV, data="kind") if k == "produces"}
    consumers = {v for _, v, k in g.out_edges(RECV, data="kind") if k == "consumes"}
    assert f"{MIXIN}._get_kv_connector_output" in producers
    assert any(g.nodes[p].get("side") == "worker" for p in producers)
    assert f"{SCHED}._update_from_kv_xfer_finished" in consumers


def test_bridges_and_registry(pegaflow_analysis) -> None:
    g = pegaflow_analysis.graph
    bridges = {(u, v) for u, v, k in g.edges(data="kind") if k == "bridge"}
    assert ("pegaflow.connector.PegaKVConnector.get_finished",
            f"{SCHED}._update_from_kv_xfer_finished") in bridges
    create = "vllm.distributed.kv_transfer.kv_connector.factory.KVConnectorFactory.create_connector"
    assert "pegaflow.connector.PegaKVConnector.__init__" in set(g.successors(create))


def test_protocol_names_all_exist_in_vllm_0_33(pegaflow_analysis) -> None:
    assert not [w for w in pegaflow_analysis.warnings if "not found in vllm" in w]


def test_cli_graph_on_real_releases(tmp_path, vllm_root, pegaflow_root) -> None:
    from tests.integration.conftest import release_cache_dir

    out = tmp_path / "flow.json"
    cmd = [sys.executable, "-m", "kvflowmap", "graph", str(pegaflow_root / "pegaflow"),
           "--context", str(vllm_root), "--cache-dir", str(release_cache_dir()), "-q", "--out", str(out)]
    subprocess.run(cmd, check=True, timeout=600)
    data = json.loads(out.read_text())
    assert len(data["nodes"]) > 1000  # a data format: the whole graph
    kinds = {link["kind"] for link in data["links"]}
    assert {"call", "dispatch", "bridge", "sets_state"} <= kinds
    # the flow picture of one connector is small enough to read
    subprocess.run([*cmd, "--connector", "PegaKVConnector"], check=True, timeout=600)
    flow = json.loads(out.read_text())
    assert 10 <= len(flow["nodes"]) <= 80
    assert {"call", "bridge"} <= {link["kind"] for link in flow["links"]}


def _story(analysis, name: str, connector: str) -> nx.MultiDiGraph:
    from kvflowmap.graph import story
    from kvflowmap.nav.statelinks import with_state_links

    proto = analysis.linker.protocol
    return story.story_view(analysis.graph, proto.views[name], proto.base_class,
                            connectors=[connector], state=with_state_links(analysis.linker))


def _anchors(view: nx.MultiDiGraph, label: str) -> list[str]:
    return next(s["anchors"] for s in view.graph["stages"] if s["label"] == label)


def test_nixl_load_story(vllm_connectors_analysis) -> None:
    """Checked against vLLM 0.33.0's nixl/ sources: the Pull connector's
    inherited hooks, its own worker only, no get_finished (NixlBaseConnector
    overrides get_transfer_results, so vLLM never calls it), and the
    hand-over through ``_recving_transfers`` (filled by ``_read_blocks``
    under ``start_load_kv``, read by ``get_transfer_results``)."""
    nixl = "vllm.distributed.kv_transfer.kv_connector.v1.nixl"
    view = _story(vllm_connectors_analysis, "load", "NixlConnector")
    assert view.graph["connectors"] == [f"{nixl}.connector.NixlPullConnector"]
    assert _anchors(view, "probe") == [f"{nixl}.connector.NixlBaseConnector.get_num_new_matched_tokens"]
    assert f"{nixl}.connector.NixlPullConnector.start_load_kv" in _anchors(view, "start load")
    assert f"{nixl}.connector.NixlBaseConnector.get_transfer_results" in _anchors(view, "report")
    assert f"{nixl}.connector.NixlBaseConnector.get_finished" not in view
    assert not [n for n in view if "Push" in n]
    notes = {n: d["label"] for n, d in view.nodes(data=True) if "<handover" in n}
    worker = [n for n, label in notes.items() if "_recving_transfers" in label]
    assert worker, notes
    (dst,) = [v for _, v, k in view.out_edges(worker[0], data="kind") if k == "consumes"]
    assert dst.endswith("get_transfer_results")
    bridges = {(u.rpartition(".")[2], v.rpartition(".")[2], d["carrier"].rpartition(".")[2])
               for u, v, d in view.edges(data=True) if d.get("kind") == "bridge"}
    assert ("get_transfer_results", "_update_from_kv_xfer_finished", "finished_recving") in bridges
    assert ("get_transfer_results", "_handle_failed_recving", "failed_recving") in bridges


def test_pegaflow_save_story(pegaflow_analysis) -> None:
    view = _story(pegaflow_analysis, "save", "PegaKVConnector")
    assert _anchors(view, "request finished") == ["pegaflow.connector.PegaKVConnector.request_finished"]
    assert view.has_edge(f"{SCHED}._connector_finished",
                         "pegaflow.connector.PegaKVConnector.request_finished")
    assert "pegaflow.connector.PegaKVConnector.wait_for_save" in _anchors(view, "save")
    carriers = {d["carrier"].rpartition(".")[2] for *_, d in view.edges(data=True)
                if d.get("kind") == "bridge"}
    assert carriers == {"kv_connector_metadata", "finished_sending"}
    assert f"{SCHED}._free_blocks" in view


@pytest.mark.parametrize("name", ["load", "save"])
def test_real_stories_are_readable_at_1600_px(pegaflow_analysis, vllm_connectors_analysis,
                                              name) -> None:
    """PegaFlow's and NIXL's stories, drawn 1600 px wide, keep 10 px text:
    one column per stage (callers in a column of their own made PegaFlow's
    load story 3336 pt wide: 5 px text)."""
    import re
    import shutil

    from kvflowmap.render.dot import STORY_FONT, render, to_dot

    if not shutil.which("dot"):
        pytest.skip("Graphviz dot is not installed")
    for analysis, connector in ((pegaflow_analysis, "PegaKVConnector"),
                                (vllm_connectors_analysis, "NixlConnector")):
        svg = render(to_dot(_story(analysis, name, connector)), "svg").decode()
        width = float(re.search(r'<svg width="([0-9.]+)pt"', svg).group(1))
        assert int(STORY_FONT) * 1600 / width >= 10, (connector, name, width)


def test_default_flow_has_nothing_alone_and_every_hook_its_caller(pegaflow_analysis) -> None:
    from kvflowmap.graph import select

    view = select.flow_view(pegaflow_analysis.graph)
    assert not [n for n in view if view.degree(n) == 0]
    hooks = [n for n, d in view.nodes(data=True) if d.get("implements")]
    assert "pegaflow.connector.PegaKVConnector.register_kv_caches" in hooks
    # each implementation is reached from its base hook, which vLLM calls
    for n in hooks:
        base = view.nodes[n]["implements"]
        assert view.has_edge(base, n), n
        assert any(k == "call" for *_, k in view.in_edges(base, data="kind")), base
    # a base hook is nobody's connector: MultiConnector forwarding to it made it
    # MultiConnector's, and the flow dropped save_kv_layer's and take_events' bases
    base = pegaflow_analysis.linker.protocol.base_class
    assert f"{base}.save_kv_layer" in view and f"{base}.take_events" in view


@pytest.fixture(scope="module")
def lmcache_analysis(vllm_root, lmcache_root):
    from kvflowmap.api import Request, analyse

    from tests.integration.conftest import release_cache_dir

    return analyse(Request(sources=[str(lmcache_root / "lmcache")],
                           release_roots=[(vllm_root, "vllm 0.33.0")],
                           cache_dir=release_cache_dir()))


@pytest.mark.parametrize("which", ["pegaflow", "nixl", "lmcache"])
def test_real_flow_picture_text_at_1600_px(request, which) -> None:
    """The default flow picture of PegaFlow 0.25.1, vLLM 0.33.0's NIXL
    connector and LMCache 0.5.6, drawn 1600 px wide: all its text (nodes,
    bridge labels, cluster titles, legend) 10 px or more. Bridge labels are
    xlabels (an edge label took a rank of its own) and long names wrap at
    their underscores: PegaFlow's flow 2492 -> 1905 pt wide, NIXL's 2672 ->
    2013, LMCache's 2411 -> 1723 (14 pt node text 9.0/8.4/9.3 -> 11.8/11.1/13.0
    px; the smallest, the legend's, 10 pt at 6.4/6.0/6.6 px -> 13 pt at
    10.9/10.3/12.1 px), with the same nodes."""
    import re
    import shutil

    from kvflowmap.graph import select
    from kvflowmap.render.dot import render, to_dot

    if not shutil.which("dot"):
        pytest.skip("Graphviz dot is not installed")
    analysis, connectors = {
        "pegaflow": ("pegaflow_analysis", []),
        "nixl": ("vllm_connectors_analysis", ["NixlConnector"]),
        "lmcache": ("lmcache_analysis", []),
    }[which]
    view = select.flow_view(request.getfixturevalue(analysis).graph, connectors=connectors)
    # what a connector engineer looks for is still drawn
    carriers = {d["carrier"].rpartition(".")[2] for *_, d in view.edges(data=True)
                if d.get("kind") == "bridge"}
    assert {"finished_recving", "finished_sending", "kv_connector_metadata"} <= carriers, carriers
    assert any(n.endswith(".get_transfer_results") for n in view)
    svg = render(to_dot(view), "svg").decode()
    assert svg.count('class="node"') >= len(view)
    width = float(re.search(r'<svg width="([0-9.]+)pt"', svg).group(1))
    smallest = min(float(x) for x in re.findall(r'font-size="([0-9.]+)"', svg))
    assert smallest * 1600 / width >= 10, (which, width, smallest)
