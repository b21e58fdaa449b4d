"""The ``forbid`` rule kind: blocking calls in scheduler hooks, writes in the probe."""

from __future__ import annotations

from pathlib import Path

from kvflowmap.api import Request, analyse
from kvflowmap.check.engine import run_rules
from kvflowmap.check.model import AppliesTo, Finding, Rule
from kvflowmap.check.stubs import stub_root

BASE = "vllm.distributed.kv_transfer.kv_connector.v1.base.KVConnectorBase_V1"
HEAD = """import threading
import time

import requests
import zmq

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1
"""
BLOCKING = dict(side="scheduler", unless_kwargs=["timeout"],
                calls=["time.sleep", "requests.*", "*.wait", "*.join", "*.result", "*.recv"])
WRITES = dict(methods=["get_num_new_matched_tokens"], forbid_writes=True,
              allow_attrs=["*_cache"], released_by=["request_finished", "build_connector_meta"],
              ignore_removals=True)


def check(tree, source: str, **params) -> list[Finding]:
    root = tree({"conn/__init__.py": HEAD + source})
    analysis = analyse(Request(sources=[str(root)], context=[str(stub_root())]))
    rule = Rule(id="t-forbid", title="t", severity="warning", rationale="r", kind="forbid",
                params=params, applies_to=AppliesTo(base_class=(BASE,)), examples=(),
                help="h", pack="test", path=Path("t.yaml"))
    return run_rules(analysis, [rule])


def lines(found: list[Finding]) -> list[int]:
    return [f.line for f in found]


def line_of(source: str, text: str, nth: int = 1) -> int:
    """Line of the ``nth`` line containing ``text`` in the file ``check`` writes."""
    hits = [i for i, ln in enumerate((HEAD + source).splitlines(), 1) if text in ln]
    return hits[nth - 1]


def test_blocking_call_reached_through_helpers_with_its_chain(tree):
    source = """
class Index:
    def query(self, keys):
        return requests.get("http://index", params=keys)


class C(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self._index = Index()

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return len(self._helper(request)), False

    def _helper(self, request):
        return self._index.query(request.block_hashes)

    def wait_for_save(self):
        time.sleep(1)  # worker side: not a scheduler hook
"""
    found = check(tree, source, **BLOCKING)
    assert len(found) == 1
    f = found[0]
    assert (f.function, f.line) == ("conn.Index.query", line_of(source, "requests.get"))
    assert "requests.get" in f.message and "C.get_num_new_matched_tokens" in f.message
    assert [s.note for s in f.path] == ["context: C.get_num_new_matched_tokens",
                                        "calls C._helper", "calls Index.query",
                                        "calls requests.get()"]
    assert [s.line for s in f.path] == [
        line_of(source, "def get_num_new_matched_tokens"), line_of(source, "self._helper("),
        line_of(source, "self._index.query("), line_of(source, "requests.get")]


def test_bounded_calls_are_accepted(tree):
    source = """
class C(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self._ev = threading.Event()
        self._t = threading.Thread(target=self._loop)

    def _loop(self):
        time.sleep(5)  # a thread target: not followed

    def build_connector_meta(self, scheduler_output):
        self._ev.wait(timeout=1)
        self._ev.wait(0.5)
        self._t.join(2)
        ", ".join(["a"])
        sep = "-"
        sep.join(["a", "b"])
        requests.post("http://x", timeout=3)
        return None

    def request_finished(self, request, block_ids):
        self._ev.wait()
        return False, None
"""
    assert lines(check(tree, source, **BLOCKING)) == [line_of(source, "self._ev.wait()")]


def test_guards_on_the_same_receiver(tree):
    source = """
class C(KVConnectorBase_V1):
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        fut = self._futures.get(request.request_id)
        if self._non_block and not fut.done():
            return None, False
        fut.result()
        pending = self._pending.get(request.request_id)
        if pending is not None and not pending.future.done():
            return None, False
        pending.future.result()
        return 0, False

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        if self._f.done():
            self._f.result()
        if self._sock.poll(10):
            self._sock.recv()
        self._g.result()
"""
    assert lines(check(tree, source, **BLOCKING)) == [line_of(source, "fut.result()"),
                                                     line_of(source, "self._g.result()")]


