"""Values through the program on real code: per-class attribute types (the
NIXL pull/push worker split) and carrier fields produced through returns
(facade -> worker -> helper), on vllm 0.33.0 and pegaflow-llm 0.25.1."""

from __future__ import annotations

import pytest

from kvflowmap.api import Analysis
from kvflowmap.nav.where import WhereResult, where

pytestmark = pytest.mark.integration

NIXL = "vllm.distributed.kv_transfer.kv_connector.v1.nixl"
RECV = "vllm.v1.outputs.KVConnectorOutput.finished_recving"


def _callees(g, fqn: str) -> set[str]:
    return {v for _, v, k in g.out_edges(fqn, data="kind") if k == "call"}


def test_nixl_pull_and_push_connectors_call_their_own_worker(
        vllm_connectors_analysis: Analysis) -> None:
    g = vllm_connectors_analysis.graph
    pull = _callees(g, f"{NIXL}.connector.NixlPullConnector.start_load_kv")
    push = _callees(g, f"{NIXL}.connector.NixlPushConnector.start_load_kv")
    assert f"{NIXL}.pull_worker.NixlPullConnectorWorker.start_load_kv" in pull
    assert f"{NIXL}.push_worker.NixlPushConnectorWorker.start_load_kv" not in pull
    assert f"{NIXL}.push_worker.NixlPushConnectorWorker.start_load_kv" in push
    assert f"{NIXL}.pull_worker.NixlPullConnectorWorker.start_load_kv" not in push


def _producers(analysis: Analysis) -> set[str]:
    found = where(analysis.graph, "finished_recving")
    assert isinstance(found, WhereResult)
    return {s.node for s in found.get("producers")}


def test_nixl_produces_finished_recving_through_get_transfer_results(
        vllm_connectors_analysis: Analysis) -> None:
    found = _producers(vllm_connectors_analysis)
    assert f"{NIXL}.connector.NixlBaseConnector.get_transfer_results" in found
    assert f"{NIXL}.base_worker.NixlBaseConnectorWorker.get_transfer_results" in found
    # vLLM 0.33.0 calls get_transfer_results, which NIXL overrides: its
    # get_finished is never what fills the field
    assert f"{NIXL}.connector.NixlBaseConnector.get_finished" not in found


def test_pegaflow_facade_and_worker_produce_finished_recving(
        pegaflow_analysis: Analysis) -> None:
    found = _producers(pegaflow_analysis)
    assert {"pegaflow.connector.PegaKVConnector.get_finished",
            "pegaflow.connector.worker.WorkerConnector.get_finished",
            "pegaflow.nixl_connector.base_worker.NixlBaseConnectorWorker._pop_done_transfers",
            } <= found


def test_states_follow_a_status_passed_as_an_argument(pegaflow_analysis: Analysis) -> None:
    from kvflowmap.nav.states import state_machine

    rows = state_machine(pegaflow_analysis.linker).rows
    finish = "vllm.v1.core.sched.scheduler.Scheduler.finish_requests"
    passed = {r.to_state: r.guard for r in rows if r.function == finish}
    # ``request.status = finished_status``: the engine's abort passes
    # FINISHED_ABORTED, the failed-load path FINISHED_ERROR
    assert {"FINISHED_ABORTED", "FINISHED_ERROR"} <= set(passed)
    assert "finished_status = RequestStatus.FINISHED_ERROR" in passed["FINISHED_ERROR"]


def test_nixl_read_blocks_reaches_the_scheduler_through_its_own_state(
        vllm_connectors_analysis: Analysis) -> None:
    """``_read_blocks`` stores the transfer in ``self._recving_transfers``;
    the base worker's ``get_transfer_results`` (same object) pops the done
    ones and returns them to vLLM. The Push worker (a sibling) reads no
    state the Pull worker stored."""
    from kvflowmap.nav import paths
    from kvflowmap.nav.statelinks import with_state_links

    g = with_state_links(vllm_connectors_analysis.linker)
    result = paths.find_paths(g, f"{NIXL}.pull_worker.NixlPullConnectorWorker._read_blocks",
                              "vllm.v1.core.sched.scheduler.Scheduler._update_from_kv_xfer_finished")
    assert isinstance(result, paths.PathResult)
    first = result.paths[0]
    assert first[0].dst == f"{NIXL}.pull_worker.NixlPullConnectorWorker._recving_transfers"
    assert first[0].file.endswith("nixl/pull_worker.py") and first[0].kind == "produces"
    assert first[1].dst == f"{NIXL}.base_worker.NixlBaseConnectorWorker.get_transfer_results"
    found = where(g, "NixlPullConnectorWorker._recving_transfers")
    assert isinstance(found, WhereResult)
    readers = {s.node for s in found.get("consumers")}
    assert f"{NIXL}.base_worker.NixlBaseConnectorWorker.get_transfer_results" in readers
    assert not any(".push_worker." in r or r.endswith(".__init__") for r in readers)


