"""Tests for kvflowmap.graph.select."""

from __future__ import annotations

import networkx as nx
import pytest

from kvflowmap.graph.select import (SelectError, filter_globs, find_paths, flow_view, focus,
                                    match_nodes, paths_view)

S = "vllm.v1.core.sched.scheduler.Scheduler"
W = "pegaflow.connector.worker.Worker"
C = "pegaflow.connector.Conn"
STATE = "vllm.v1.request.RequestStatus.WAITING_FOR_REMOTE_KVS"
FIELD = "vllm.v1.outputs.KVConnectorOutput.finished_recving"


def make_graph(reverse: bool = False) -> nx.MultiDiGraph:
    """A small graph: a scheduler chain, a worker chain, a bridge, a state,
    a field and some non-flow helpers."""
    flow = [f"{S}.schedule", f"{S}.probe", f"{S}.finish", f"{C}.get_finished",
            f"{W}.get_finished", f"{W}.save", STATE, FIELD]
    other = [f"{S}.helper", "vllm.utils.log", "<builtin>.len"]
    edges = [
        (f"{S}.schedule", f"{S}.probe", "call", 10),
        (f"{S}.schedule", f"{S}.probe", "call", 12),
        (f"{S}.probe", f"{C}.get_finished", "call", 20),
        (f"{C}.get_finished", f"{W}.get_finished", "call", 30),
        (f"{W}.get_finished", f"{S}.finish", "bridge", 1),
        (f"{W}.get_finished", FIELD, "produces", 31),
        (FIELD, f"{S}.finish", "consumes", 40),
        (f"{S}.schedule", STATE, "sets_state", 11),
        (f"{S}.schedule", f"{S}.helper", "call", 13),
        (f"{S}.helper", "vllm.utils.log", "call", 50),
        ("vllm.utils.log", "<builtin>.len", "call", 60),
        (f"{W}.save", f"{W}.get_finished", "call", 70),
        (f"{S}.schedule", f"{S}.finish", "call", 14),
    ]
    g = nx.MultiDiGraph(roots=[{"label": "r", "path": "/r", "subject": True}])
    kinds = {STATE: "state", FIELD: "field", "<builtin>.len": "external"}
    nodes = [(n, True) for n in flow] + [(n, False) for n in other]
    for n, is_flow in nodes[::-1 if reverse else 1]:
        side = "worker" if n.startswith(W) else "scheduler" if n.startswith(S) else None
        g.add_node(n, kind=kinds.get(n, "function"), flow=is_flow, **({"side": side} if side else {}))
    for u, v, kind, line in edges[::-1 if reverse else 1]:
        g.add_edge(u, v, kind=kind, line=line, file="f.py", root="r")
    return g


def test_match_nodes() -> None:
    g = make_graph()
    assert match_nodes(g, f"{S}.probe") == [f"{S}.probe"]
    assert match_nodes(g, "get_finished") == [f"{C}.get_finished", f"{W}.get_finished"]
    assert match_nodes(g, "Worker.get_finished") == [f"{W}.get_finished"]
    assert match_nodes(g, "finished") == []  # whole components only
    assert match_nodes(g, "len") == ["<builtin>.len"]


def test_unknown_name_lists_close_matches() -> None:
    with pytest.raises(SelectError) as err:
        focus(make_graph(), ["get_finishd"], 1, "both")
    assert "get_finishd" in str(err.value) and f"{W}.get_finished" in str(err.value)


def test_flow_view_keeps_flow_nodes_only() -> None:
    g = make_graph()
    view = flow_view(g)
    assert set(view) == {n for n, f in g.nodes(data="flow") if f}
    assert view.number_of_edges(f"{S}.schedule", f"{S}.probe") == 2
    assert not view.has_node(f"{S}.helper")
    view.nodes[STATE]["kind"] = "changed"
    assert g.nodes[STATE]["kind"] == "state"  # a copy
    assert list(view) == sorted(view)
    other = flow_view(make_graph(reverse=True))
    assert list(view.edges(data="line")) == list(other.edges(data="line"))


def test_flow_view_trims_low_priority_nodes() -> None:
    view = flow_view(make_graph(), max_nodes=5)
    # states, fields and bridge endpoints are kept first; then degree, then id
    assert set(view) == {STATE, FIELD, f"{W}.get_finished", f"{S}.finish", f"{S}.schedule"}
    assert len(flow_view(make_graph(), max_nodes=2)) == 2
    # the state ranks 4th but would have no edge left: the next connected node replaces it
    assert set(flow_view(make_graph(), max_nodes=4)) == {
        f"{W}.get_finished", f"{S}.finish", FIELD, f"{S}.schedule"}
    g = make_graph()
    g.nodes[f"{W}.save"]["hook"] = True  # degree 1, but a protocol hook
    assert f"{W}.save" in flow_view(g, max_nodes=6) and f"{W}.save" not in flow_view(make_graph(), 6)
    g = make_graph()
    g.add_edge(f"{S}.probe", f"{W}.save", kind="dispatch", line=1, file="f.py", root="r")
    assert {f"{S}.probe", f"{W}.save"} <= set(flow_view(g, max_nodes=7))


