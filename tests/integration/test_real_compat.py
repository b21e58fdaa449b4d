"""``compat`` on real vLLM releases and PegaFlow 0.25.1.

Where the changes happened, read from the releases' ``kv_connector/v1/base.py``:
``handle_preemptions(self, preempted_req_ids: set[str])`` in 0.18.0 became
``handle_preemptions(self, kv_connector_metadata: KVConnectorMetadata)`` in
0.19.0; ``get_transfer_results`` (and ``KVConnectorTransferResults``) first
appear in 0.30.0, as does ``KVConnectorOutput.failed_recving`` (vllm/v1/outputs.py).
Four releases, each fetched once into the test cache."""

from __future__ import annotations

import pytest

from kvflowmap.compat.diff import Change
from kvflowmap.compat.findings import Matrix
from kvflowmap.compat.run import run_diff, run_matrix
from kvflowmap.compat.surface_cache import SurfaceStore
from kvflowmap.protocol import load_protocol
from tests.integration.conftest import release, release_cache_dir

BASE = "vllm/distributed/kv_transfer/kv_connector/v1/base.py"
RELEASES = ["0.18.0", "0.19.0", "0.29.0", "0.30.0"]


@pytest.fixture(scope="module")
def store() -> SurfaceStore:
    return SurfaceStore(release_cache_dir(), load_protocol())


def _subject(changes: list[Change], subject: str) -> list[Change]:
    return [c for c in changes if c.subject == subject]


def test_handle_preemptions_change_has_both_signatures(store: SurfaceStore) -> None:
    _, _, changes = run_diff(store, "vllm==0.18.0", "vllm==0.19.0")
    c, doc = _subject(changes, "KVConnectorBase_V1.handle_preemptions")
    assert doc.new is not None and doc.new.startswith("Handle preempted requests or evicted "
                                                      "blocks")  # its contract, in words
    assert c.old == "def handle_preemptions(self, preempted_req_ids: set[str])"
    assert c.new == "def handle_preemptions(self, kv_connector_metadata: KVConnectorMetadata)"
    assert str(c.old_where) == f"{BASE}:291" and str(c.new_where) == f"{BASE}:291"
    (gone,) = _subject(changes, "KVConnectorPromMetrics.make_per_engine")  # left the metrics base
    assert gone.kind == "removed"
    _, _, later = run_diff(store, "vllm==0.19.0", "vllm==0.29.0")
    assert not _subject(later, "KVConnectorBase_V1.handle_preemptions")


def test_get_transfer_results_and_failed_recving_where_they_appeared(
        store: SurfaceStore) -> None:
    _, _, before = run_diff(store, "vllm==0.19.0", "vllm==0.29.0")
    assert not _subject(before, "KVConnectorBase_V1.get_transfer_results")
    _, _, changes = run_diff(store, "vllm==0.29.0", "vllm==0.30.0")
    (m,) = _subject(changes, "KVConnectorBase_V1.get_transfer_results")
    assert m.kind == "added" and m.new is not None and "KVConnectorTransferResults" in m.new
    assert m.new_where is not None and m.new_where.file == BASE
    assert [c.kind for c in _subject(changes, "get_transfer_results") if c.section == "call"] \
        == ["added"]
    (moved,) = [c for c in _subject(changes, "get_finished") if c.section == "call"]
    assert moved.new == BASE and "get_transfer_results" in moved.detail  # only via the base now
    (f,) = _subject(changes, "KVConnectorOutput.failed_recving")
    assert f.kind == "added" and f.new_where is not None and f.new_where.file == "vllm/v1/outputs.py"


@pytest.fixture(scope="module")
def pegaflow(store: SurfaceStore) -> Matrix:
    root = release("pegaflow-llm==0.25.1")
    return run_matrix(store, [root / "pegaflow"], RELEASES)


def test_pegaflow_guarded_handle_preemptions_accepted_on_both_sides(pegaflow: Matrix) -> None:
    cls = "pegaflow.connector.PegaKVConnector"
    for release_, branch in (("0.18.0", "the isinstance branch"), ("0.19.0", "the other branch")):
        cell = pegaflow.cell(cls, release_)
        assert not [f for f in cell.findings if f.severity == "error"], cell.findings
        (g,) = [f for f in cell.findings if f.kind == "guarded"]
        assert "isinstance(preempted, set)" in g.message and g.message.endswith(f"{branch} runs")
        assert g.where == "pegaflow/connector/__init__.py:329"


def test_pegaflow_failed_recving_never_filled_from_0_30(pegaflow: Matrix) -> None:
    cls = "pegaflow.connector.PegaKVConnector"
    kinds = {r: {f.kind for f in pegaflow.cell(cls, r).findings} for r in RELEASES}
    assert "carrier" in kinds["0.30.0"] and "carrier" not in kinds["0.29.0"]
    # no release in the range breaks PegaFlow 0.25.1's connector
    assert not [f for f in pegaflow.findings() if f.severity == "error"]


def test_base_members_docstrings_and_class_level_calls(store: SurfaceStore) -> None:
    """Read from the diffs of ``kv_connector/v1/base.py``: 0.30.0's ``__init__``
    assigns ``self._kv_cache_manager``; 0.32.0 adds the class attribute
    ``_cache_hit_source`` ("Subclasses must set HOST/DISK/P2P..."); 0.31.0
    rewrites ``wait_for_save``'s contract ("Called once per step, including
    empty steps"); 0.33.0's ``VllmConfig`` calls ``connector_cls.supports_sleep_mode``."""
    _, _, changes = run_diff(store, "vllm==0.29.0", "vllm==0.30.0")
    (m,) = _subject(changes, "KVConnectorBase_V1._kv_cache_manager")
    assert m.section == "member" and m.kind == "added"
    (c,) = [x for x in _subject(changes, "KVConnectorTransferResults") if x.section == "carrier"]
    assert c.kind == "added" and "failed_recving" in c.detail
    _, _, later = run_diff(store, "vllm==0.30.0", "vllm==0.33.0")
    (attr,) = _subject(later, "KVConnectorBase_V1._cache_hit_source")
    assert attr.kind == "added"
    (doc,) = _subject(later, "KVConnectorBase_V1.wait_for_save")
    assert doc.detail.startswith("docstring") and doc.new is not None
    assert doc.new.startswith("Submit saves and perform required synchronization")
    (sleep,) = [x for x in _subject(later, "supports_sleep_mode") if x.section == "call"]
    assert sleep.kind == "added" and sleep.new_where is not None
    assert sleep.new_where.file == "vllm/config/vllm.py"
    s33 = store.release("0.33.0")
    assert {c.where.file for c in s33.calls_of("get_required_kvcache_layout")} >= \
        {"vllm/distributed/kv_transfer/kv_connector/utils.py"}


def test_pegaflow_no_dead_hook_where_the_base_still_calls_it(pegaflow: Matrix) -> None:
    # 0.30.0's base get_transfer_results calls self.get_finished: PegaFlow's
    # get_finished is alive; none of its hooks lost every caller in these releases
    assert not [f for f in pegaflow.findings() if f.kind in ("no-caller", "base-call", "return")]
