"""Story pictures (``graph --view load|save``) on the minivllm fixture and on
small connectors written here, with the shipped stub vLLM as context."""

from __future__ import annotations

import networkx as nx
import pytest
from click.testing import CliRunner

from kvflowmap.cli import cli
from kvflowmap.graph import story
from kvflowmap.graph.select import SelectError
from kvflowmap.nav.statelinks import with_state_links
from kvflowmap.render.dot import to_dot
from tests.navdocs_support import MINIVLLM, minivllm_analysis

BASE = "vllm.distributed.kv_transfer.kv_connector.v1.base.KVConnectorBase_V1"
SCHED = "vllm.v1.core.sched.scheduler.Scheduler"
MINI = "miniflow.connector.MiniKVConnector"


def _story(name: str, analysis=None) -> nx.MultiDiGraph:
    a = analysis or minivllm_analysis()
    proto = a.linker.protocol
    return story.story_view(a.graph, proto.views[name], proto.base_class,
                            state=with_state_links(a.linker))


def _stage(view: nx.MultiDiGraph, label: str) -> dict:
    return next(s for s in view.graph["stages"] if s["label"] == label)


def test_load_story_has_the_protocol_stages_in_order() -> None:
    view = _story("load")
    labels = [s["label"] for s in view.graph["stages"]]
    assert labels == ["probe", "alloc", "metadata", "start load", "report", "promote"]
    assert _stage(view, "probe")["anchors"] == [f"{MINI}.get_num_new_matched_tokens"]
    assert f"{MINI}.start_load_kv" in _stage(view, "start load")["anchors"]
    assert f"{SCHED}._update_from_kv_xfer_finished" in _stage(view, "promote")["anchors"]


def test_hooks_are_drawn_with_their_vllm_callers() -> None:
    view = _story("load")
    calls = {(u, v): d for u, v, d in view.edges(data=True) if d.get("via")}
    d = calls[(f"{SCHED}.schedule", f"{MINI}.get_num_new_matched_tokens")]
    assert d["via"] == f"{BASE}.get_num_new_matched_tokens" and d["line"]
    # the connector does not override get_transfer_results: vLLM's default
    # runs and calls the connector's get_finished
    assert (f"{BASE}.get_transfer_results", f"{MINI}.get_finished") in calls
    callers = {u for u, _, k in view.in_edges(f"{BASE}.get_transfer_results", data="kind")
               if k == "call"}
    assert callers and all(u.startswith("vllm.v1.worker.") for u in callers), callers


def test_stories_draw_only_their_carriers() -> None:
    def carriers(view: nx.MultiDiGraph) -> set[str]:
        return {d["carrier"].rpartition(".")[2] for *_, d in view.edges(data=True)
                if d.get("kind") == "bridge"}

    load, save = _story("load"), _story("save")
    assert "finished_recving" in carriers(load) and "finished_sending" not in carriers(load)
    assert "finished_sending" in carriers(save) and "finished_recving" not in carriers(save)


def test_nothing_floats_alone_but_a_hook_vllm_has_no_caller_for() -> None:
    a = minivllm_analysis()
    for name in ("load", "save"):
        view = _story(name, a)
        alone = [n for n in view if view.degree(n) == 0]
        # the stub vLLM has no attention layer calling the per-layer hooks
        assert all(a.graph.nodes[n].get("implements") and not any(
            k == "call" for *_, k in a.graph.in_edges(a.graph.nodes[n]["implements"],
                                                         data="kind")) for n in alone), alone


def test_a_handover_through_request_keyed_state_is_drawn_between_stages() -> None:
    view = _story("load")
    notes = {d["label"]: n for n, d in view.nodes(data=True) if "<handover" in n}
    # the metadata built with keyword arguments carries the ids to the worker
    meta = notes["MiniConnectorMetadata\nloads\nsaves"]
    assert [u for u, _, k in view.in_edges(meta, data="kind") if k == "produces"] == \
        ["miniflow.connector.scheduler.SchedulerConnector.build_connector_meta"]
    note = notes["SchedulerConnector\n_pending_loads"]
    (src,) = [u for u, _, k in view.in_edges(note, data="kind") if k == "produces"]
    (dst,) = [v for _, v, k in view.out_edges(note, data="kind") if k == "consumes"]
    assert src.endswith("SchedulerConnector.update_state_after_alloc")
    assert dst.endswith("SchedulerConnector.build_connector_meta")


