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


SPLIT = """from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class BaseWorker:
    def __init__(self):
        self._to_send = {}
        self._waiting = set()

    def get_finished(self, finished_req_ids):
        done = set()
        for req_id in self._incoming():
            self.on_notification(req_id)
        for req_id in [r for r, t in self._to_send.items() if t < 0]:
            del self._to_send[req_id]  # expired
            done.add(req_id)
        return done, None

    def on_notification(self, req_id):
        pass

    def _incoming(self):
        raise NotImplementedError


class PullWorker(BaseWorker):
    def add(self, request):
        self._to_send[request.request_id] = 1.0
        self._waiting.add(request.request_id)

    def on_notification(self, req_id):
        if req_id not in self._to_send and req_id not in self._waiting:
            return
        %s


class PushWorker(BaseWorker):
    def add(self, request):
        self._to_send.clear()


class Conn(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self.worker = PullWorker()

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        self.worker.add(request)

    def get_finished(self, finished_req_ids):
        return self.worker.get_finished(finished_req_ids)
"""


def _split(tree, line: str) -> list[tuple[str, str]]:
    root = tree({"conn/__init__.py": SPLIT % line})
    a = analyse(Request(sources=[str(root)], context=[str(stub_root())]))
    return sorted({(x.fqn.rpartition(".")[2], x.remover.rpartition(".")[2])
                   for x in build_lifecycle(a.linker).asserted()})


def test_a_base_class_removal_works_on_the_subclass_container(tree):
    """The base's expiry and the subclass's notification handler take from
    one instance's dict: a ``del`` after a test that only says the id is in
    *one of* two containers fails once the expiry took the entry. The
    sibling's ``clear`` is another instance's and is no way out here."""
    got = _split(tree, "del self._to_send[req_id]")
    assert ("on_notification", "get_finished") in got
    assert not [g for g in got if g[1] == "add"]


def test_a_tolerant_removal_after_the_split_test_is_fine(tree):
    assert [g for g in _split(tree, "self._to_send.pop(req_id, None)")
            if g[0] == "on_notification"] == []


def test_a_del_in_a_helper_every_caller_reaches_past_a_membership_guard(tree):
    # aibrix-kvcache's wait_for_save: ``if rid not in c or ...: continue``, then
    # the helper pops the entry; the clear comes after the loop
    guarded = """
    def wait_for_save(self):
        for rid in list(self._sending):
            if rid not in self._trackers or self._trackers[rid] is None:
                continue
            self._send(rid)
        self._trackers.clear()

    def _send(self, rid):
        handle = self._trackers.pop(rid)
        return handle
"""
    assert asserted(tree, guarded) == [("request_finished", "_send"),
                                       ("request_finished", "wait_for_save")]
    unguarded = guarded.replace("if rid not in self._trackers or", "if")
    assert ("_send", "wait_for_save") in asserted(tree, unguarded)
