"""`kvflowmap lifecycle` end to end: containers, hooks, hand-offs, reports; text and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvflowmap.check.stubs import stub_root
from kvflowmap.cli import main

CONNECTOR = '''
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Tiny(KVConnectorBase_V1):
    def __init__(self, vllm_config, role):
        self._loading = set()
        self._engine = None

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        self._loading.add(request.request_id)
        self._engine.load(request.request_id)

    def get_finished(self, finished_req_ids):
        done = set(self._loading)
        self._loading.clear()
        return None, done
'''


@pytest.fixture
def repo(tree) -> Path:
    root = tree({"tiny/__init__.py": "", "tiny/conn.py": CONNECTOR})
    (root / "pyproject.toml").write_text(
        f'[tool.kvflowmap]\nsources = ["tiny"]\ncontext = ["{stub_root()}"]\n')
    return root


def test_text_names_container_adder_and_report(repo, monkeypatch, capsys) -> None:
    monkeypatch.chdir(repo)
    assert main(["lifecycle", "-q"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tiny: 1 request-keyed containers")
    assert "  Tiny._loading   (tiny.conn)" in out
    assert "    add      update_state_after_alloc:" in out
    assert "    reset    get_finished:" in out
    assert "    report   Tiny.get_finished" in out
    hook = out[out.index("\n    update_state_after_alloc:", out.index("Hooks (")):]
    assert "      adds     _loading" in hook
    assert "self._engine.load (handover :" in hook
    assert "      reports  Tiny.get_finished" in hook


def test_json_is_stable_and_written_to_file(repo, monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.chdir(repo)
    out = tmp_path / "lc.json"
    assert main(["lifecycle", "tiny", "--context", stub_root(), "-f", "json", "-o", str(out),
                 "-q"]) == 0
    assert capsys.readouterr().out == ""
    text = out.read_text()
    (pkg,) = json.loads(text)["packages"]
    assert pkg["package"] == "tiny"
    (c,) = pkg["containers"]
    assert c["label"] == "Tiny._loading" and c["owner"] == "tiny.conn.Tiny"
    assert [a["function"] for a in c["adds"]] == ["Tiny.update_state_after_alloc"]
    assert c["reported_by"] == ["Tiny.get_finished"]
    (cls,) = pkg["classes"]
    fns = {f["name"]: f for f in cls["functions"]}
    alloc = fns["update_state_after_alloc"]
    assert alloc["adds"] == ["Tiny._loading"] and alloc["sides"] == ["scheduler"]
    assert alloc["reports"] == ["Tiny.get_finished"]
    assert {"kind": "handover", "target": "self._engine.load", "line": 11} in alloc["hands"]
    assert fns["get_finished"]["resets"] == ["Tiny._loading"]
    assert main(["lifecycle", "tiny", "--context", stub_root(), "-f", "json", "-q"]) == 0
    assert capsys.readouterr().out == text


MULTI = '''
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Multi(KVConnectorBase_V1):
    def __init__(self, vllm_config, role):
        self._connectors = []
        self._extra_saves = {}

    def request_finished(self, request, blocks):
        self._extra_saves[request.request_id] = len(self._connectors) - 1
        return True, None

    def get_finished(self, finished_req_ids):
        finished_sending = set()
        for c in self._connectors:
            sending, recving = c.get_finished(finished_req_ids)
            for req_id in sending or ():
                pending = self._extra_saves.get(req_id)
                if pending == 1:
                    del self._extra_saves[req_id]
                    finished_sending.add(req_id)
        return finished_sending, None
'''


def test_ids_a_sub_connector_reports_are_ids(tree, monkeypatch, capsys) -> None:
    # ``sending, recving = c.get_finished(...)`` then ``for req_id in sending or ()``:
    # what a report method returns holds ids, so the ``del`` is a removal
    out = _lifecycle_text(tree, monkeypatch, capsys, "multi", MULTI)
    block = out[out.index("  Multi._extra_saves"):]
    assert "    remove   get_finished:" in block.split("\n\n")[0]


SIBLINGS = '''
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class BaseWorker:
    def __init__(self):
        self._recving = {}

    def get_finished(self, finished_req_ids):
        done = set()
        for req_id in list(self._recving):
            del self._recving[req_id]
            done.add(req_id)
        return None, done


class PullWorker(BaseWorker):
    def start_load_kv(self, metadata):
        for request in metadata.requests:
            self._recving[request.request_id] = request


class PushWorker(BaseWorker):
    def on_push(self, request):
        self._recving[request.request_id] = request


class Pull(KVConnectorBase_V1):
    def __init__(self, vllm_config, role):
        self.worker = PullWorker()

    def start_load_kv(self, forward_context, **kwargs):
        self.worker.start_load_kv(self._get_connector_metadata())

    def get_finished(self, finished_req_ids):
        return self.worker.get_finished(finished_req_ids)


class Push(KVConnectorBase_V1):
    def __init__(self, vllm_config, role):
        self.worker = PushWorker()

    def start_load_kv(self, forward_context, **kwargs):
        for request in self._get_connector_metadata().requests:
            self.worker.on_push(request)

    def get_finished(self, finished_req_ids):
        return self.worker.get_finished(finished_req_ids)
'''


def test_an_inherited_container_is_one_row_per_object_with_the_bases_sites(
        tree, monkeypatch, capsys) -> None:
    """The pull and the push worker each hold their own ``_recving``: a row
    each, with its own adds and the removal the base's get_finished makes,
    not the add under one class and the removal under the base."""
    out = _lifecycle_text(tree, monkeypatch, capsys, "sib", SIBLINGS)
    pull = out[out.index("  PullWorker._recving   (sib.conn)"):]
    assert pull.splitlines()[1:3] == ["    add      start_load_kv:19",
                                      "    remove   BaseWorker.get_finished:11"], pull[:300]
    push = out[out.index("  PushWorker._recving   (sib.conn)"):]
    assert push.splitlines()[1:3] == ["    add      on_push:24",
                                      "    remove   BaseWorker.get_finished:11"], push[:300]
    assert "  BaseWorker._recving " not in out


HELPERS = '''
import queue
import threading

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class LookupClient:
    def __init__(self):
        self._lookups = {}

    def lookup(self, req_id):
        self._lookups[req_id] = 1

    def discard(self, req_id):
        self._lookups.pop(req_id, None)


class RecvThread(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.request_queue = queue.Queue()
        self.finished = set()

    def add_request(self, req_id):
        self.request_queue.put(req_id)

    def run(self):
        while True:
            req_id = self.request_queue.get()
            self.finished.add(req_id)

    def get_and_clear_finished(self):
        done = self.finished.copy()
        self.finished.clear()
        return done


class Conn(KVConnectorBase_V1):
    def __init__(self, vllm_config, role):
        self.client = LookupClient()
        self.thread = RecvThread()

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        self.client.lookup(request.request_id)
        return 0, False

    def request_finished(self, request, blocks):
        self.client.discard(request.request_id)
        return False, None

    def start_load_kv(self, forward_context, **kwargs):
        for req in self._get_connector_metadata().requests:
            self.thread.add_request(req.request_id)

    def get_finished(self, finished_req_ids):
        return None, self.thread.get_and_clear_finished()
'''


def test_helper_objects_queues_and_what_a_helper_returns(tree, monkeypatch, capsys) -> None:
    """``self.client.discard(rid)`` calls the analysed client's method (no
    container named ``client``: the removal is the client's own); a queue's
    ``get()`` in the thread's loop takes what ``put`` handed over; and the
    thread's set reaches ``Conn.get_finished``, which returns the copy the
    thread's helper makes of it."""
    out = _lifecycle_text(tree, monkeypatch, capsys, "hlp", HELPERS)
    containers = out[:out.index("Hooks (")]
    assert "Conn.client" not in containers
    assert "    remove   discard:15" in _row(containers, "LookupClient._lookups")
    queue_row = _row(containers, "RecvThread.request_queue")
    assert "    add      add_request:25" in queue_row and "    remove   run:29" in queue_row
    assert "    report   Conn.get_finished" in _row(containers, "RecvThread.finished")


def _row(text: str, label: str) -> list[str]:
    """The lines of one container's row: its label line and those below it."""
    lines = text.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith(f"  {label}   "))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("    ")),
               len(lines))
    return lines[start:end]


def _lifecycle_text(tree, monkeypatch, capsys, pkg: str, source: str) -> str:
    """``kvflowmap lifecycle``'s text for package ``pkg`` holding ``source``,
    run from a project whose ``pyproject.toml`` names it."""
    root = tree({f"{pkg}/__init__.py": "", f"{pkg}/conn.py": source})
    (root / "pyproject.toml").write_text(
        f'[tool.kvflowmap]\nsources = ["{pkg}"]\ncontext = ["{stub_root()}"]\n')
    monkeypatch.chdir(root)
    assert main(["lifecycle", "-q"]) == 0
    return str(capsys.readouterr().out)
