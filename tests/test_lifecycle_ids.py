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


TASKS = """import queue
import threading
from dataclasses import dataclass

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


@dataclass
class SaveTask:
    saving: list


class Meta:
    def __init__(self, save_intents=None):
        self.save_intents = save_intents or {}


class Sched:
    def build_connector_meta(self, scheduler_output):
        intents = {}
        for req in scheduler_output.scheduled_new_reqs:
            intents[req.req_id] = 1
        return Meta(save_intents=intents)


class Worker:
    def __init__(self):
        self._save_queue = queue.Queue()
        self._pending = {}
        self._done = set()
        self._submitted = {}
        self._finished = set()
        threading.Thread(target=self._save_worker, daemon=True).start()

    def wait_for_save(self, metadata):
        self._save_queue.put(self._make_task(metadata.save_intents))

    def start_load_kv(self, metadata):
        for req_id in self._filtered(metadata.save_intents):
            self._pending[req_id] = 1
            self._submitted[req_id] = 2

    def _filtered(self, intents):
        if not intents:
            return intents
        kept = {}
        for req_id, intent in intents.items():
            kept[req_id] = intent
        return kept

    def track(self, shm, metadata):
        self._by_shm[shm] = set(metadata.save_intents)

    def poll(self):
        for shm, req_ids in self._by_shm.items():
            first = next(iter(req_ids))
            state = self._submitted.get(first)

    def _make_task(self, save_intents):
        request_ids = list(save_intents)
        return SaveTask(saving=request_ids)

    def _save_worker(self):
        while True:
            task = self._save_queue.get()
            self._process([task])

    def _process(self, batch):
        all_ids = [req_id for task in batch for req_id in task.saving]
        self._complete(all_ids)

    def _complete(self, request_ids):
        for req_id in request_ids:
            self._done.add(req_id)
            left = self._pending.get(req_id, 0)
            gen = self._submitted.pop(req_id, None)
            both = self._done & self._finished


class Conn(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self.worker = Worker()

    def wait_for_save(self):
        self.worker.wait_for_save(self._get_connector_metadata())

    def start_load_kv(self, forward_context, **kwargs):
        self.worker.start_load_kv(self._get_connector_metadata())
"""


def _lifecycle(tree, source: str):
    root = tree({"conn/__init__.py": source})
    return build_lifecycle(analyse(Request(sources=[str(root)], context=[str(stub_root())])).linker)


def test_ids_flow_through_a_dataclass_task_a_comprehension_and_a_return(tree):
    lc = _lifecycle(tree, TASKS)
    assert "request_ids" in lc.state.of("conn.Worker._make_task").colls  # through list(...)
    assert "saving" in lc.state.keyed_attrs  # the dataclass field given the ids
    assert "all_ids" in lc.state.of("conn.Worker._process").colls  # the comprehension
    complete = lc.state.of("conn.Worker._complete")
    assert "req_id" in complete.ids
    assert "_done" in lc.state.keyed_attrs
    assert "both" in complete.colls  # a set operator keeps the left operand's ids
    # a dict's ``get(key)`` and ``pop(key, None)`` read the request's entry: not ids
    assert "left" not in complete.ids and "gen" in complete.records
    assert "gen" not in complete.outcomes
    # what ``_filtered`` returns is its id collection, flowing back to the caller
    assert "_filtered" in lc.state.coll_returners
    assert "req_id" in lc.state.of("conn.Worker.start_load_kv").ids


def test_a_container_of_id_collections_under_other_keys(tree):
    lc = _lifecycle(tree, TASKS)
    assert "_by_shm" in lc.state.coll_valued and "_by_shm" not in lc.state.keyed_attrs
    poll = lc.state.of("conn.Worker.poll")
    assert "req_ids" in poll.colls and "shm" not in poll.ids
    assert "first" in poll.ids  # next(iter(...)) of an id collection
    assert "state" in poll.records


def test_a_save_thread_fed_by_a_queue_is_on_the_save_path_only(tree):
    lc = _lifecycle(tree, TASKS)
    assert {"conn.Worker._save_worker", "conn.Worker._process",
            "conn.Worker._complete"} <= lc.save_only
    assert "conn.Worker.start_load_kv" not in lc.save_only
    assert "conn.Worker._filtered" not in lc.save_only


