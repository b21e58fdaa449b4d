"""``compat --diff`` on miniature releases: every kind of protocol change,
with both signatures and the places in both releases."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.compat_releases import BASE, install_release
from kvflowmap.compat.diff import Change, diff_surfaces
from kvflowmap.compat.surface_cache import SurfaceStore
from kvflowmap.protocol import load_protocol


@pytest.fixture()
def changes(tmp_path: Path) -> list[Change]:
    for v in ("0.1.0", "0.2.0"):
        install_release(tmp_path, v)
    store = SurfaceStore(tmp_path, load_protocol())
    return diff_surfaces(store.release("0.1.0"), store.release("0.2.0"))


def _one(changes: list[Change], section: str, subject: str, kind: str | None = None) -> Change:
    found = [c for c in changes if c.section == section and c.subject == subject
             and kind in (None, c.kind)]
    assert len(found) == 1, [c for c in changes if c.subject == subject]
    return found[0]


def test_parameter_type_change_has_both_signatures(changes: list[Change]) -> None:
    c = _one(changes, "method", "KVConnectorBase_V1.handle_preemptions")
    assert c.kind == "changed"
    assert c.old == "def handle_preemptions(self, preempted_req_ids: set[str])"
    assert c.new == "def handle_preemptions(self, kv_connector_metadata: KVConnectorMetadata)"
    assert (str(c.old_where), str(c.new_where)) == (f"{BASE}:21", f"{BASE}:32")
    assert "set[str] -> kv_connector_metadata: KVConnectorMetadata" in c.detail


def test_new_required_init_parameter(changes: list[Change]) -> None:
    c = _one(changes, "method", "KVConnectorBase_V1.__init__")
    assert c.detail == "+kv_cache_config (required)"


def test_new_method_new_call_and_newly_abstract(changes: list[Change]) -> None:
    added = _one(changes, "method", "KVConnectorBase_V1.get_transfer_results")
    assert added.kind == "added" and added.old is None and added.new_where is not None
    assert _one(changes, "call", "get_transfer_results").kind == "added"
    assert _one(changes, "method", "KVConnectorBase_V1.wait_for_save").detail == "now abstract"
    assert _one(changes, "method", "KVConnectorBase_V1._old_helper").kind == "removed"
    kw = _one(changes, "call", "start_load_kv")
    assert kw.kind == "changed" and kw.new == "stream="


def test_carriers_states_envs(changes: list[Change]) -> None:
    c = _one(changes, "carrier", "KVConnectorOutput.failed_recving")
    assert c.kind == "added" and str(c.new_where) == "vllm/v1/outputs.py:9"
    assert _one(changes, "carrier", "KVConnectorTransferResults.failed_recving").kind == "added"
    assert _one(changes, "state", "RequestStatus.WAITING_FOR_REMOTE_KVS").kind == "added"
    assert _one(changes, "config", "KVTransferConfig.kv_rank").kind == "removed"
    env = _one(changes, "env", "vllm.envs.VLLM_OLD_FLAG")
    assert env.kind == "removed" and str(env.old_where) == "vllm/envs.py:6"


def test_unchanged_names_are_not_reported(changes: list[Change]) -> None:
    subjects = {c.subject for c in changes}
    assert "KVConnectorBase_V1.get_finished" not in subjects
    assert "KVConnectorBase_V1.start_load_kv" not in subjects
    assert "vllm.envs.VLLM_HOST_IP" not in subjects
    assert changes == sorted(changes, key=lambda c: changes.index(c))  # stable


def test_callers_moving_to_the_base(changes: list[Change]) -> None:
    # 0.1.0's worker calls get_finished; in 0.2.0 only the base's get_transfer_results does
    c = _one(changes, "call", "get_finished")
    assert c.kind == "changed" and c.new == BASE
    assert c.detail == ("no longer called from vllm/v1/worker/kv_connector_model_runner_mixin.py; "
                        "now called from vllm.distributed.kv_transfer.kv_connector.v1.base."
                        "KVConnectorBase_V1.get_transfer_results")


def test_members_docstrings_and_carrier_classes(changes: list[Change]) -> None:
    # a class attribute of the base new in 0.2.0 (vLLM 0.32's _cache_hit_source)
    m = _one(changes, "member", "KVConnectorBase_V1._cache_hit_source")
    assert m.kind == "added" and m.new_where is not None
    # the contract in the docstring changed, the signature did not
    doc = _one(changes, "method", "KVConnectorBase_V1.get_block_ids_with_load_errors")
    assert doc.detail == "docstring (the contract as written)"
    assert doc.old == "…ids that failed to load."  # four words before the first difference
    assert doc.new == "…ids that failed to load, reported before the request finishes."
    # a carrier class new in 0.2.0: the class itself, and each of its fields
    c = _one(changes, "carrier", "KVConnectorTransferResults")
    assert c.kind == "added" and "failed_recving" in c.detail
    # a return annotation that changed
    details = [c.detail for c in changes if c.subject == "KVConnectorBase_V1.request_finished"]
    assert details == ["returns bool -> tuple[bool, dict | None]", "default behaviour"]
    # vLLM stops calling a hook the base still declares
    gone = _one(changes, "call", "get_block_ids_with_load_errors")
    assert gone.kind == "removed" and gone.new_where is None


def test_doc_change_keeps_the_words_around_the_difference() -> None:
    from kvflowmap.compat.diff import doc_change
    a = "Block until all the save operations is done. This is called as the forward exits."
    b = "Submit saves and perform required synchronization. This is called as the forward exits."
    old, new = doc_change(a, b)
    assert old.startswith("Block until") and old.endswith("…")
    assert new.startswith("Submit saves") and "exits" not in new


def test_new_caller_in_the_same_module(changes: list[Change]) -> None:
    c = _one(changes, "call", "get_num_new_matched_tokens")
    assert c.kind == "changed" and c.new == "_drain_deferred_loads"
    assert c.detail == "now called from _drain_deferred_loads"
    assert c.new_where is not None and c.new_where.file == "vllm/v1/core/sched/scheduler.py"
