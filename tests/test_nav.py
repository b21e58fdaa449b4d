"""``where``, ``path`` and ``states`` on the minivllm fixture: golden files
and the behaviour around them (ambiguity, no path, CLI exit codes)."""

from __future__ import annotations

import json

import pytest

from kvflowmap.check.stubs import stub_root
from kvflowmap.cli import main
from kvflowmap.graph.select import SelectError
from kvflowmap.nav import paths, states, where_render
from kvflowmap.nav.where import Ambiguous, WhereResult, where

try:  # tests/ may or may not be a package
    from tests.navdocs_support import MINIVLLM, assert_golden, minivllm_analysis
except ImportError:
    from navdocs_support import MINIVLLM, assert_golden, minivllm_analysis

FIELD = "vllm.v1.outputs.KVConnectorOutput.finished_recving"
STATE = "vllm.v1.request.RequestStatus.WAITING_FOR_REMOTE_KVS"


@pytest.fixture(scope="module")
def g():
    return minivllm_analysis().graph


@pytest.mark.parametrize("name,fmt,golden", [
    ("get_finished", "text", "where_get_finished.txt"),
    ("WorkerConnector.get_finished", "text", "where_worker_get_finished.txt"),
    ("finished_recving", "text", "where_finished_recving.txt"),
    ("finished_recving", "json", "where_finished_recving.json"),
    ("WAITING_FOR_REMOTE_KVS", "text", "where_waiting_for_remote_kvs.txt"),
    ("MiniKVConnector", "text", "where_minikvconnector.txt"),
])
def test_where_golden(g, name: str, fmt: str, golden: str) -> None:
    result = where(g, name)
    out = where_render.where_json(result) if fmt == "json" else where_render.where_text(result)
    assert_golden(golden, out)


def test_where_short_names_and_relations(g) -> None:
    field = where(g, "finished_recving")
    assert isinstance(field, WhereResult) and field.node == FIELD and field.kind == "field"
    assert "vllm.v1.core.sched.scheduler.Scheduler._update_from_kv_xfer_finished" in {
        s.node for s in field.get("consumers")}
    assert field.get("producers") and all(s.line > 0 for s in field.get("producers"))
    state = where(g, "WAITING_FOR_REMOTE_KVS")
    assert isinstance(state, WhereResult)
    assert {s.node for s in state.get("setters")} == {
        "vllm.v1.core.sched.scheduler.Scheduler.schedule"}
    assert "vllm.v1.core.sched.scheduler.Scheduler._handle_blocked_waiting_request" in {
        s.node for s in state.get("readers")}


def test_where_ambiguous_lists_fqns(g) -> None:
    result = where(g, "get_finished")
    assert isinstance(result, Ambiguous)
    assert [c.node for c in result.candidates] == [
        "miniflow.connector.MiniKVConnector.get_finished",
        "miniflow.connector.worker.WorkerConnector.get_finished",
        "vllm.distributed.kv_transfer.kv_connector.v1.base.KVConnectorBase_V1.get_finished"]


def test_where_unknown_name_suggests(g) -> None:
    with pytest.raises(SelectError, match="did you mean"):
        where(g, "get_finishd")


def test_path_golden(g) -> None:
    result = paths.find_paths(g, "Scheduler.schedule", "WorkerConnector.start_load_kv", 3)
    assert isinstance(result, paths.PathResult) and len(result.paths) == 3
    lengths = [len(p) for p in result.paths]
    assert lengths == sorted(lengths)
    assert all(s.line > 0 and s.file for p in result.paths for s in p)
    assert_golden("path_schedule_start_load.txt", paths.paths_text(result))
    assert_golden("path_schedule_start_load.json", paths.paths_json(result))


def test_path_calls_only_crosses_by_bridge(g) -> None:
    result = paths.find_paths(g, "Scheduler.schedule", "WorkerConnector.start_load_kv", 5,
                              paths.CONTROL_KINDS)
    assert isinstance(result, paths.PathResult)
    assert all(s.kind in paths.CONTROL_KINDS for p in result.paths for s in p)
    assert any(s.kind == "bridge" for s in result.paths[0])


