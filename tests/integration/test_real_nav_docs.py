"""Navigation and docs on the real releases: vllm 0.33.0 + pegaflow-llm 0.25.1."""

from __future__ import annotations

import posixpath
import re

import pytest

from kvflowmap.api import Analysis
from kvflowmap.docs import DocsOptions, generate
from kvflowmap.nav import paths
from kvflowmap.nav.states import state_machine
from kvflowmap.nav.where import WhereResult, where

pytestmark = pytest.mark.integration

SCHED = "vllm.v1.core.sched.scheduler.Scheduler"
TEMPLATE = "{root}/{file}#L{line}"
LOCATION = re.compile(r"`([^`]+?\.py)#L(\d+)`")


def _source_line(analysis: Analysis, root_label: str, file: str, line: int) -> str:
    root = next(r for r in analysis.roots if r.label == root_label)
    return (root.path / file).read_text(encoding="utf-8").splitlines()[line - 1]


def test_required_transitions(pegaflow_analysis: Analysis) -> None:
    sm = state_machine(pegaflow_analysis.linker)
    rows = {(r.from_states, r.to_state, r.function): r for r in sm.rows}
    blocked = f"{SCHED}._handle_blocked_waiting_request"
    need = [(("WAITING_FOR_REMOTE_KVS",), "WAITING", blocked),
            (("WAITING_FOR_REMOTE_KVS",), "PREEMPTED", blocked),
            (("*",), "WAITING_FOR_REMOTE_KVS", f"{SCHED}.schedule"),
            (("RUNNING",), "PREEMPTED", f"{SCHED}._preempt_request")]
    for key in need:
        assert key in rows, f"missing transition {key}"
        r = rows[key]
        # The line named is the line that writes the state.
        text = _source_line(pegaflow_analysis, r.root, r.file, r.line)
        assert f"RequestStatus.{r.to_state}" in text, (key, r.line, text)
    assert "finished_recving" in rows[need[0]].guard
    assert "WAITING_FOR_REMOTE_KVS" in rows[need[1]].guard


def test_where_and_path(pegaflow_analysis: Analysis) -> None:
    g = pegaflow_analysis.graph
    field = where(g, "finished_recving")
    assert isinstance(field, WhereResult) and field.kind == "field"
    assert f"{SCHED}._update_from_kv_xfer_finished" in {s.node for s in field.get("consumers")}
    assert any(g.nodes[s.node].get("side") == "worker" for s in field.get("producers"))
    result = paths.find_paths(g, f"{SCHED}.schedule",
                              "pegaflow.connector.worker.WorkerConnector.start_load_kv", 3,
                              paths.CONTROL_KINDS)
    assert isinstance(result, paths.PathResult) and result.paths
    assert any(s.kind == "bridge" for s in result.paths[0])


@pytest.fixture(scope="module")
def real_pages(pegaflow_analysis: Analysis, tmp_path_factory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("onboarding")
    pages = generate(pegaflow_analysis, DocsOptions(out_dir=out, link_template=TEMPLATE))
    return {k: v.decode("utf-8") for k, v in pages.items()}


def test_pages_present(real_pages: dict[str, str]) -> None:
    for rel in ("README.md", "lifecycle.md", "request-lifecycle.md", "kv-load.md", "kv-save.md",
                "log-markers.md", "rules.md", "connectors/pegaflow.connector.PegaKVConnector.md"):
        assert rel in real_pages, rel
    conn = real_pages["connectors/pegaflow.connector.PegaKVConnector.md"]
    assert "`SchedulerConnector.get_num_new_matched_tokens`" in conn
    assert "`WorkerConnector.start_load_kv`" in conn
    life = real_pages["lifecycle.md"]
    assert "WAITING_FOR_REMOTE_KVS --> WAITING : Scheduler._handle_blocked_waiting_request" in life
    assert "PegaKVConnector" in real_pages["kv-load.md"]
    ids = real_pages["request-lifecycle.md"]
    assert "## Package `pegaflow`" in ids
    assert "#### `SchedulerConnector` (`pegaflow.connector.scheduler`)" in ids
    assert "`NixlBaseConnectorWorker.get_finished`" in ids  # a report reading a container


def test_pages_hold_no_machine_paths(real_pages: dict[str, str], pegaflow_analysis) -> None:
    for rel, text in real_pages.items():
        for r in pegaflow_analysis.roots:
            assert str(r.path) not in text, (rel, r.path)


def test_page_links(real_pages: dict[str, str], pegaflow_analysis: Analysis) -> None:
    """Every location names an existing file and a line inside it; every
    link between pages lands on a generated page."""
    labels = sorted((r.label for r in pegaflow_analysis.roots), key=len, reverse=True)
    checked = 0
    for rel, text in real_pages.items():
        for loc, line in LOCATION.findall(text):
            label = next(lb for lb in labels if loc.startswith(lb + "/"))
            root = next(r for r in pegaflow_analysis.roots if r.label == label)
            path = root.path / loc[len(label) + 1:]
            assert path.is_file(), (rel, loc)
            n = len(path.read_text(encoding="utf-8").splitlines())
            assert 1 <= int(line) <= n, (rel, loc, line)
            checked += 1
        for target in re.findall(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)", text):
            dest = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
            assert dest in real_pages, (rel, target)
    assert checked > 200
