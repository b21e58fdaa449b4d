"""``path`` and ``where`` follow request ids through a connector's own state
(``nav.statelinks``): a writer method, a reader of the same object (the class,
a base or a subclass), never a sibling subclass."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kvflowmap.api import Request, analyse
from kvflowmap.check.stubs import stub_root
from kvflowmap.nav import paths
from kvflowmap.lifecycle.model import build_lifecycle
from kvflowmap.nav.statelinks import with_state_links
from kvflowmap.nav.where import WhereResult, where

# the facade both fixtures share: vLLM reaches the Pull worker through it
CONNECTOR = '''

class Connector(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self.worker = PullWorker()

    def start_load_kv(self, forward_context, **kwargs):
        self.worker.start_load_kv(self._get_connector_metadata().requests)

    def get_finished(self, finished_req_ids):
        return self.worker.get_finished(finished_req_ids)
'''

SOURCE = '''
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class BaseWorker:
    def __init__(self):
        self._done = {}

    def get_finished(self, finished_req_ids):
        finished = set(self._done)
        self._done.clear()
        return set(), finished


class PullWorker(BaseWorker):
    def start_load_kv(self, requests):
        for request in requests:
            self._read(request)

    def _read(self, request):
        self._done[request.request_id] = request


class PushWorker(BaseWorker):
    def report(self):
        return list(self._done)

''' + CONNECTOR

MOD = "conn.worker"


def _analysed(tmp_path_factory, name: str, source: str):
    root: Path = tmp_path_factory.mktemp(name) / "conn"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "worker.py").write_text(textwrap.dedent(source))
    return analyse(Request(sources=[str(root)], context=[str(stub_root())], use_cache=False))


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    a = _analysed(tmp_path_factory, "statelinks", SOURCE)
    assert f"{MOD}.PullWorker._read" in a.graph
    assert f"{MOD}.PullWorker._done" not in a.graph  # the analysis graph is unchanged
    return with_state_links(a.linker)


def test_writer_reaches_reader_of_same_object(graph) -> None:
    result = paths.find_paths(graph, "PullWorker._read", "BaseWorker.get_finished")
    assert isinstance(result, paths.PathResult)
    first = result.paths[0]
    assert [s.kind for s in first] == ["produces", "consumes"]
    assert first[0].dst == f"{MOD}.PullWorker._done"
    assert first[0].line == 21 and first[1].line == 10
    assert "puts ids into PullWorker._done" in first[0].note


def test_the_scheduler_keeps_reported_ids_in_a_set_its_waiting_check_reads(graph) -> None:
    """From the worker's state to vLLM taking the request out of
    WAITING_FOR_REMOTE_KVS: through the carrier, then the scheduler's own
    ``finished_recving_kv_req_ids``, which the carrier's consumer fills with
    the ids it walks and ``_update_waiting_for_remote_kv`` reads."""
    sched = "vllm.v1.core.sched.scheduler.Scheduler"
    result = paths.find_paths(graph, "PullWorker._read",
                              f"{sched}._update_waiting_for_remote_kv")
    assert isinstance(result, paths.PathResult)
    nodes = [s.dst for s in result.paths[0]]
    assert nodes[-3:] == [f"{sched}._update_from_kv_xfer_finished",
                          f"{sched}.finished_recving_kv_req_ids",
                          f"{sched}._update_waiting_for_remote_kv"], nodes
    fill, take = result.paths[0][-2:]
    assert (fill.kind, fill.line, take.kind, take.line) == ("produces", 216, "consumes", 166)
    # the set is filled only from the ids walked in the carrier: finish_requests,
    # which discards from it, reads it and is no writer
    assert not graph.has_edge(f"{sched}.finish_requests", f"{sched}.finished_recving_kv_req_ids")


def test_where_a_field_names_the_functions_that_first_put_its_ids_in_state(graph) -> None:
    """``where finished_recving`` lists, beside the functions that return the
    set, the one that first puts the id in the state they return."""
    found = where(graph, "vllm.v1.outputs.KVConnectorOutput.finished_recving")
    assert isinstance(found, WhereResult)
    fed = found.get("fed")
    assert [(s.node, s.line) for s in fed] == [(f"{MOD}.PullWorker._read", 21)], fed
    assert "PullWorker._done, which BaseWorker.get_finished reads" in fed[0].note


def test_sibling_subclass_and_constructor_are_not_readers(graph) -> None:
    found = where(graph, "PullWorker._done")
    assert isinstance(found, WhereResult)
    readers = {s.node for s in found.get("consumers")}
    assert readers == {f"{MOD}.BaseWorker.get_finished"}
    assert {s.node for s in found.get("producers")} == {f"{MOD}.PullWorker._read"}
    result = paths.find_paths(graph, "PullWorker._read", "PushWorker.report")
    assert isinstance(result, paths.NoPath)


FAILURES = '''
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class BaseWorker:
    def __init__(self):
        self._failures = set()

    def _handle_failed(self, req_id, failed_req_ids):
        failed_req_ids.add(req_id)

    def get_finished(self, finished_req_ids):
        self._failures.update(finished_req_ids & set())
        failed = set()
        for req_id in tuple(self._failures):
            failed.add(req_id)
        return set(), failed


class Metadata:
    def __init__(self):
        self.reqs = {}

    def add_req(self, request):
        self.reqs[request.request_id] = request


class PullWorker(BaseWorker):
    def start_load_kv(self, requests):
        for request in requests:
            self._read(request)

    def _read(self, request):
        self._handle_failed(request.request_id, self._failures)

    def bind(self, metadata: Metadata):
        for req_id in metadata.reqs:
            self._handle_failed(req_id, self._failures)


class PushWorker(BaseWorker):
    def start_load_kv(self, requests):
        for request in requests:
            self._handle_failed(request.request_id, self._failures)

''' + CONNECTOR


@pytest.fixture(scope="module")
def failures_graph(tmp_path_factory):
    return with_state_links(_analysed(tmp_path_factory, "statelinks_failures", FAILURES).linker)


def test_a_set_filled_through_a_parameter_is_the_callers_state(failures_graph) -> None:
    # ``_handle_failed`` adds to the set ``_read`` hands it: the failure
    # reaches the report that reads ``self._failures`` (at the loop, not at
    # the ``update`` that writes it), on each concrete worker's object
    result = paths.find_paths(failures_graph, "BaseWorker._handle_failed",
                              "BaseWorker.get_finished")
    assert isinstance(result, paths.PathResult)
    first = result.paths[0]
    assert [s.kind for s in first] == ["produces", "consumes"]
    assert first[0].dst in {f"{MOD}.PullWorker._failures", f"{MOD}.PushWorker._failures"}
    assert first[0].line == 10 and first[1].line == 15


def test_a_field_is_defined_where_the_base_constructor_binds_it(failures_graph) -> None:
    found = where(failures_graph, "PullWorker._failures")
    assert isinstance(found, WhereResult)
    assert found.line == 7
    # the passing call writes the set: the caller is no reader of it
    assert f"{MOD}.PullWorker._read" not in {s.node for s in found.get("consumers")}


def test_a_field_read_through_a_typed_object_is_read_there(failures_graph) -> None:
    # ``metadata.reqs`` where ``metadata: Metadata``: the worker reads what
    # the metadata's own method filled
    found = where(failures_graph, "Metadata.reqs")
    assert isinstance(found, WhereResult)
    assert {s.node for s in found.get("producers")} == {f"{MOD}.Metadata.add_req"}
    assert {s.node for s in found.get("consumers")} == {f"{MOD}.PullWorker.bind"}


HANDED = '''
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1

ReqId = str


class Meta:
    def __init__(self):
        self.to_send: dict[ReqId, float] = {}


class Scheduler:
    def __init__(self):
        self._need_send: dict[ReqId, float] = {}

    def request_finished(self, request, block_ids):
        self._need_send[request.request_id] = 1.0
        return True, None

    def build_connector_meta(self, scheduler_output):
        meta = Meta()
        meta.to_send = self._need_send
        self._need_send = {}
        return meta


class Worker:
    def start_load_kv(self, metadata: Meta):
        for req_id in metadata.to_send:
            print(req_id)
'''


def test_a_field_handed_over_whole_is_written_there(tmp_path_factory) -> None:
    # ``meta.to_send = self._need_send``: the metadata's field gets the ids
    # the scheduler collected, and the worker reads them from it
    g = with_state_links(_analysed(tmp_path_factory, "statelinks_handed", HANDED).linker)
    found = where(g, "Meta.to_send")
    assert isinstance(found, WhereResult)
    assert {(s.node, s.line) for s in found.get("producers")} == \
        {(f"{MOD}.Scheduler.build_connector_meta", 22)}
    assert {s.node for s in found.get("consumers")} == {f"{MOD}.Worker.start_load_kv"}


BLOCKS = '''
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class RecvThread:
    def __init__(self):
        self.invalid_block_ids = set()

    def _mark_failed(self, request_id, block_ids):
        self.invalid_block_ids.update(block_ids)

    def get_and_clear_invalid_block_ids(self):
        invalid = self.invalid_block_ids
        self.invalid_block_ids = set()
        return invalid


class Worker:
    def __init__(self):
        self.recv_thread = RecvThread()

    def get_block_ids_with_load_errors(self):
        return self.recv_thread.get_and_clear_invalid_block_ids()


class Connector(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self.worker = Worker()

    def get_block_ids_with_load_errors(self):
        return self.worker.get_block_ids_with_load_errors()
'''


def test_failed_blocks_reach_the_hook_through_a_helpers_state(tmp_path_factory) -> None:
    # blocks are not request ids, yet a failure's blocks reach vLLM through
    # the container the failed-blocks hook drains (here a helper's)
    g = with_state_links(_analysed(tmp_path_factory, "blocks", BLOCKS).linker)
    found = where(g, "RecvThread.invalid_block_ids")
    assert isinstance(found, WhereResult)
    assert {s.node for s in found.get("producers")} == {f"{MOD}.RecvThread._mark_failed"}
    assert {s.node for s in found.get("consumers")} == \
        {f"{MOD}.RecvThread.get_and_clear_invalid_block_ids"}
    result = paths.find_paths(g, "RecvThread._mark_failed",
                              "RecvThread.get_and_clear_invalid_block_ids")
    assert isinstance(result, paths.PathResult)
    first = result.paths[0]
    assert [s.kind for s in first] == ["produces", "consumes"]
    assert first[0].line == 10 and first[1].line == 13
    assert "puts failed blocks into RecvThread.invalid_block_ids" in first[0].note


def test_failed_blocks_swapped_out_in_one_statement_are_read_there(tmp_path_factory) -> None:
    # ``invalid, self._x = self._x, set()``: the swap reads the blocks out
    # (binding an empty set is no fill), so the failure reaches the hook
    source = BLOCKS.replace(
        "        invalid = self.invalid_block_ids\n        self.invalid_block_ids = set()\n",
        "        invalid, self.invalid_block_ids = self.invalid_block_ids, set()\n")
    assert source != BLOCKS
    g = with_state_links(_analysed(tmp_path_factory, "swapped", source).linker)
    found = where(g, "RecvThread.invalid_block_ids")
    assert isinstance(found, WhereResult)
    assert {s.node for s in found.get("producers")} == {f"{MOD}.RecvThread._mark_failed"}
    assert {(s.node, s.line) for s in found.get("consumers")} == \
        {(f"{MOD}.RecvThread.get_and_clear_invalid_block_ids", 13)}


def test_a_list_of_helper_threads_walked_for_their_blocks_holds_no_blocks(tmp_path_factory) -> None:
    # ``for t in self.recv_threads: blocks |= t.get_and_clear_...()`` walks
    # helper objects; what reaches the hook is each thread's own container
    source = BLOCKS.replace(
        "        self.recv_thread = RecvThread()\n",
        "        self.recv_threads = []\n"
        "        for _ in range(2):\n"
        "            self.recv_threads.append(RecvThread())\n").replace(
        "        return self.recv_thread.get_and_clear_invalid_block_ids()\n",
        "        blocks = set()\n"
        "        for t in self.recv_threads:\n"
        "            blocks |= t.get_and_clear_invalid_block_ids()\n"
        "        return blocks\n")
    assert source.count("recv_threads") == 3
    g = with_state_links(_analysed(tmp_path_factory, "threads", source).linker)
    assert f"{MOD}.Worker.recv_threads" not in g
    found = where(g, "RecvThread.invalid_block_ids")
    assert isinstance(found, WhereResult)
    assert {s.node for s in found.get("producers")} == {f"{MOD}.RecvThread._mark_failed"}


def test_a_field_asked_for_under_its_base_class_names_the_leaf_nodes(tmp_path_factory) -> None:
    a = _analysed(tmp_path_factory, "inherited", SOURCE)
    g = with_state_links(a.linker)
    found = where(g, "BaseWorker._done", a.linker.model, a.linker.classes)
    assert isinstance(found, WhereResult)
    assert found.node == f"{MOD}.PullWorker._done"


JUNCTION = '''
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


ReqId = str


class Meta:
    def __init__(self):
        self.to_load: dict[ReqId, list[int]] = {}
        self.to_save: dict[ReqId, list[int]] = {}


class Scheduler:
    def __init__(self):
        self._loads = {}
        self._saves = {}

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        self._loads[request.request_id] = blocks

    def request_finished(self, request, block_ids):
        self._saves[request.request_id] = block_ids
        return True, None

    def build_connector_meta(self, scheduler_output):
        meta = Meta()
        meta.to_load = dict(self._loads)
        meta.to_save = dict(self._saves)
        return meta


class Worker:
    def __init__(self):
        self._recving = set()
        self._sending = set()

    def start_load_kv(self, metadata: Meta):
        for req_id in metadata.to_load:
            self._recving.add(req_id)
        for req_id in metadata.to_save:
            self._sending.add(req_id)

    def report_loads(self):
        return set(self._recving)

    def report_saves(self):
        return set(self._sending)


class Connector(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self.scheduler = Scheduler()
        self.worker = Worker()

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        self.scheduler.update_state_after_alloc(request, blocks, num_external_tokens)

    def request_finished(self, request, block_ids):
        return self.scheduler.request_finished(request, block_ids)

    def build_connector_meta(self, scheduler_output):
        return self.scheduler.build_connector_meta(scheduler_output)

    def start_load_kv(self, forward_context, **kwargs):
        self.worker.start_load_kv(self._get_connector_metadata())

    def get_finished(self, finished_req_ids):
        return self.worker.report_saves(), self.worker.report_loads()
'''


def test_a_writer_is_passed_only_from_the_field_its_write_depends_on(tmp_path_factory) -> None:
    g = with_state_links(_analysed(tmp_path_factory, "junction", JUNCTION).linker)
    load = paths.find_paths(g, "Scheduler.update_state_after_alloc", "Worker.report_loads")
    assert isinstance(load, paths.PathResult)
    assert [s.dst.rpartition(".")[2] for s in load.paths[0]][:4] == \
        ["_loads", "build_connector_meta", "to_load", "start_load_kv"]
    # what the load hook recorded never turns into the saves the worker
    # reports: not through the metadata's load field, and not through the
    # whole metadata object vLLM carries either (the runner only binds it to
    # the connector; what it hands to the scheduler comes from get_finished)
    saves = paths.find_paths(g, "Scheduler.update_state_after_alloc", "Worker.report_saves",
                             max_paths=20)
    assert isinstance(saves, paths.NoPath)


HELPER_HANDED = '''
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Worker:
    def __init__(self):
        self._failures = set()
        self._invalid = set()

    def _handle_failed(self, req_id, failed_req_ids=None):
        self._invalid.add(req_id)
        if failed_req_ids is not None:
            failed_req_ids.add(req_id)

    def _read(self, request):
        self._handle_failed(request.request_id, self._failures)

    def _write(self, request):
        self._handle_failed(request.request_id)

    def start_load_kv(self, requests):
        for request in requests:
            self._read(request)
            self._write(request)

    def get_finished(self, finished_req_ids):
        failed = set(self._failures)
        self._failures.clear()
        return set(), failed

    def get_block_ids_with_load_errors(self):
        out = set(self._invalid)
        self._invalid.clear()
        return out


class Connector(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self.worker = Worker()

    def start_load_kv(self, forward_context, **kwargs):
        self.worker.start_load_kv(self._get_connector_metadata().requests)

    def get_finished(self, finished_req_ids):
        return self.worker.get_finished(finished_req_ids)
'''


def test_a_helper_fills_only_the_container_its_caller_hands_it(tmp_path_factory) -> None:
    g = with_state_links(_analysed(tmp_path_factory, "handed", HELPER_HANDED).linker)
    # ``_read`` hands ``self._failures``: through the helper into it
    read = paths.find_paths(g, "Worker._read", "Worker.get_finished")
    assert isinstance(read, paths.PathResult)
    assert [s.dst.rpartition(".")[2] for s in read.paths[0]] == \
        ["_handle_failed", "_failures", "get_finished"]
    # ``_write`` hands nothing: the helper fills no container of its caller
    write = paths.find_paths(g, "Worker._write", "Worker.get_finished")
    assert isinstance(write, paths.NoPath)
    # from the helper itself, every container some caller hands it
    helper = paths.find_paths(g, "Worker._handle_failed", "Worker.get_finished")
    assert isinstance(helper, paths.PathResult)


DEPS = '''
class Worker:
    def report(self, out):
        done = self._notifs()
        done.update(self._replicated)
        failed = set()
        for req_id in tuple(self._failures):
            if req_id not in self._transfers:
                failed.add(req_id)
        errors = set()
        errors.update(self._on_failed(out.failed_recving))
        errors.update(self._on_blocks(out.invalid_block_ids, out.tokens))
        return done, failed
'''


def test_a_statement_depends_on_what_it_reads_not_what_it_fills(tmp_path_factory) -> None:
    """``_deps``: a local collection filled in a loop depends on what the loop
    walks; a call depends on its arguments, not on the collection its result
    is added to, nor on the local its result is bound to."""
    from kvflowmap.lifecycle.view import view
    from kvflowmap.nav.statelinks import _deps

    a = _analysed(tmp_path_factory, "deps", DEPS)
    fn = view(a.linker.model, "conn.worker.Worker.report")
    assert fn is not None
    line = {text: i + 1 for i, text in enumerate(DEPS.splitlines())}
    ret = _deps(fn, line["        return done, failed"])
    assert "_failures" in ret  # failed <- the loop over _failures
    assert "_replicated" in ret
    blocks = _deps(fn, line["        errors.update(self._on_blocks(out.invalid_block_ids, out.tokens))"])
    assert "invalid_block_ids" in blocks and "failed_recving" not in blocks
    notifs = _deps(fn, line["        done = self._notifs()"])
    assert "_replicated" not in notifs


JOBS = '''
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Worker:
    def __init__(self):
        self._load_jobs: dict[int, str] = {}
        self._store_jobs: dict[int, list[str]] = {}
        self._next = 0

    def start(self, request):
        self._next += 1
        self._load_jobs[self._next] = request.request_id

    def get_finished(self, finished_req_ids):
        finished_recving = set()
        for job_id in self.poll():
            req_id = self._load_jobs.pop(job_id, None)
            if req_id is not None:
                finished_recving.add(req_id)
        return set(), finished_recving

    def poll(self):
        return []


class Connector(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self.worker = Worker()

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        self.worker.start(request)

    def get_finished(self, finished_req_ids):
        return self.worker.get_finished(finished_req_ids)
'''


def test_ids_kept_as_the_values_of_a_job_map_reach_the_report(tmp_path_factory) -> None:
    # ``self._load_jobs[job_id] = request.request_id``: the request id is the
    # value under a job id; what ``pop(job_id)`` gives back is that id again
    a = _analysed(tmp_path_factory, "jobs", JOBS)
    lc = build_lifecycle(a.linker)
    assert "_load_jobs" in lc.state.id_valued and "_load_jobs" not in lc.state.coll_valued
    assert "req_id" in lc.state.of(f"{MOD}.Worker.get_finished").ids
    g = with_state_links(a.linker)
    result = paths.find_paths(g, "Worker.start", "KVConnectorOutput.finished_recving")
    assert isinstance(result, paths.PathResult)
    assert [s.kind for s in result.paths[0]][:2] == ["produces", "consumes"]
    assert result.paths[0][1].line == 18  # the pop that takes the id back out


FED = '''
import threading

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Wrapper:
    def __init__(self):
        self.lock = threading.Lock()
        self.done_ids: list[str] = []

    def _handle_done(self, data: dict):
        with self.lock:
            self.done_ids.append(data["transfer_id"])

    def pop_done(self):
        with self.lock:
            out = set(self.done_ids)
            self.done_ids = []
        return out


class Connector(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self.wrapper = Wrapper()

    def get_finished(self, finished_req_ids):
        return set(), self.wrapper.pop_done()
'''


def test_what_enters_a_container_a_report_hands_back_is_an_id(tmp_path_factory) -> None:
    # the element is read off a peer's message under a key of its own name;
    # the container is what get_finished hands back, so what enters it is ids
    g = with_state_links(_analysed(tmp_path_factory, "fed", FED).linker)
    result = paths.find_paths(g, "Wrapper._handle_done", "KVConnectorOutput.finished_recving")
    assert isinstance(result, paths.PathResult)
    assert (result.paths[0][0].kind, result.paths[0][0].line) == ("produces", 14)


NEVER_MADE = '''
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class BaseThread:
    def __init__(self):
        self.done_reqs = set()

    def set_done(self, req_id):
        self.done_reqs.add(req_id)

    def take_done(self):
        out, self.done_reqs = self.done_reqs, set()
        return out


class RecvThread(BaseThread):
    pass


class SendThread(BaseThread):
    pass


class Connector(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self.recv = RecvThread()

    def start_load_kv(self, forward_context, **kwargs):
        for r in self._get_connector_metadata().requests:
            self.recv.set_done(r.request_id)

    def get_finished(self, finished_req_ids):
        return None, self.recv.take_done()
'''


def test_a_subclass_nothing_constructs_holds_no_state(tmp_path_factory) -> None:
    # SendThread inherits done_reqs but is never made: only RecvThread's
    # object holds the field, so no path or where answer goes through SendThread
    g = with_state_links(_analysed(tmp_path_factory, "nevermade", NEVER_MADE).linker)
    assert f"{MOD}.RecvThread.done_reqs" in g
    assert f"{MOD}.SendThread.done_reqs" not in g
