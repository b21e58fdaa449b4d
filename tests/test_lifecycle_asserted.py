"""Asserted entries (``lifecycle.asserted``): an assert that a request's
entry is there, against the other ways entries leave the container."""

from __future__ import annotations

from kvflowmap.api import Request, analyse
from kvflowmap.check.stubs import stub_root
from kvflowmap.lifecycle.model import build_lifecycle

HEAD = """from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Conn(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self._trackers = {}

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        self._trackers[request.request_id] = blocks

    def request_finished(self, request, block_ids):
        tracker = self._trackers.get(request.request_id)
        assert tracker is not None
        return False, None
"""


def asserted(tree, body: str) -> list[tuple[str, str]]:
    root = tree({"conn/__init__.py": HEAD + body})
    a = analyse(Request(sources=[str(root)], context=[str(stub_root())]))
    return [(x.fqn.rpartition(".")[2], x.remover.rpartition(".")[2])
            for x in build_lifecycle(a.linker).asserted()]


def test_an_entry_dropped_on_preemption_and_asserted_at_the_end(tree):
    body = """
    def build_connector_meta(self, scheduler_output):
        for req_id in scheduler_output.preempted_req_ids:
            self._trackers.pop(req_id, None)
        for req in scheduler_output.scheduled_new_reqs:
            self._trackers[req.req_id] = req.block_ids
"""
    assert asserted(tree, body) == [("request_finished", "build_connector_meta")]


def test_removals_that_end_the_request_or_put_the_entry_back_are_no_way_out(tree):
    body = """
    def build_connector_meta(self, scheduler_output):
        for req_id in scheduler_output.finished_req_ids:
            self._trackers.pop(req_id, None)
        for req_id in scheduler_output.preempted_req_ids:
            self._trackers.pop(req_id, None)
            self._trackers[req_id] = None

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        self._trackers[request.request_id] = None
        try:
            self._probe(request)
        except Exception:
            del self._trackers[request.request_id]
            raise
        return 0, False

    def _probe(self, request):
        raise NotImplementedError
"""
    assert asserted(tree, body) == []
