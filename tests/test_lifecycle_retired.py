"""Handed work retired on every way out (``lifecycle.retirements``): which
functions are served a work item, what retires it, and which ways out a
test of the retired state excuses."""

from __future__ import annotations

import pytest

from kvflowmap.api import Request, analyse
from kvflowmap.check.stubs import stub_root
from kvflowmap.lifecycle.model import Lifecycle, build_lifecycle

HEAD = """import queue
import threading
from concurrent.futures import ThreadPoolExecutor

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Store(threading.Thread):
    def __init__(self, client):
        super().__init__(daemon=True)
        self.client = client
        self.lock = threading.Lock()
        self.jobs: dict[str, set[int]] = {}
        self.queue: queue.Queue = queue.Queue()
        self.pool = ThreadPoolExecutor(max_workers=2)

    def add(self, job):
        with self.lock:
            self.jobs.setdefault(job.req_id, set()).add(job.job_id)
        self.queue.put(job)

    def spawn(self, job):
        self.pool.submit(self.serve, job)

    def run(self):
        while True:
            item = self.queue.get()
            try:
                self.handle(item)
            except Exception:
                pass

    def live(self, job):
        with self.lock:
            return job.job_id in self.jobs.get(job.req_id, ())

    def finish(self, job):
        with self.lock:
            entry = self.jobs.get(job.req_id)
            if entry is not None:
                entry.discard(job.job_id)

    def serve(self, job):
        self.finish(job)

"""

TAIL = """

class Conn(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self.store = Store(None)
        self.store.start()

    def wait_for_save(self):
        for job in self._get_connector_metadata().jobs:
            self.store.add(job)
            self.store.spawn(job)
"""


def _model(tree, handle: str) -> Lifecycle:
    root = tree({"conn/__init__.py": HEAD + handle + TAIL})
    a = analyse(Request(sources=[str(root)], context=[str(stub_root())]))
    return build_lifecycle(a.linker)


def _exits(tree, handle: str) -> list[int]:
    """Lines (within ``handle``) of the ways out ``handle`` leaves its job on."""
    lc = _model(tree, handle)
    offset = len(HEAD.splitlines())
    return [u.exit_line - offset for u in lc.unretired("conn.Store.handle")]


def test_served_items_are_spawn_arguments_and_queue_takes(tree) -> None:
    lc = _model(tree, """    def handle(self, job):
        self.finish(job)
""")
    items = lc.handed_items()
    assert items["conn.Store.serve"] == ("job",)  # ``submit(self.serve, job)``
    assert items["conn.Store.handle"] == ("job",)  # ``item = self.queue.get()``
    assert "conn.Store.finish" not in items  # called with a job, not handed one


def test_an_early_return_skips_the_retirement(tree) -> None:
    assert _exits(tree, """    def handle(self, job):
        if not job.keys:
            return
        self.client.put(job.keys)
        self.finish(job)
""") == [3]


def test_a_finally_retires_on_every_way_out(tree) -> None:
    assert _exits(tree, """    def handle(self, job):
        try:
            if not job.keys:
                return
            self.client.put(job.keys)
        finally:
            self.finish(job)
""") == []


@pytest.mark.parametrize("test,excused", [
    ("not self.live(job)", True),  # the job is gone: nothing to retire
    ("self.live(job)", False),  # the job is there, and is left
    ("job.job_id not in self.jobs.get(job.req_id, ())", True),
    ("job.job_id in self.jobs.get(job.req_id, ())", False),
    ("len(self.jobs) > 100", True),  # another reading of the retired state
])
def test_a_test_of_the_retired_state_excuses_its_missing_arm(tree, test: str,
                                                              excused: bool) -> None:
    found = _exits(tree, f"""    def handle(self, job):
        if {test}:
            return
        self.finish(job)
""")
    assert found == ([] if excused else [3])


def test_membership_reads_polarity_through_not_and_a_helper(tree) -> None:
    from kvflowmap.lifecycle.retirements import membership

    tests = ["not self.live(job)", "job.job_id in self.jobs", "not (k not in self.jobs[x])",
             "k in jobs", "self.client.ready()", "self.live(job) and self.live(job)"]
    lc = _model(tree, "    def handle(self, job):\n" + "".join(
        f"        if {t}:\n            return\n" for t in tests) + "        self.finish(job)\n")
    fn = lc.functions["conn.Store.handle"]
    tested = {s.text: s.line for s in fn.stmts if s.kind == "if"}
    assert [membership(fn, t, tested[t], lc._method) for t in tests] == [
        ("jobs", False),  # ``live`` returns ``job.job_id in self.jobs.get(...)``
        ("jobs", True),
        ("jobs", True),  # two negations
        None,  # not ``self`` state
        None,  # not a method of the class
        None,  # more than one call
    ]


def test_handing_the_item_on_ends_the_duty(tree) -> None:
    # put back on the queue for a later turn: the next run retires it
    assert _exits(tree, """    def handle(self, job):
        if not job.ready:
            self.queue.put(job)
            return
        self.finish(job)
""") == []


def test_a_test_of_a_local_read_from_the_state_excuses_either_arm(tree) -> None:
    # retired once the last part is done: a count, not a skip
    assert _exits(tree, """    def handle(self, job):
        tracked = job.req_id in self.jobs
        if not tracked:
            return
        self.client.put(job.keys)
        left = self.count_down(job)
        if left == 0:
            self.finish(job)

    def count_down(self, job):
        return len(self.jobs.get(job.req_id, ())) - 1
""") == []


def test_a_test_of_the_item_s_own_record_excuses_but_a_call_on_it_does_not(tree) -> None:
    # the submitter marks the last part; a skip decided by a call is a way out
    assert _exits(tree, """    def handle(self, job):
        last = job.last
        self.client.put(job.keys)
        if last:
            self.finish(job)
""") == []
    assert _exits(tree, """    def handle(self, job):
        if self.client.skip(job.req_id):
            return
        self.finish(job)
""") == [3]