def test_story_dot_puts_each_stage_in_one_column_in_order() -> None:
    view = _story("load")
    dot = to_dot(view)
    assert dot == to_dot(_story("load"))
    (probe,) = [line for line in dot.splitlines() if line.startswith('  {rank="same"; "stage:0";')]
    assert f'"{MINI}.get_num_new_matched_tokens";' in probe
    assert '"stage:0" -> "stage:1" [style="invis"' in dot
    assert "subgraph cluster_stages" in dot
    # a stage's callers and delegates share its column (the lanes stack them):
    # the picture is as many columns wide as the story has stages
    assert f'"{SCHED}.schedule";' in probe
    assert 'label="connector MiniKVConnector"' in dot
    (last,) = [line for line in dot.splitlines()
               if line.startswith(f'  {{rank="same"; "stage:{len(view.graph["stages"]) - 1}";')]
    assert '"legend:edges";' in last  # the legend takes no column of its own
    assert 'fontsize="14", height="0.35"' in dot


def test_story_text_is_readable_at_1600_px(tmp_path) -> None:
    """Text of at least 10 px when the story SVG is shown 1600 px wide (at
    14 pt, the picture is at most ~2200 pt wide); one column per stage."""
    import re
    import shutil

    import pytest

    from kvflowmap.render.dot import render

    if not shutil.which("dot"):
        pytest.skip("Graphviz dot is not installed")
    svg = render(to_dot(_story("load")), "svg").decode()
    width = float(re.search(r'<svg width="([0-9.]+)pt"', svg).group(1))
    assert 14 * 4 / 3 * 1600 / (width * 4 / 3) >= 10


SPLIT_CONNECTOR = {
    "splitconn/__init__.py": "",
    "splitconn/conn.py": '''
        from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1

        class SplitConnector(KVConnectorBase_V1):
            def get_num_new_matched_tokens(self, request, num_computed_tokens):
                return 0, False

            def get_finished(self, finished_req_ids):
                return None, None

            def get_transfer_results(self, finished_req_ids):
                return super().get_transfer_results(finished_req_ids)
    ''',
}


def test_a_hook_reached_through_super_is_drawn_with_the_default(tree) -> None:
    from kvflowmap.api import Request, analyse
    from kvflowmap.check.stubs import stub_root

    root = tree(SPLIT_CONNECTOR)
    a = analyse(Request(sources=[str(root / "splitconn")], context=[str(stub_root())],
                        use_cache=False))
    view = _story("load", a)
    assert "splitconn.conn.SplitConnector.get_transfer_results" in view
    # the override calls the base default through super(), and the default
    # calls get_finished: that is the way, not a caller vLLM has
    assert view.has_edge("splitconn.conn.SplitConnector.get_transfer_results",
                         f"{BASE}.get_transfer_results")
    assert view.has_edge(f"{BASE}.get_transfer_results", "splitconn.conn.SplitConnector.get_finished")


def test_a_hook_vllm_never_calls_for_this_connector_is_not_drawn(tree) -> None:
    from kvflowmap.api import Request, analyse
    from kvflowmap.check.stubs import stub_root

    files = dict(SPLIT_CONNECTOR)
    files["splitconn/conn.py"] = files["splitconn/conn.py"].replace(
        "return super().get_transfer_results(finished_req_ids)", "return None")
    root = tree(files)
    a = analyse(Request(sources=[str(root / "splitconn")], context=[str(stub_root())],
                        use_cache=False))
    view = _story("load", a)
    # vLLM calls get_transfer_results, which this connector overrides without
    # calling the base default: its get_finished never runs (NIXL's in vLLM 0.33)
    assert "splitconn.conn.SplitConnector.get_transfer_results" in view
    assert "splitconn.conn.SplitConnector.get_finished" not in view


def test_story_without_a_connector_says_so(tree) -> None:
    from kvflowmap.api import Request, analyse
    from kvflowmap.check.stubs import stub_root

    root = tree({"plain/__init__.py": "def f():\n    return 1\n"})
    a = analyse(Request(sources=[str(root / "plain")], context=[str(stub_root())],
                        use_cache=False))
    with pytest.raises(SelectError, match="no connector class"):
        _story("load", a)


