"""The lock discipline of request-keyed state (``lifecycle.locks``): which
unlocked changes race, by thread and by what the other side does."""

from __future__ import annotations

from kvflowmap.api import Request, analyse
from kvflowmap.check.stubs import stub_root
from kvflowmap.lifecycle.model import build_lifecycle

HEAD = """import threading

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Conn(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self._lock = threading.Lock()
        self._done = set()
        threading.Thread(target=self._loop, daemon=True).start()

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        with self._lock:
            self._done.add(request.request_id)

    def _next(self):
        raise NotImplementedError
"""


def line_of(body: str, text: str) -> int:
    return next(i for i, ln in enumerate((HEAD + body).splitlines(), 1) if text in ln)


def unlocked(tree, body: str) -> list[tuple[str, int, str]]:
    root = tree({"conn/__init__.py": HEAD + body})
    a = analyse(Request(sources=[str(root)], context=[str(stub_root())]))
    lc = build_lifecycle(a.linker)
    return [(u.change.fqn.rpartition(".")[2], u.change.line, u.change.op) for u in lc.unlocked()]


# a transfer thread that adds with no lock
LOOP_ADDS = """
    def _loop(self):
        while True:
            self._done.add(self._next())
"""


def test_unlocked_add_races_a_locked_walk_on_another_thread(tree):
    body = LOOP_ADDS + """
    def get_finished(self, finished_req_ids):
        with self._lock:
            done = {r for r in self._done}
            for req_id in list(self._done):
                self._done.discard(req_id)
        return None, done
"""
    assert unlocked(tree, body) == [("_loop", line_of(body, "self._done.add(self._next"), "add")]


def test_unlocked_add_against_locked_point_changes_is_atomic(tree):
    body = """
    def _loop(self):
        while True:
            self._done.add(self._next())

    def get_finished(self, finished_req_ids):
        for req_id in finished_req_ids:
            with self._lock:
                if req_id in self._done:
                    self._done.discard(req_id)
        return None, None
"""
    assert unlocked(tree, body) == []


def test_same_thread_changes_do_not_race(tree):
    # both run on vLLM's calls into the connector: no other thread touches _done
    body = """
    def _loop(self):
        pass

    def start_load_kv(self, forward_context, **kwargs):
        with self._lock:
            for req_id in self._ids():
                self._done.add(req_id)

    def get_finished(self, finished_req_ids):
        for req_id in finished_req_ids:
            self._done.discard(req_id)
        self._done.clear()
        return None, None

    def _ids(self):
        return []
"""
    assert unlocked(tree, body) == []


TEMPLATE = """
    def _loop(self):
        while True:
            self._sender.run(self._next())

    def get_finished(self, finished_req_ids):
        self._sender.cancel_many(finished_req_ids)
        return None, None


class Runner:
    def __init__(self):
        self._condition = threading.Condition()

    def run(self, req_id):
        with self._condition:
            self._finish_locked(req_id)

    def _finish_locked(self, req_id):
        pass


class Sender(Runner):
    def __init__(self):
        super().__init__()
        self._cancelled = set()

    def cancel_many(self, req_ids):
        with self._condition:
            for req_id in req_ids:
                self._cancelled.add(req_id)

    def _finish_locked(self, req_id):
        self._cancelled.clear()  # the override
"""


def test_a_base_template_method_holds_the_lock_for_an_override(tree):
    head = "        threading.Thread(target=self._loop, daemon=True).start()\n"
    body = TEMPLATE.replace("    def get_finished", "    def _init_sender(self):\n"
                            "        self._sender = Sender()\n\n    def get_finished")
    assert unlocked(tree, body) == []
    bare = body.replace("        with self._condition:\n            self._finish_locked(req_id)",
                        "        self._finish_locked(req_id)")
    assert bare != body and head in HEAD
    assert unlocked(tree, bare) == [("_finish_locked", line_of(bare, "# the override"), "clear")]