def test_focus_directions_and_depth() -> None:
    g = make_graph()
    assert set(focus(g, ["Scheduler.probe"], 0, "both")) == {f"{S}.probe"}
    assert set(focus(g, ["Scheduler.probe"], 1, "callees")) == {f"{S}.probe", f"{C}.get_finished"}
    assert set(focus(g, ["Scheduler.probe"], 1, "callers")) == {f"{S}.probe", f"{S}.schedule"}
    both = focus(g, ["Conn.get_finished"], 2, "both")
    assert set(both) == {f"{C}.get_finished", f"{S}.probe", f"{S}.schedule",
                         f"{W}.get_finished", f"{W}.save", f"{S}.finish", FIELD}
    assert both.has_edge(f"{S}.schedule", f"{S}.finish")  # induced edges kept
    with pytest.raises(SelectError, match="direction"):
        focus(g, ["probe"], 1, "up")  # type: ignore[arg-type]


def test_focus_keeps_a_node_budget_nearest_first() -> None:
    g = make_graph()
    whole = focus(g, ["Conn.get_finished"], 2, "both")
    cut = focus(g, ["Conn.get_finished"], 2, "both", max_nodes=4)
    assert len(cut) == 4 and cut.graph["cut"] == len(whole)
    assert f"{C}.get_finished" in cut
    one_hop = set(focus(g, ["Conn.get_finished"], 1, "both"))
    assert one_hop < set(cut)  # the whole first hop, then the best of the second
    assert "cut" not in focus(g, ["Conn.get_finished"], 2, "both", max_nodes=50).graph


def test_find_paths_shortest_first() -> None:
    g = make_graph()
    paths = find_paths(g, "Scheduler.schedule", "Scheduler.finish", 10)
    assert paths[0] == [f"{S}.schedule", f"{S}.finish"]
    assert [f"{S}.schedule", f"{S}.probe", f"{C}.get_finished", f"{W}.get_finished",
            f"{S}.finish"] in paths
    assert [len(p) for p in paths] == sorted(len(p) for p in paths)
    assert len(find_paths(g, "schedule", "finish", 1)) == 1
    assert find_paths(g, "finish", "schedule", 5) == []
    # two sources match: results are merged shortest first across all pairs
    assert find_paths(g, "get_finished", "Scheduler.finish", 5) == [
        [f"{W}.get_finished", f"{S}.finish"],
        [f"{C}.get_finished", f"{W}.get_finished", f"{S}.finish"],
        [f"{W}.get_finished", FIELD, f"{S}.finish"],
        [f"{C}.get_finished", f"{W}.get_finished", FIELD, f"{S}.finish"]]


def test_paths_view_union() -> None:
    g = make_graph()
    view = paths_view(g, "schedule", "Scheduler.finish", 2)
    assert set(view) == {f"{S}.schedule", f"{S}.finish", f"{W}.get_finished", FIELD,
                         f"{S}.probe", f"{C}.get_finished"} or len(view) <= 6
    assert view.has_edge(f"{S}.schedule", f"{S}.finish")
    assert not view.has_node(f"{S}.helper")
    full = paths_view(g, "schedule", "Scheduler.finish", 10)
    assert full.number_of_edges(f"{S}.schedule", f"{S}.probe") == 2  # parallel edges kept
    with pytest.raises(SelectError, match="no path"):
        paths_view(g, "Scheduler.finish", "schedule")


def test_filter_globs() -> None:
    g = make_graph()
    kept = filter_globs(g, ["vllm.*"], ["*.helper"])
    assert f"{S}.helper" not in kept and f"{S}.schedule" in kept and f"{W}.save" not in kept
    assert kept.has_edge(f"{S}.schedule", STATE)
    assert set(filter_globs(g, [], ["<builtin>.*"])) == set(g) - {"<builtin>.len"}


def test_focus_and_connector_refuse_an_ambiguous_name() -> None:
    """Two analysed nodes of one short name are listed, never merged."""
    from kvflowmap.graph.select import choose_connectors

    g = make_graph()
    hits = [n for n in g if n.endswith(".get_finished")]
    assert len(hits) > 1
    with pytest.raises(SelectError, match="names .* nodes; give one of"):
        focus(g, ["get_finished"], 1, "both")
    with pytest.raises(SelectError, match="give one of"):
        choose_connectors(g, ["get_finished"])



def test_an_inherited_member_is_found_through_the_class_mro():
    g = nx.MultiDiGraph()
    base, sub = "pkg.conn.BaseConnector", "pkg.conn.PullConnector"
    for n, kind in ((base, "class"), (sub, "class"), (f"{base}.get_finished", "function"),
                    (f"{sub}.start_load_kv", "function")):
        g.add_node(n, kind=kind)
    g.graph["mro"] = {sub: (sub, base), base: (base,)}
    assert match_nodes(g, "PullConnector.get_finished") == [f"{base}.get_finished"]
    assert match_nodes(g, "PullConnector.start_load_kv") == [f"{sub}.start_load_kv"]
    assert match_nodes(g, "PullConnector.nothing") == []
