"""Which names hold request ids (``lifecycle.ids``): a request's record taken
off a request queue carries one id field; its other fields are its data."""

from __future__ import annotations

from kvflowmap.api import Request, analyse
from kvflowmap.check.stubs import stub_root
from kvflowmap.lifecycle.model import build_lifecycle

SOURCE = """import queue
import threading

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Recv(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.request_queue = queue.Queue()

    def add_request(self, request_id, remote_host):
        self.request_queue.put({"request_id": request_id, "remote_host": remote_host})

    def run(self):
        while True:
            meta = self.request_queue.get()
            self._handle(meta)

    def _handle(self, req_meta):
        request_id = req_meta["request_id"]
        remote_host = req_meta["remote_host"]
        self._signal(request_id, remote_host)

    def _signal(self, request_id, remote_host):
        pass


class Conn(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self.recv = Recv()

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        self.recv.add_request(request.request_id, "host")
"""


def test_named_fields_of_a_dequeued_record_are_its_data_not_ids(tree):
    root = tree({"conn/__init__.py": SOURCE})
    lc = build_lifecycle(analyse(Request(sources=[str(root)], context=[str(stub_root())])).linker)
    handle = lc.state.of("conn.Recv._handle")
    assert "request_id" in handle.ids
    assert "remote_host" not in handle.ids and "remote_host" in handle.records
    assert "remote_host" not in lc.state.of("conn.Recv._signal").ids