def test_nixl_concrete_connectors_run_the_inherited_hooks(
        vllm_connectors_analysis: Analysis) -> None:
    """NIXL's Pull and Push connectors inherit twelve hooks from
    ``NixlBaseConnector``: they count, the picture of the Pull connector draws
    them with its own ``start_load_kv``, the metadata its inherited
    ``build_connector_meta`` builds is bridged to each subclass's own
    ``start_load_kv`` (never the abstract base's), and ``finished_sending``
    is a bridge of its own next to ``finished_recving``."""
    from kvflowmap.graph.select import choose_connectors, flow_view

    g = vllm_connectors_analysis.graph
    pull, push = f"{NIXL}.connector.NixlPullConnector", f"{NIXL}.connector.NixlPushConnector"
    base = f"{NIXL}.connector.NixlBaseConnector"
    assert g.nodes[pull]["connector_hooks"] >= 12
    assert pull in g.nodes[f"{base}.get_transfer_results"]["connectors"]
    meta = {v for _, v, d in g.out_edges(f"{base}.build_connector_meta", data=True)
            if d.get("kind") == "bridge"}
    assert {f"{pull}.start_load_kv", f"{push}.start_load_kv"} <= meta
    assert "vllm.distributed.kv_transfer.kv_connector.v1.base.KVConnectorBase_V1.start_load_kv" \
        not in meta
    sched = "vllm.v1.core.sched.scheduler.Scheduler._update_from_kv_xfer_finished"
    carriers = {d.get("carrier", "").rpartition(".")[2] for _, v, d in
                g.out_edges(f"{base}.get_transfer_results", data=True)
                if d.get("kind") == "bridge" and v == sched}
    assert {"finished_recving", "finished_sending"} <= carriers
    view = flow_view(g, connectors=[pull])
    assert f"{pull}.start_load_kv" in view and f"{base}.get_transfer_results" in view
    states = {n.rpartition(".")[2] for n, k in view.nodes(data="kind") if k == "state"}
    assert "WAITING_FOR_REMOTE_KVS" in states
    assert not states & {"WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR", "WAITING_FOR_STREAMING_REQ"}
    from kvflowmap.graph.select import match_nodes

    # vLLM registers the Pull connector under its alias too (``NixlConnector =
    # NixlPullConnector``); the alias designates it in where/--connector
    assert match_nodes(g, "NixlConnector") == [pull]
    nixl_only = [c for c in choose_connectors(g) if ".nixl." in c]
    assert nixl_only in ([], [pull], [push])  # never the intermediate base


def test_metadata_bridges_stay_within_one_connector(
        vllm_connectors_analysis: Analysis) -> None:
    """The metadata a connector class's scheduler side builds is bridged only
    into its own worker side (the class, a subclass, or the protocol base's
    hook it inherits), never into another connector's ``start_load_kv``."""
    g = vllm_connectors_analysis.graph
    classes = vllm_connectors_analysis.linker.classes
    base = "vllm.distributed.kv_transfer.kv_connector.v1.base.KVConnectorBase_V1"
    bridges = [(u, v) for u, v, d in g.edges(data=True) if d.get("kind") == "bridge"
               and str(d.get("carrier", "")).endswith("kv_connector_metadata")]
    assert len(bridges) > 20
    wrong = []
    for u, v in bridges:
        built_by, used_by = u.rpartition(".")[0], v.rpartition(".")[0]
        if used_by != base and built_by not in classes.mro(used_by):
            wrong.append((u, v))
    assert not wrong
    assert (f"{NIXL}.connector.NixlBaseConnector.build_connector_meta",
            f"{NIXL}.connector.NixlPullConnector.start_load_kv") in bridges


def test_failed_recving_reaches_the_scheduler_on_0_33(
        vllm_connectors_analysis: Analysis) -> None:
    """vLLM 0.33.0's ``KVConnectorOutput.failed_recving`` is a protocol carrier:
    NIXL's results reach ``Scheduler._handle_failed_recving``."""
    g = vllm_connectors_analysis.graph
    handle = "vllm.v1.core.sched.scheduler.Scheduler._handle_failed_recving"
    assert (f"{NIXL}.connector.NixlBaseConnector.get_transfer_results", handle) in {
        (u, v) for u, v, d in g.edges(data=True) if d.get("kind") == "bridge"
        and str(d.get("carrier", "")).endswith("failed_recving")}
    assert not [w for w in vllm_connectors_analysis.warnings if "failed_recving" in w]


SCHED = "vllm.v1.core.sched.scheduler.Scheduler"


