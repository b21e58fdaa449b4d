"""The protocol surface of miniature releases: what is extracted, that only
the surface's modules are parsed, and that it is cached once per release."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.compat_releases import BASE, install_release, write_tree, release_files
from kvflowmap.compat.model import Surface
from kvflowmap.compat.surface_cache import SurfaceStore
from kvflowmap.protocol import load_protocol

BASE_CLASS = "vllm.distributed.kv_transfer.kv_connector.v1.base.KVConnectorBase_V1"


@pytest.fixture()
def store(tmp_path: Path) -> SurfaceStore:
    for v in ("0.1.0", "0.2.0"):
        install_release(tmp_path, v)
    return SurfaceStore(tmp_path, load_protocol())


def test_base_methods_signatures_abstract_defaults(store: SurfaceStore) -> None:
    old, new = store.release("0.1.0"), store.release("0.2.0")
    m_old, m_new = old.method(BASE_CLASS, "handle_preemptions"), \
        new.method(BASE_CLASS, "handle_preemptions")
    assert m_old and m_new
    assert m_old.signature == "def handle_preemptions(self, preempted_req_ids: set[str])"
    assert m_new.heads == (("vllm.distributed.kv_transfer.kv_connector.v1.base."
                            "KVConnectorMetadata",),)
    assert m_old.heads == (("set",),)
    assert m_old.default == "returns None" and m_old.where.line == 21
    assert not old.method(BASE_CLASS, "wait_for_save").abstract  # type: ignore[union-attr]
    assert new.method(BASE_CLASS, "wait_for_save").abstract  # type: ignore[union-attr]
    assert old.method(BASE_CLASS, "get_transfer_results") is None
    assert "_role" in old.classes[BASE_CLASS].members  # assigned in __init__
    stats = "vllm.distributed.kv_transfer.kv_connector.v1.metrics.KVConnectorStats"
    assert stats not in old.classes  # base.py does not import metrics in these releases


def test_calls_carriers_states_envs(store: SurfaceStore) -> None:
    old, new = store.release("0.1.0"), store.release("0.2.0")
    assert [c.method for c in old.calls_of("get_finished")] == ["get_finished"]
    (load,) = new.calls_of("start_load_kv")
    assert load.keywords == ("stream",) and load.positional == 1
    assert load.caller.endswith("KVConnectorModelRunnerMixin._get_kv_connector_output")
    # the base's default get_transfer_results calls get_finished: still called in 0.2.0
    assert [c.where.file for c in new.calls_of("get_finished")] == [BASE]
    assert "failed_recving" in new.carriers["vllm.v1.outputs.KVConnectorOutput"]
    assert "failed_recving" not in old.carriers["vllm.v1.outputs.KVConnectorOutput"]
    assert "WAITING_FOR_REMOTE_KVS" in new.states["vllm.v1.request.RequestStatus"]
    assert set(old.envs) == {"VLLM_HOST_IP", "VLLM_OLD_FLAG"} and set(new.envs) == {"VLLM_HOST_IP"}


def test_only_surface_modules_are_parsed(tmp_path: Path) -> None:
    root = install_release(tmp_path, "0.2.0")
    write_tree(root, {"vllm/model_executor/huge.py": "def f(:\n"})  # would be a problem fact
    surface = SurfaceStore(tmp_path, load_protocol()).release("0.2.0")
    assert "vllm/model_executor/huge.py" not in surface.modules
    assert BASE in surface.modules and "vllm/envs.py" in surface.modules


def test_cached_once_per_release(tmp_path: Path) -> None:
    root = install_release(tmp_path, "0.2.0")
    stale = tmp_path / "compat" / "vllm-0.2.0-0000000000000000.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")  # another tool version's entry: replaced, not kept beside
    first = SurfaceStore(tmp_path, load_protocol()).release("0.2.0")
    assert not stale.exists()
    shutil.rmtree(root / "vllm")  # a second store reads the cached surface, not the sources
    (root / "vllm").mkdir()
    again = SurfaceStore(tmp_path, load_protocol()).release("0.2.0")
    assert again == first
    assert Surface.from_json(first.to_json()) == first
    assert list((tmp_path / "compat").glob("vllm-0.2.0-*.json"))


def test_no_cache_extracts_again(tmp_path: Path) -> None:
    install_release(tmp_path, "0.1.0")
    store = SurfaceStore(tmp_path, load_protocol(), use_cache=False)
    assert store.release("0.1.0").version == "0.1.0"
    assert not (tmp_path / "compat").exists()
    assert release_files("0.1.0")[BASE]  # the fixture itself is what was read


def test_callers_outside_the_entry_modules_and_property_reads(store: SurfaceStore) -> None:
    old, new = store.release("0.1.0"), store.release("0.2.0")
    (restore,) = new.calls_of("restore_kv_caches")  # found by the byte scan of the release
    assert str(restore.where) == "vllm/v1/worker/gpu_worker.py:7"
    assert restore.caller == "vllm.v1.worker.gpu_worker.Worker.wake_up"
    (prop,) = old.calls_of("prefer_cross_layer_blocks")
    assert prop.read and prop.where.file.endswith("kv_connector_model_runner_mixin.py")
    assert "vllm/v1/worker/gpu_worker.py" not in old.modules  # 0.1.0 has no such module
