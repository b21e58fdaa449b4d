"""Registration after hand-off (``lifecycle.handoff_order``): the order of a
hook's hand-off to background work and its registration of the same ids,
with the arms of an ``if`` and a display carrying the id."""

from __future__ import annotations

from kvflowmap.api import Request, analyse
from kvflowmap.check.stubs import stub_root
from kvflowmap.lifecycle.containers import Container
from kvflowmap.lifecycle.handoff_order import Gate, gates, late_registrations
from kvflowmap.lifecycle.handoffs import queue_handoffs
from kvflowmap.lifecycle.model import Lifecycle, build_lifecycle

HEAD = """import queue
import threading

from vllm.distributed.kv_transfer.kv_connector.v1.base import (KVConnectorBase_V1,
                                                               KVConnectorMetadata)

ReqId = str


class Meta(KVConnectorMetadata):
    def __init__(self):
        self.requests: dict[ReqId, list[int]] = {}


class Receiver(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.requests: queue.Queue = queue.Queue()
        self.to_process: set[str] = set()
        self.finished: set[str] = set()

    def add_request(self, request_id, blocks):
        info = {"request_id": request_id, "blocks": blocks}
        self.requests.put(info)

    def register(self, request_id):
        self.to_process.add(request_id)

    def done(self, request_id):
        if request_id in self.to_process:
            self.to_process.discard(request_id)
            self.finished.add(request_id)

    def run(self):
        while True:
            info = self.requests.get()
            self.done(info["request_id"])


class Conn(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self.receiver = Receiver()
        self.receiver.start()

    def get_finished(self, finished_req_ids):
        done, self.receiver.finished = self.receiver.finished, set()
        return None, done

    def start_load_kv(self, forward_context, **kwargs):
        meta = self._get_connector_metadata()
        assert isinstance(meta, Meta)
"""


def _model(tree, text: str) -> tuple[Lifecycle, dict[Container, list[Gate]]]:
    """The lifecycle model of one connector module and its gates."""
    root = tree({"conn/__init__.py": text})
    a = analyse(Request(sources=[str(root)], context=[str(stub_root())]))
    lc = build_lifecycle(a.linker)
    return lc, gates(lc.functions, lc.background_code(), lambda f, n: lc.state.is_id(f, n))


def late(tree, body: str) -> list[int]:
    lc, gated = _model(tree, HEAD + body)
    handed = queue_handoffs(lc.functions)
    roots = lc.background()

    def work(_fn: object, at: list[tuple[str, int]], _receiver: str) -> set[str]:
        starts = [t for f, _ in at for t in handed.get(f, ()) if t in roots]
        return lc.runs_from(starts)

    fn = lc.functions["conn.Conn.start_load_kv"]
    out = late_registrations(
        fn, gated, lc.effects.of,
        lambda f, s: [lc.functions[t] for c in f.calls(s) for t in lc.subject_callees(f, c)],
        lambda f, n: lc.state.is_id(f, n), work)
    return [r.line - len(HEAD.splitlines()) for r in out]


def test_a_registration_after_the_hand_off_is_late(tree) -> None:
    # the queued dict display carries the id: the thread looks it up in to_process
    assert late(tree, """        for req_id, blocks in meta.requests.items():
            self.receiver.add_request(req_id, blocks)
        for req_id in meta.requests:
            self.receiver.register(req_id)
""") == [4]


def test_a_registration_before_the_hand_off_is_not(tree) -> None:
    assert late(tree, """        for req_id in meta.requests:
            self.receiver.register(req_id)
        for req_id, blocks in meta.requests.items():
            self.receiver.add_request(req_id, blocks)
""") == []


def test_the_other_arm_of_an_if_is_not_after(tree) -> None:
    assert late(tree, """        for req_id, blocks in meta.requests.items():
            if blocks:
                self.receiver.add_request(req_id, blocks)
            else:
                self.receiver.register(req_id)
""") == []


def _gate_lines(tree, done: str, body: str) -> list[int]:
    """Lines (within ``done``) of the gates found with the thread's lookup
    written as ``done``."""
    old = HEAD[HEAD.index("    def done("):HEAD.index("    def run(")]
    text = HEAD.replace(old, done) + body
    _, gated = _model(tree, text)
    return sorted(g.line - text[:text.index("    def done(")].count("\n") - 1
                  for gs in gated.values() for g in gs)


LATE_BODY = """        for req_id, blocks in meta.requests.items():
            self.receiver.add_request(req_id, blocks)
"""


def test_a_lookup_through_get_is_a_gate_in_every_spelling(tree) -> None:
    # the arm for a missing id only leaves: ``is None`` and ``not v`` test for
    # the miss, ``is not None`` and ``v`` for the hit (the miss is the else)
    for test, miss in (("entry is None", "return"), ("not entry", "return")):
        done = f"""    def done(self, request_id):
        entry = self.to_process.get(request_id)
        if {test}:
            {miss}
        self.finished.add(request_id)

"""
        assert _gate_lines(tree, done, LATE_BODY) == [2], test
    for test in ("entry is not None", "entry"):
        done = f"""    def done(self, request_id):
        entry = self.to_process.get(request_id)
        if {test}:
            self.finished.add(request_id)

"""
        assert _gate_lines(tree, done, LATE_BODY) == [2], test


def test_a_lookup_whose_miss_registers_is_no_gate(tree) -> None:
    done = """    def done(self, request_id):
        entry = self.to_process.get(request_id)
        if entry is None:
            self.finished.add(request_id)
            return
        self.finished.add(request_id)

"""
    assert _gate_lines(tree, done, LATE_BODY) == []