def test_unlocked_walk_races_a_locked_change_on_another_thread(tree):
    body = """
    def _loop(self):
        while True:
            for req_id in self._done:
                self._report(req_id)

    def _report(self, req_id):
        pass
"""
    # the hook adds under the lock while the thread walks without it: the
    # walk dies with 'Set changed size during iteration'
    assert unlocked(tree, body) == [("_loop", line_of(body, "for req_id in self._done"), "walk")]


def test_unlocked_walk_on_the_changing_thread_itself_is_fine(tree):
    body = """
    def _loop(self):
        pass

    def get_finished(self, finished_req_ids):
        for req_id in self._done:
            self._report(req_id)
        return None, None

    def _report(self, req_id):
        pass
"""
    assert unlocked(tree, body) == []


NOLOCK = """import asyncio
import queue
import threading

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Conn(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self._done: set[str] = set()
        self._queue = queue.Queue()
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._recv, daemon=True).start()

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        self._queue.put(request.request_id)

    def _recv(self):
        while True:
            req_id = self._queue.get()
            self._done.add(req_id)
"""


def copy_clears(tree, body: str) -> list[tuple[str, int, int]]:
    root = tree({"conn/__init__.py": NOLOCK + body})
    a = analyse(Request(sources=[str(root)], context=[str(stub_root())]))
    lc = build_lifecycle(a.linker)
    return [(u.change.fqn.rpartition(".")[2], u.read_line, u.change.line)
            for u in lc.copy_clears()]


def nolock_line(body: str, text: str, nth: int = 1) -> int:
    """Line of the ``nth`` line of ``body`` holding ``text``, in the file written."""
    hits = [i for i, ln in enumerate((NOLOCK + body).splitlines(), 1)
            if text in ln and i > len(NOLOCK.splitlines())]
    return hits[nth - 1]


def test_copy_then_clear_with_no_lock_loses_what_another_thread_adds(tree):
    body = """
    def get_finished(self, finished_req_ids):
        done = set()
        done.update(self._done)
        self._done.clear()
        return None, done
"""
    assert copy_clears(tree, body) == [
        ("get_finished", nolock_line(body, "done.update"), nolock_line(body, ".clear()"))]


def test_alias_then_rebind_races_too_but_a_one_statement_swap_does_not(tree):
    alias = """
    def get_finished(self, finished_req_ids):
        done = self._done
        self._done = set()
        return None, done
"""
    swap = """
    def get_finished(self, finished_req_ids):
        done, self._done = self._done, set()
        return None, done
"""
    assert copy_clears(tree, alias) == [
        ("get_finished", nolock_line(alias, "done = self._done"),
         nolock_line(alias, "self._done = set()"))]
    assert copy_clears(tree, swap) == []


def test_a_coroutine_that_does_not_await_between_read_and_clear_is_atomic(tree):
    body = """
    async def fetch(self):
        done = self._done
        self._done = set()
        return done

    async def fetch_later(self):
        done = self._done
        await asyncio.sleep(0)
        self._done = set()
        return done

    def get_finished(self, finished_req_ids):
        a = asyncio.run_coroutine_threadsafe(self.fetch(), self._loop)
        b = asyncio.run_coroutine_threadsafe(self.fetch_later(), self._loop)
        return None, a.result(5) | b.result(5)
"""
    assert copy_clears(tree, body) == [
        ("fetch_later", nolock_line(body, "done = self._done", 2),
         nolock_line(body, "self._done = set()", 2))]


def test_a_locked_walk_inside_a_helper_given_the_container_races_too(tree):
    """``_pop_done(self._done)`` walks and deletes the entries of the
    container it is passed: the walk is this statement's, under its lock."""
    body = LOOP_ADDS + """
    def get_finished(self, finished_req_ids):
        with self._lock:
            done = self._pop_done(self._done)
        return None, done

    def _pop_done(self, transfers):
        out = set()
        for req_id in list(transfers):
            transfers.discard(req_id)
            out.add(req_id)
        return out
"""
    assert unlocked(tree, body) == [("_loop", line_of(body, "self._done.add(self._next"), "add")]