SWAP = """from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Conn(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self._done = set()

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        self._done.add(request.request_id)

    def get_finished(self, finished_req_ids):
        done, self._done = self._done, set()
        for rid in done:
            print(rid)
        return None, done
"""


def test_a_container_swapped_out_is_a_collection_of_ids(tree):
    got = _lifecycle(tree, SWAP).state.of("conn.Conn.get_finished")
    assert "done" in got.colls and "done" not in got.ids
    assert "rid" in got.ids


def test_a_container_keyed_by_an_element_of_an_id_collection(tree):
    """``self._futures[request_ids[0]] = (fut, request_ids[1:])``: one
    future for a batch, filed under its first request; a loop over the
    container then walks request ids."""
    source = """from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Conn(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self._futures = {}

    def start_load_kv(self, forward_context, **kwargs):
        ids = []
        for req in self._get_connector_metadata().requests:
            ids.append(req.req_id)
        self._submit(ids)

    def _submit(self, request_ids):
        self._futures[request_ids[0]] = (self._client.retrieve(request_ids), request_ids[1:])

    def get_finished(self, finished_req_ids):
        done = set()
        for request_id, (fut, others) in self._futures.items():
            if fut.done():
                done.add(request_id)
        return None, done
"""
    root = tree({"conn/__init__.py": source})
    lc = build_lifecycle(analyse(Request(sources=[str(root)],
                                         context=[str(stub_root())])).linker)
    assert [c.label for c in lc.containers] == ["Conn._futures"]
    assert "request_id" in lc.state.of("conn.Conn.get_finished").request_names()


GROUPED = """import asyncio
from collections import defaultdict

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Meta:
    def __init__(self):
        self.reqs_to_recv = {}

    def add(self, request_id, remote, blocks):
        self.reqs_to_recv[request_id] = (remote, blocks)


class Conn(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self.loop = asyncio.new_event_loop()
        self.done = set()

    def build_connector_meta(self, scheduler_output):
        meta = Meta()
        for r in scheduler_output.scheduled_new_reqs:
            meta.add(r.req_id, "host", [])
        return meta

    def start_load_kv(self, metadata, **kwargs):
        pulls = self._group(metadata)
        for path, rows in pulls.items():
            asyncio.run_coroutine_threadsafe(self._pull(path, rows), self.loop)

    def _group(self, metadata):
        pulls = defaultdict(list)
        for req_id, (remote, blocks) in metadata.reqs_to_recv.items():
            pulls[remote].append((req_id, blocks))
        return pulls

    async def _pull(self, path, rows):
        req_ids, blocks = map(list, zip(*rows))
        try:
            await self._send(path, blocks)
        except Exception:
            FAILURE
        self.done.update(req_ids)

    async def _send(self, path, blocks):
        pass

    def get_finished(self, finished_req_ids):
        done, self.done = self.done, set()
        return None, done
"""


def _not_dropped(tree, failure: str):
    from kvflowmap.check.engine import run_rules
    from kvflowmap.check.loader import default_rule_dirs, load_rules

    root = tree({"conn/__init__.py": GROUPED.replace("FAILURE", failure)})
    a = analyse(Request(sources=[str(root)], context=[str(stub_root())]))
    rules = [r for r in load_rules(default_rule_dirs())[0] if r.id == "kvc-request-id-not-dropped"]
    return a, [f for f in run_rules(a, rules) if f.rule == "kvc-request-id-not-dropped"]


def test_ids_grouped_by_peer_and_transposed_back_are_followed(tree):
    a, found = _not_dropped(tree, "return")
    lc = build_lifecycle(a.linker)
    assert "pulls" in lc.state.of("conn.Conn._group").groups
    assert "rows" in lc.state.of("conn.Conn.start_load_kv").colls
    pull = lc.state.of("conn.Conn._pull")
    assert "req_ids" in pull.colls and "blocks" not in pull.colls
    assert [f.function for f in found] == ["conn.Conn._pull"]


def test_a_failed_pull_that_still_reports_is_no_drop(tree):
    _, found = _not_dropped(tree, "self.done.update(req_ids)\n            return")
    assert found == []
