"""Request ids known by their declared type (``lifecycle.id_types``)."""

from __future__ import annotations

import pytest

from kvflowmap.api import Request, analyse
from kvflowmap.check.stubs import stub_root
from kvflowmap.lifecycle.id_types import annotation_kind
from kvflowmap.lifecycle.model import build_lifecycle


@pytest.mark.parametrize("ann, kind", [
    ("ReqId", "id"),
    ("ReqId | None", "id"),
    ("Optional[ReqId]", "id"),
    ("mod.ReqId", "id"),
    ("list[ReqId]", "coll"),
    ("Collection[ReqId]", "coll"),
    ("dict[ReqId, PullReqMeta]", "coll"),
    ("dict[ReqId, tuple[int, list[int]]] | None", "coll"),
    ("queue.Queue[ReqId]", "coll"),
    ("dict[EngineId, dict[ReqId, Meta]]", "coll_valued"),
    ("tuple[ReqId, Meta]", None),  # a record of fields, not a collection
    ("dict[str, int]", None),
    ("str", None),
    (None, None),
])
def test_annotation_kind(ann, kind):
    assert annotation_kind(ann, ("ReqId",)) == kind


def test_no_id_types_means_no_seeds():
    assert annotation_kind("list[ReqId]", ()) is None


SOURCE = """from dataclasses import dataclass

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1

ReqId = str


@dataclass
class PullMeta:
    d_req_id: ReqId
    req_blocks: dict[ReqId, list[int]]
    by_engine: dict[str, dict[ReqId, int]]


class Worker:
    def __init__(self):
        self._pending: dict[ReqId, int] = {}

    def pull(self, metas: dict[ReqId, int], req_id: ReqId, note: str):
        failed: list[ReqId] = []
        return failed


class Conn(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self.worker = Worker()
"""


def test_annotations_seed_ids_collections_and_keyed_fields(tree):
    root = tree({"conn/__init__.py": SOURCE})
    lc = build_lifecycle(analyse(Request(sources=[str(root)], context=[str(stub_root())])).linker)
    pull = lc.state.of("conn.Worker.pull")
    assert "req_id" in pull.ids and "note" not in pull.ids
    assert {"metas", "failed"} <= pull.colls
    assert {"_pending", "req_blocks"} <= lc.state.keyed_attrs
    assert "by_engine" in lc.state.coll_valued
    # a scalar field of the id type names the request in any record holding it
    assert "d_req_id" in lc.state.id_attrs and "req_blocks" not in lc.state.id_attrs


def test_a_loop_over_the_schedulers_finished_ids_walks_ids_whatever_its_name(tree):
    # the protocol's id_collections: SchedulerOutput.finished_req_ids holds ids,
    # so a pop keyed by the loop's variable is a removal (vLLM 0.33.0's
    # Mooncake store names it ``finished_req_id``)
    root = tree({"conn/__init__.py": """
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Conn(KVConnectorBase_V1):
    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        self._trackers[request.request_id] = blocks

    def build_connector_meta(self, scheduler_output):
        for finished in scheduler_output.finished_req_ids:
            self._trackers.pop(finished, None)
        return None
"""})
    lc = build_lifecycle(analyse(Request(sources=[str(root)], context=[str(stub_root())])).linker)
    sites = {(s.fqn.rpartition(".")[2], s.kind) for info in lc.containers.values()
             for s in info.sites if info.container.attr == "_trackers"}
    assert ("build_connector_meta", "remove") in sites


def test_a_helper_removing_from_a_container_it_was_handed_removes_from_the_callers(tree):
    # vLLM's NIXL worker: ``self._pop_done_transfers(self._recving_transfers)``
    # then ``del transfers[req_id]`` in the helper; and a list a setdefault
    # hands back is no container of its own
    root = tree({"conn/__init__.py": """
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1

ReqId = str


class Conn(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self._recving: dict[ReqId, list[int]] = {}
        self._notifs: dict[ReqId, list[str]] = {}

    def start_load_kv(self, forward_context, **kwargs):
        self._read(self._connector_metadata.req_id)

    def _read(self, req_id: ReqId):
        self._recving[req_id] = [1]
        self._notifs.setdefault(req_id, []).append("x")

    def get_finished(self, finished_req_ids):
        return None, self._pop_done(self._recving)

    def _pop_done(self, transfers: dict[ReqId, list[int]]) -> set[ReqId]:
        done: set[ReqId] = set()
        for req_id in list(transfers):
            del transfers[req_id]
            done.add(req_id)
        return done
"""})
    lc = build_lifecycle(analyse(Request(sources=[str(root)], context=[str(stub_root())])).linker)
    sites = {(info.container.attr, s.fqn.rpartition(".")[2], s.kind)
             for info in lc.containers.values() for s in info.sites}
    assert ("_recving", "_pop_done", "remove") in sites
    assert all("setdefault" not in attr for attr, _, _ in sites)