def test_no_path_names_nearest(g) -> None:
    result = paths.find_paths(g, "WorkerConnector.start_load_kv", "get_num_new_matched_tokens")
    assert isinstance(result, paths.NoPath)
    assert result.nearest and result.reachable >= len(result.nearest)
    assert "miniflow.connector.worker.WorkerConnector.start_load_kv" not in dict(result.nearest)
    assert "vllm.v1.core.sched.scheduler.Scheduler.schedule" in result.into_dst
    assert_golden("path_none.txt", paths.paths_text(result))


QUESTIONS = [("Scheduler.schedule", "WorkerConnector.start_load_kv"),
             ("WorkerConnector.start_load_kv", "get_num_new_matched_tokens"),
             ("get_num_new_matched_tokens", "WorkerConnector.start_load_kv"),
             ("WorkerConnector.get_finished", "Scheduler.update_from_output"),
             ("Scheduler.update_from_output", "WorkerConnector.get_finished")]


@pytest.mark.parametrize("a,b", QUESTIONS)
def test_paths_are_distinct_and_the_other_way_hint_holds(g, a: str, b: str) -> None:
    result = paths.find_paths(g, a, b)
    if isinstance(result, paths.PathResult):
        nodes = [tuple(s.dst for s in p) for p in result.paths]
        assert len(nodes) == len(set(nodes))  # one path per node sequence
    elif result.reverse:  # "a path exists the other way" is a path the same search finds
        assert isinstance(paths.find_paths(g, b, a), paths.PathResult)


def test_states_outputs_golden() -> None:
    sm = states.state_machine(minivllm_analysis().linker)
    assert_golden("states.txt", states.states_text(sm))
    assert_golden("states.json", states.states_json(sm))
    assert_golden("states.mmd", states.states_mermaid(sm))
    assert_golden("states.dot", states.states_dot(sm))


