"""Ids reported on a peer's word (``lifecycle.peer_ids``): found backwards
from what a report hook hands back, through a thread target nested in a
method (its ``self`` is the method's), to the call that decoded the message."""

from __future__ import annotations

from kvflowmap.api import Request, analyse
from kvflowmap.check.stubs import stub_root
from kvflowmap.lifecycle.model import build_lifecycle

WRAPPER = """import threading

import msgpack
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Wrapper:
    def __init__(self):
        self.lock = threading.Lock()
        self.done_write = []
        self.pending = {}

    def start(self):
        def _listen():
            while True:
                identity, msg = self.sock.recv_multipart()
                self._handle_message(msg)

        threading.Thread(target=_listen, daemon=True).start()

    def _handle_message(self, msg):
        data = msgpack.loads(msg)
        if isinstance(data, dict):
            self.pending[data["req_id"]] = data
            return
        text = msg.decode("utf-8")
        self._handle_completion(text)

    def _handle_completion(self, text):
        req_id, _, _tp = text.rpartition(":")
        with self.lock:
            self.done_write.append(req_id)

    def pop_done(self):
        with self.lock:
            done = set(self.done_write)
            self.done_write = []
        return done


class Conn(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self.w = Wrapper()
        self._transfer_to_req = {}

    def start_load_kv(self, forward_context, **kwargs):
        self.w.start()

    def get_finished(self, finished_req_ids):
        return set(), self.w.pop_done()
"""

MAPPED = WRAPPER.replace(
    "        return set(), self.w.pop_done()\n",
    "        done = self.w.pop_done()\n"
    "        done = {self._transfer_to_req[t] for t in done if t in self._transfer_to_req}\n"
    "        return set(), done\n")

CHECKED = WRAPPER.replace(
    "        with self.lock:\n            self.done_write.append(req_id)\n",
    "        with self.lock:\n            if req_id in self.pending:\n"
    "                self.done_write.append(req_id)\n")


def _found(tree, source: str):
    root = tree({"pconn/__init__.py": source})
    a = analyse(Request(sources=[str(root)], context=[str(stub_root())], use_cache=False))
    return a, build_lifecycle(a.linker)


def test_an_id_off_the_message_reaches_the_report_unchecked(tree) -> None:
    a, lc = _found(tree, WRAPPER)
    # the thread target nested in ``start`` calls the method of its ``self``
    assert a.graph.has_edge("pconn.Wrapper.start._listen", "pconn.Wrapper._handle_message")
    # the hook returns the helper's result itself: its container is drained for the report
    assert "done_write" in lc.state.report_fed
    [p] = lc.peer_ids()
    assert (p.fqn, p.held, p.value) == ("pconn.Conn.get_finished", "self.done_write", "req_id")
    assert (p.add_fqn, p.source_fqn, p.source) == (
        "pconn.Wrapper._handle_completion", "pconn.Wrapper._handle_message", "msg.decode()")


def test_a_lookup_on_the_way_or_a_mapping_at_the_report_ties_it_to_a_request(tree) -> None:
    assert _found(tree, CHECKED)[1].peer_ids() == []
    assert _found(tree, MAPPED)[1].peer_ids() == []
