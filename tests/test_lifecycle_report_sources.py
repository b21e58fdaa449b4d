"""Ids found backwards from what the report hooks hand back
(``lifecycle.report_sources``): a transfer thread that reads request ids off
the network and collects them for the hook is seen, with no seed."""

from __future__ import annotations

from kvflowmap.api import Request, analyse
from kvflowmap.check.stubs import stub_root
from kvflowmap.lifecycle.model import build_lifecycle

SOURCE = """import threading

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class RecvThread(threading.Thread):
    def __init__(self, sock):
        super().__init__(daemon=True)
        self.sock = sock
        self.lock = threading.Lock()
        self.done_requests = set[str]()
        self.task_tracker = dict[str, int]()
        self.stats = {}

    def run(self):
        while True:
            msg = self.sock.recv()
            self.update_done_task(msg[1])
            self.stats[msg[0]] = 1

    def update_done_task(self, req_id):
        with self.lock:
            self.task_tracker.pop(req_id, None)
            self.done_requests.add(req_id)

    def get_and_clear_done_requests(self):
        with self.lock:
            finished = self.done_requests
            self.done_requests = set()
        return finished


class Conn(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self.thread = RecvThread(None)

    def get_finished(self, finished_req_ids):
        done_recving = (
            self.thread.get_and_clear_done_requests()
            if self.thread is not None
            else set()
        )
        return set(), done_recving
"""


def test_the_container_a_report_hook_drains_is_request_keyed(tree):
    root = tree({"rconn/__init__.py": SOURCE})
    lc = build_lifecycle(analyse(Request(sources=[str(root)], context=[str(stub_root())])).linker)
    assert "finished" in lc.state.of("rconn.RecvThread.get_and_clear_done_requests").colls
    assert "done_recving" in lc.state.of("rconn.Conn.get_finished").colls
    assert "done_requests" in lc.state.keyed_attrs
    # the parameter the thread puts into it is an id, and so is the tracker
    # it takes it out of; a dict keyed by something else is not
    assert "req_id" in lc.state.of("rconn.RecvThread.update_done_task").ids
    labels = {c.label for c in lc.containers}
    assert {"RecvThread.done_requests", "RecvThread.task_tracker"} <= labels
    assert "RecvThread.stats" not in labels
