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