@pytest.mark.parametrize("width", [60, 100, 140, 220])
def test_states_text_fits_the_terminal(width: int) -> None:
    sm = states.state_machine(minivllm_analysis().linker)
    text = states.states_text(sm, width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    for r in sm.rows:  # every transition is still there, with where it happens
        assert r.to_state in text and f":{r.line}" in text


def test_shorten_guard_keeps_the_conditions_nearest_the_assignment() -> None:
    guard = "not preempted and budget > 0 and not (blocks is None) and load_kv_async"
    assert states.shorten_guard(guard, 200) == guard
    short = states.shorten_guard(guard, 45)
    assert short == "… and not (blocks is None) and load_kv_async"
    assert len(short) <= 45
    assert states.shorten_guard("x" * 50, 10) == "…" + "x" * 9


def test_states_required_transitions() -> None:
    sm = states.state_machine(minivllm_analysis().linker)
    found = {(r.from_states, r.to_state, r.qualname) for r in sm.rows}
    blocked = "Scheduler._handle_blocked_waiting_request"
    assert (("WAITING_FOR_REMOTE_KVS",), "WAITING", blocked) in found
    assert (("WAITING_FOR_REMOTE_KVS",), "PREEMPTED", blocked) in found
    assert (("*",), "WAITING_FOR_REMOTE_KVS", "Scheduler.schedule") in found
    assert (("RUNNING",), "PREEMPTED", "Scheduler._preempt_request") in found
    guards = {r.to_state: r.guard for r in sm.rows if r.qualname == blocked}
    assert "finished_recving" in guards["WAITING"] and "num_preemptions" in guards["PREEMPTED"]


def _cli(*args: str) -> list[str]:
    return [*args, str(MINIVLLM), "--context", str(stub_root()), "--no-cache", "-q"]


def test_cli_exit_codes(capsys) -> None:
    assert main(["where", *_cli("WorkerConnector.get_finished")]) == 0
    assert "called by (1)" in capsys.readouterr().out
    assert main(["where", *_cli("get_finished")]) == 1
    assert main(["where", *_cli("nothing_like_this")]) == 2
    assert main(["path", *_cli("Scheduler.schedule", "start_load_kv"), "--max", "1"]) == 0
    assert capsys.readouterr().out.count("path ") == 1
    assert main(["path", *_cli("WorkerConnector.start_load_kv", "Scheduler.schedule")]) == 1


def test_cli_where_paths_are_relative_to_the_import_root(capsys) -> None:
    """``defined at`` and the sites name files from their import root, as
    ``check`` does (both are the indexed ``SourceFile.rel``), whether SRC is
    the import root or the package directory; never this machine's path."""
    for src in (MINIVLLM, MINIVLLM / "miniflow"):
        assert main(["where", "WorkerConnector.get_finished", str(src),
                     "--context", str(stub_root()), "--no-cache", "-q"]) == 0
        out = capsys.readouterr().out
        assert "  defined at miniflow/connector/worker.py:" in out, out
        assert str(MINIVLLM) not in out and str(stub_root()) not in out


def test_cli_where_and_path_write_out(capsys, tmp_path) -> None:
    """``-o/--out`` as in ``graph``, ``states``, ``lifecycle`` and ``check``."""
    w, p = tmp_path / "where.txt", tmp_path / "path.json"
    assert main(["where", *_cli("WorkerConnector.get_finished"), "-o", str(w)]) == 0
    assert main(["path", *_cli("Scheduler.schedule", "start_load_kv"), "--out", str(p),
                 "-f", "json"]) == 0
    assert capsys.readouterr().out == ""
    assert "called by (1)" in w.read_text() and json.loads(p.read_text())["paths"]


def test_cli_out_suffix_decides_the_format(capsys, tmp_path) -> None:
    """``states --out st.svg`` writes SVG, ``--out st.json`` JSON; a suffix
    that names no format is refused before the analysis (never written as
    some default), in ``graph`` too."""
    svg, js = tmp_path / "st.svg", tmp_path / "st.json"
    assert main(["states", *_cli(), "--out", str(svg)]) == 0
    assert svg.read_text().lstrip().startswith("<?xml")
    assert main(["states", *_cli(), "--out", str(js)]) == 0
    assert "enums" in json.loads(js.read_text())
    for cmd in ("states", "graph"):
        bad = tmp_path / f"{cmd}.txt2"
        assert main([cmd, *_cli(), "--out", str(bad)]) == 2
        assert "cannot tell the format" in capsys.readouterr().err and not bad.exists()


def test_cli_states_formats(capsys, tmp_path) -> None:
    assert main(["states", *_cli(), "-f", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["transitions"]) == 7
    # ``request.status = finished_status``: the state a caller passes is a transition
    passed = [r for r in data["transitions"] if "finished_status = RequestStatus." in r["guard"]]
    assert [r["to_state"] for r in passed] == ["FINISHED_STOPPED"]
    assert main(["states", *_cli(), "-f", "mermaid"]) == 0
    assert capsys.readouterr().out.startswith("stateDiagram-v2")
    out = tmp_path / "s.svg"
    assert main(["states", *_cli(), "-f", "svg", "-o", str(out)]) == 0
    assert b"<svg" in out.read_bytes() and b"_handle_blocked_waiting_request" in out.read_bytes()
    assert main(["states", *_cli(), "-f", "svg"]) == 2


def test_where_an_attribute_the_graph_does_not_follow_lists_its_uses(tmp_path) -> None:
    """A ``self`` attribute with no request ids the graph follows (only
    removed from, or keyed by something else) is no node; ``where`` still
    answers with where the methods write it, take out of it and read it."""
    from kvflowmap.api import Request, analyse

    pkg = tmp_path / "attrs"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "class Engine:\n"
        "    def __init__(self):\n"
        "        self.sent = {}\n"
        "\n"
        "    def remember(self, tensor_id):\n"
        "        self.sent[tensor_id.split('#')[0]] = tensor_id\n"
        "\n"
        "    def get_finished(self, finished_req_ids):\n"
        "        for rid in finished_req_ids:\n"
        "            self.sent.pop(rid, None)\n"
        "        return None, None\n")
    an = analyse(Request(sources=[str(pkg)], context=[str(stub_root())], use_cache=False))
    result = where(an.graph, "Engine.sent", an.linker.model, an.linker.classes)
    assert isinstance(result, WhereResult) and result.kind == "instance attribute"
    assert result.line == 3
    assert [(s.line, s.kind) for s in result.get("writers")] == [(3, "assign"), (6, "setitem")]
    assert [(s.line, s.kind) for s in result.get("removers")] == [(10, "pop")]
    assert "taken out of by (1)" in where_render.where_text(result)