def test_cli_view_errors_name_the_views() -> None:
    runner = CliRunner()
    from kvflowmap.check.stubs import stub_root

    args = ["graph", str(MINIVLLM), "--context", str(stub_root()), "--format", "dot"]
    res = runner.invoke(cli, [*args, "--view", "nope"])
    assert res.exit_code == 2 and "all, load, save" in res.output
    res = runner.invoke(cli, [*args, "--view", "load", "--focus", "get_finished"])
    assert res.exit_code == 2 and "does not combine" in res.output
    res = runner.invoke(cli, [*args, "--view", "save"])
    assert res.exit_code == 0, res.output
    assert 'label="1. request finished"' in res.output


DECLARED_BASE_CONNECTOR = {
    "declconn/__init__.py": "",
    "declconn/conn.py": '''
        from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


        class BaseHelper:
            def __init__(self):
                self._ready = {}

            def update_state_after_alloc(self, request, blocks, num_external_tokens):
                raise NotImplementedError


        class PullHelper(BaseHelper):
            def __init__(self):
                super().__init__()

            def update_state_after_alloc(self, request, blocks, num_external_tokens):
                self._ready[request.request_id] = blocks

            def build_connector_meta(self, scheduler_output):
                return list(self._ready.pop(r) for r in list(self._ready))


        class PushHelper(BaseHelper):
            def __init__(self):
                super().__init__()

            def update_state_after_alloc(self, request, blocks, num_external_tokens):
                self._ready[request.request_id] = None


        class BaseConn(KVConnectorBase_V1):
            def __init__(self, vllm_config, role):
                self.helper: BaseHelper | None = None

            def get_num_new_matched_tokens(self, request, num_computed_tokens):
                return 0, False

            def update_state_after_alloc(self, request, blocks, num_external_tokens):
                return self.helper.update_state_after_alloc(request, blocks, num_external_tokens)


        class PullConn(BaseConn):
            def __init__(self, vllm_config, role):
                super().__init__(vllm_config, role)
                self.helper = PullHelper()


        class PushConn(BaseConn):
            def __init__(self, vllm_config, role):
                super().__init__(vllm_config, role)
                self.helper = PushHelper()
    ''',
}


def test_a_delegate_declared_as_a_base_is_drawn_as_the_override_that_runs(tree) -> None:
    """NIXL's ``self.connector_scheduler`` is declared a
    ``NixlBaseConnectorScheduler`` (whose hooks raise NotImplementedError);
    the Pull connector builds a ``NixlPullConnectorScheduler``: its override
    is the delegate drawn, in the connector's lane, never the Push one's."""
    from kvflowmap.api import Request, analyse
    from kvflowmap.check.stubs import stub_root

    root = tree(DECLARED_BASE_CONNECTOR)
    a = analyse(Request(sources=[str(root / "declconn")], context=[str(stub_root())],
                        use_cache=False))
    proto = a.linker.protocol
    view = story.story_view(a.graph, proto.views["load"], proto.base_class,
                            connectors=["PullConn"], state=with_state_links(a.linker))
    hook = "declconn.conn.BaseConn.update_state_after_alloc"
    pull = "declconn.conn.PullHelper.update_state_after_alloc"
    assert hook in view and pull in view
    assert "declconn.conn.BaseHelper.update_state_after_alloc" not in view
    assert not [n for n in view if "Push" in n]
    (edge,) = [d for _, v, d in view.out_edges(hook, data=True) if v == pull]
    assert edge["kind"] == "call" and edge["through"] == "declconn.conn.BaseHelper.update_state_after_alloc"
    assert edge["line"]
    assert view.nodes[pull]["package"] == "connector PullConn"
    assert 'named declconn.conn.BaseHelper.update_state_after_alloc' in to_dot(view)


def test_a_call_through_a_hook_is_one_edge() -> None:
    """vLLM's worker calls the base default ``get_transfer_results`` (a stage's
    hook, and the way to the connector's ``get_finished``): one edge, not a
    plain call and a hook call side by side."""
    view = _story("load")
    into = [u for u, _, k in view.in_edges(f"{BASE}.get_transfer_results", data="kind")
            if k == "call"]
    assert into and len(into) == len(set(into)), into