def test_socket_with_receive_timeout(tree):
    source = """
class Client:
    def __init__(self, ctx):
        self.sock = ctx.socket(zmq.REQ)
        {setup}

    def ask(self, keys):
        self.sock.send(keys)
        return self.sock.recv()


class C(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self._client = Client(zmq.Context())

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return len(self._client.ask(request.block_hashes)), False
"""
    assert lines(check(tree, source.format(setup="self.sock.setsockopt(zmq.RCVTIMEO, 100)"),
                       **BLOCKING)) == []
    assert lines(check(tree, source.format(setup="pass"), **BLOCKING)) == [
        line_of(source, "self.sock.recv()")]


def test_depth_and_entry_points(tree):
    source = """
def a():
    b()


def b():
    time.sleep(1)


class C(KVConnectorBase_V1):
    def build_connector_meta(self, scheduler_output):
        a()
"""
    sleep = line_of(source, "time.sleep(1)")
    assert lines(check(tree, source, **BLOCKING)) == [sleep]
    assert lines(check(tree, source, **{**BLOCKING, "depth": 1})) == []
    assert lines(check(tree, source, calls=["time.sleep"], entry_points=["conn.a"])) == [sleep]


PROBE = """
class Half:
    def __init__(self):
        self._probes = {}
        self._lookup_cache = {}
        self._pending = {}
        self._budget = 0
        self._stats = Stats()
        self._plans = []

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        rid = request.request_id
        self._probes.pop(rid, None)
        self._probes[rid] = 1
        self._lookup_cache[rid] = 2
        self._pending[rid] = 3
        self._budget += 1
        self._stats.record(rid)
        self._plan(rid)
        return 0, False

    def _plan(self, rid):
        self._plans.append(rid)

    def request_finished(self, request, block_ids):
        self._probes.pop(request.request_id, None)
        return False, None

    def build_connector_meta(self, scheduler_output):
        self._budget = 0
        return None


class Stats:
    def record(self, rid):
        self.seen = rid


class C(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self._half = Half()

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return self._half.get_num_new_matched_tokens(request, num_computed_tokens)

    def request_finished(self, request, block_ids):
        return self._half.request_finished(request, block_ids)

    def build_connector_meta(self, scheduler_output):
        return self._half.build_connector_meta(scheduler_output)
"""


def test_probe_writes(tree):
    found = check(tree, PROBE, **WRITES)
    assert lines(found) == [line_of(PROBE, "self._pending[rid] = 3"),
                            line_of(PROBE, "self._plans.append")]
    pending = found[0]
    assert "self._pending[rid] = ..." in pending.message
    assert [s.note for s in pending.path] == [
        "context: C.get_num_new_matched_tokens", "calls self._half.get_num_new_matched_tokens",
        "writes self._pending[rid] = ..."]
    assert found[1].path[-2].note == "calls self._plan"


def test_probe_writes_strict_and_follow_attrs(tree):
    strict = check(tree, PROBE, methods=["get_num_new_matched_tokens"], forbid_writes=True)
    writes = ["self._probes.pop(rid", "self._probes[rid] = 1", "self._lookup_cache[rid] = 2",
              "self._pending[rid] = 3", "self._budget += 1", "self._plans.append"]
    assert lines(strict) == [line_of(PROBE, w) for w in writes]
    wide = check(tree, PROBE, **{**WRITES, "follow_attrs": True})
    assert lines(wide) == [line_of(PROBE, w) for w in (writes[3], writes[5], "self.seen = rid")]


COMMITTED = """
class C(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self._specs = {}
        self._states = {}
        self._hits = {}

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        rid = request.request_id
        self._specs[rid] = None
        state = self._states.get(rid)
        if state is None:
            self._states[rid] = [0]
        if rid not in self._hits:
            self._hits[rid] = 16
        return self._hits[rid], True

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        self._specs[request.request_id] = blocks
        self._states[request.request_id] = [num_external_tokens]
        self._hits[request.request_id] = num_external_tokens

    def request_finished(self, request, block_ids):
        for d in (self._specs, self._states, self._hits):
            d.pop(request.request_id, None)
        self._specs.pop(request.request_id, None)
        self._states.pop(request.request_id, None)
        self._hits.pop(request.request_id, None)
        return False, None
"""