def test_nixl_failed_transfer_reaches_the_invalid_blocks_handler_through_the_blocks(
        vllm_connectors_analysis: Analysis) -> None:
    """A failed transfer's id goes into ``_recv_failures``; ``get_transfer_results``
    walks those ids (``for req_id in tuple(self._recv_failures): ...
    failed_recv_reqs.add(req_id)``) and puts their blocks into
    ``_invalid_block_ids``, which ``get_block_ids_with_load_errors`` hands to
    ``invalid_block_ids``; ``update_from_output`` gives that field to
    ``_handle_invalid_blocks`` only. The ``failed_recving`` it reads goes to
    ``_handle_failed_recving``, never to ``_handle_invalid_blocks`` (checked
    against the source, NIXL of vLLM 0.33.0)."""
    from kvflowmap.nav import paths
    from kvflowmap.nav.statelinks import with_state_links

    g = with_state_links(vllm_connectors_analysis.linker)
    result = paths.find_paths(g, f"{NIXL}.base_worker.NixlBaseConnectorWorker._handle_failed_transfer",
                              f"{SCHED}._handle_invalid_blocks", max_paths=3)
    assert isinstance(result, paths.PathResult)
    # the shortest ways go through the blocks; a longer one may go through
    # finished_recving (NIXL reports a failed request finished too) and the
    # scheduler's own set of those ids, never through failed_recving
    shortest = min(len(p) for p in result.paths)
    for p in result.paths:
        fields = [s.dst for s in p if s.kind == "produces"]
        assert "vllm.v1.outputs.KVConnectorOutput.failed_recving" not in fields
        if len(p) == shortest:
            assert "vllm.v1.outputs.KVConnectorOutput.invalid_block_ids" in fields
            assert any(s.dst.endswith("._invalid_block_ids") for s in p)
    failed = paths.find_paths(g, f"{NIXL}.base_worker.NixlBaseConnectorWorker.get_transfer_results",
                              f"{SCHED}._handle_failed_recving", max_paths=5)
    assert isinstance(failed, paths.PathResult)
    assert all("vllm.v1.outputs.KVConnectorOutput.invalid_block_ids" not in [s.dst for s in p]
               for p in failed.paths)


def test_a_question_about_an_inherited_method_stays_on_that_class(
        vllm_connectors_analysis: Analysis) -> None:
    """``NixlPullConnectorWorker.get_finished`` is the base worker's; asked
    under the Pull worker's name, no path goes through the Push worker's
    state (each connector builds its own worker)."""
    from kvflowmap.nav import paths
    from kvflowmap.nav.statelinks import with_state_links

    g = with_state_links(vllm_connectors_analysis.linker)
    result = paths.find_paths(g, "NixlPullConnectorWorker.get_finished",
                              f"{SCHED}._update_from_kv_xfer_finished", max_paths=5)
    if isinstance(result, paths.PathResult):
        assert not any(".push_worker." in s.dst or ".push_scheduler." in s.dst
                       for p in result.paths for s in p)
    base = paths.find_paths(g, "NixlBaseConnectorWorker.get_transfer_results",
                            f"{SCHED}._update_from_kv_xfer_finished", max_paths=3)
    assert isinstance(base, paths.PathResult)  # the base's own name constrains nothing


def test_ids_a_helper_hands_back_reach_what_its_caller_does_with_them(
        vllm_connectors_analysis: Analysis) -> None:
    """``_pop_done_transfers`` returns the failed ids, which
    ``get_transfer_results`` puts into ``_recv_failures`` (base_worker.py
    3199-3201) and later reports as ``failed_recving``; ``_reap_expired_send_leases``
    adds expired sends into the ``done_sending`` set it is handed, which
    ``get_transfer_results`` returns as ``finished_sending`` (3323-3327).
    Both were "no path" while values only went back through returns into
    carrier fields."""
    from kvflowmap.nav import paths
    from kvflowmap.nav.statelinks import with_state_links

    g = with_state_links(vllm_connectors_analysis.linker)
    failed = paths.find_paths(g, f"{NIXL}.base_worker.NixlBaseConnectorWorker._pop_done_transfers",
                              f"{SCHED}._handle_failed_recving", max_paths=2)
    assert isinstance(failed, paths.PathResult)
    assert failed.paths[0][0].dst.endswith("._recv_failures")
    reaped = paths.find_paths(g, f"{NIXL}.base_worker.NixlBaseConnectorWorker._reap_expired_send_leases",
                              f"{SCHED}._free_blocks", max_paths=2)
    assert isinstance(reaped, paths.PathResult)
    assert reaped.paths[0][0].dst == "vllm.v1.outputs.KVConnectorOutput.finished_sending"


def test_a_set_subtracted_from_the_reported_ones_is_no_source(
        vllm_connectors_analysis: Analysis) -> None:
    """The push worker keeps its failed WRITEs in ``_send_failures`` only to
    leave them out of what it reports (``done_pushing - self._send_failures``,
    push_worker.py:826): a failed push never reaches ``failed_recving``, so
    there is no path from the WRITE that fails (the answer went through the
    subtraction into the eviction inbox and on into another request's
    registration)."""
    from kvflowmap.nav import paths
    from kvflowmap.nav.statelinks import with_state_links

    g = with_state_links(vllm_connectors_analysis.linker)
    found = paths.find_paths(g, f"{NIXL}.push_worker.NixlPushConnectorWorker._xfer_blocks",
                             "vllm.v1.outputs.KVConnectorOutput.failed_recving", max_paths=3)
    assert not isinstance(found, paths.PathResult) or not any(
        step.dst.endswith("._evict_finished_inbox") for p in found.paths for step in p)