def test_probe_overwriting_committed_state(tree):
    # without committed_by, request_finished's removals make every write a memo
    assert check(tree, COMMITTED, **WRITES) == []
    found = check(tree, COMMITTED, **{**WRITES, "committed_by": ["update_state_after_alloc"]})
    assert lines(found) == [line_of(COMMITTED, "self._specs[rid] = None")]
    assert "C.update_state_after_alloc fills self._specs too" in found[0].message


def test_a_vllm_connector_driving_the_subject_is_a_host(tree):
    """vLLM's own wrapper connector (context) calls the subject's adapter: its
    hooks reach the adapter's wait, reported there; the host's own code is
    analysed but never reported."""
    adapter = """class Adapter:
    def __init__(self, client):
        self._client = client

    def lookup(self, request_id):
        fut = self._client.submit(request_id)
        return fut.result()

    def answered(self, request_id):
        fut = self._client.submit(request_id)
        if not fut.query():
            return None
        return fut.result()
"""
    host = """import time

from adapterpkg.adapter import Adapter
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class HostConnector(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self._adapter = Adapter(None)

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        self._adapter.answered(request.request_id)
        return self._adapter.lookup(request.request_id), False

    def build_connector_meta(self, scheduler_output):
        time.sleep(1)
"""
    subject = tree({"adapterpkg/__init__.py": "", "adapterpkg/adapter.py": adapter})
    v1 = "vllm/distributed/kv_transfer/kv_connector/v1"
    context = tree({f"{v1}/hostconn.py": host})
    analysis = analyse(Request(sources=[str(subject)],
                               context=[str(context), str(stub_root())]))
    rule = Rule(id="t-forbid", title="t", severity="warning", rationale="r", kind="forbid",
                params=dict(BLOCKING, guarded_by={"*.result": ["*"]}),
                applies_to=AppliesTo(base_class=(BASE,)), examples=(), help="h",
                pack="test", path=Path("t.yaml"))
    found = run_rules(analysis, [rule])
    assert analysis.graph.graph["hosts"] == [
        "vllm.distributed.kv_transfer.kv_connector.v1.hostconn"]
    # the bare wait in lookup; answered's wait follows a question to the same future
    assert [(f.file, f.line, f.function.rpartition(".")[2]) for f in found] == [
        ("adapterpkg/adapter.py", adapter.splitlines().index("        return fut.result()") + 1,
         "lookup")]


HELPERS = """

def ensure_send(socket, data):
    socket.send(data)


def ensure_recv(socket):
    return socket.recv()


class Puller:
    def __init__(self):
        self._ctx = zmq.Context()
        threading.Thread(target=self._run, daemon=True).start()

    def _socket(self):
        sock = self._ctx.socket(zmq.REQ)
        SETUP
        return sock

    def _run(self):
        while True:
            sock = self._socket()
            ensure_send(sock, b"ping")
            ensure_recv(sock)


class C(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self._puller = Puller()
"""
BACKGROUND = dict(background=True, calls=["*.recv"],
                  only_after={"*.recv*": ["send"]},
                  timeout_setters={"*.recv*": ["setsockopt:RCVTIMEO"]})


def test_a_reply_awaited_through_helpers_is_judged_at_the_callers(tree):
    """The send and the recv are each in a helper given the socket: the
    caller sends first, so the helper's recv waits for a reply, bounded only
    if the socket's factory sets a receive timeout (named in the path)."""
    bare = HELPERS.replace("SETUP", "pass")
    found = check(tree, bare, **BACKGROUND)
    assert [(f.line, f.function.rpartition(".")[2]) for f in found] == [
        (line_of(bare, "return socket.recv()"), "ensure_recv")]
    assert found[0].path[-1].function.endswith("Puller._socket")
    bounded = HELPERS.replace("SETUP", "sock.setsockopt(zmq.RCVTIMEO, 5000)")
    assert check(tree, bounded, **BACKGROUND) == []
