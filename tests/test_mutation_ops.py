"""The ``drop-lock`` mutation operator (``bench/mutation_ops.py``) on a toy:
it finds the lock around request state, and its mutant is valid Python
without it."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from mutation_ops import find_sites, mutate  # noqa: E402

TOY = '''\
import threading


class Worker:
    def __init__(self):
        self._lock = threading.Lock()
        with self._lock:
            self._done = set()

    def finish(self, req_id):
        with self._lock:
            self._done.add(req_id)
            self._count = 1

    def stats(self):
        with self._lock:
            return len(self._done)
'''


def test_drop_lock_takes_the_lock_away_from_request_state_only() -> None:
    sites = find_sites(["drop-lock"], TOY, "w.py", "w")["drop-lock"]
    assert [(s.function, s.line) for s in sites] == [("w.Worker.finish", 11)]
    text = mutate(TOY, sites[0])
    compile(text, "w.py", "exec")
    assert "    def finish(self, req_id):\n        self._done.add(req_id)\n        self._count = 1\n" \
        in text
    assert text.count("with self._lock:") == 2  # the constructor's and the reader's stay


ALLOC = '''\
class S:
    def alloc(self, req_id, n):
        if n < 0:
            self._release_probe(req_id)
            raise ValueError(n)
        if n > 8:
            self._release_probe(req_id)
            logger.warning("too many")
            raise ValueError(n)

    def once(self, req_id, n):
        if n < 0:
            self._release_probe(req_id)
            raise ValueError(n)

    def handler(self, req_id):
        try:
            self._load(req_id)
        except OSError:
            self._unpin(req_id)
            return False
        if not self._ready(req_id):
            self._unpin(req_id)
            return False
        return True
'''


def test_unreleased_failure_drops_one_of_several_releases_before_a_failure_exit() -> None:
    sites = find_sites(["unreleased-failure"], ALLOC, "s.py", "s")["unreleased-failure"]
    # ``once`` has one releasing raise: nothing would show what it owes
    # ``handler``: the return in the ``except`` is a failure exit; the one
    # after ``if not self._ready`` is not (nothing failed there)
    assert [(s.function, s.line) for s in sites] == [("s.S.alloc", 4), ("s.S.alloc", 7)]
    text = mutate(ALLOC, sites[1])
    compile(text, "s.py", "exec")
    assert "        if n > 8:\n            pass\n            logger.warning" in text


HANDSHAKE = '''\
import zmq


class Worker:
    def _handshake(self, path):
        sock = zmq.Context().socket(zmq.REQ)
        sock.setsockopt(zmq.RCVTIMEO, 5000)
        sock.send(b"meta")
        return sock.recv()

    def _start(self, fut, req_id):
        def request_ready(f, rid=req_id):
            try:
                f.result()
            except Exception:
                self._failed.add(rid)
                return
            self._ready.put(rid)

        fut.add_done_callback(request_ready)

    def get_block_ids_with_load_errors(self):
        failed, self._invalid = self._invalid, set()
        return failed
'''


def test_wait_and_callback_operators_find_their_lines_and_stay_valid() -> None:
    ops = ["drop-socket-timeout", "unchecked-callback", "silent-load-errors"]
    sites = find_sites(ops, HANDSHAKE, "w.py", "w")
    assert [s.line for s in sites["drop-socket-timeout"]] == [7]
    assert [s.line for s in sites["unchecked-callback"]] == [14]
    assert [s.line for s in sites["silent-load-errors"]] == [22]
    for op in ops:
        text = mutate(HANDSHAKE, sites[op][0])
        compile(text, "w.py", "exec")
    assert "RCVTIMEO" not in mutate(HANDSHAKE, sites["drop-socket-timeout"][0])
    assert "f.result()" not in mutate(HANDSHAKE, sites["unchecked-callback"][0])
    silent = mutate(HANDSHAKE, sites["silent-load-errors"][0])
    assert "    def get_block_ids_with_load_errors(self):\n        return set()\n" in silent


FINISH = '''\
class Scheduler:
    def __init__(self):
        self._not_processed = set()
        self._need_send = {}

    def request_finished(self, request, block_ids):
        params = request.kv_transfer_params
        if request.status != "LENGTH_CAPPED":
            self._not_processed.add(request.request_id)
            return False, None
        self._need_send[request.request_id] = block_ids
        return True, None

    def get_finished(self, finished_req_ids):
        self._need_send.pop(finished_req_ids, None)
        return None, None
'''


def test_finish_and_pop_operators_find_their_lines_and_stay_valid() -> None:
    sites = find_sites(["finish-no-forward", "pop-to-del"], FINISH, "s.py", "s")
    # only the add right before the non-delaying return, not the delaying path's
    assert [(s.function, s.line) for s in sites["finish-no-forward"]] == \
        [("s.Scheduler.request_finished", 9)]
    assert [(s.function, s.line) for s in sites["pop-to-del"]] == \
        [("s.Scheduler.get_finished", 15)]
    text = mutate(FINISH, sites["finish-no-forward"][0])
    compile(text, "s.py", "exec")
    assert "            pass\n            return False, None\n" in text
    text = mutate(FINISH, sites["pop-to-del"][0])
    compile(text, "s.py", "exec")
    assert "        del self._need_send[finished_req_ids]\n" in text


SHUTDOWN = '''\
class Connector:
    def __init__(self):
        self.client = Client()
        self.client.close()

    def shutdown(self):
        self.worker.shutdown()
        if self.client is not None:
            self.client.close()
        log("bye")
'''


def test_shutdown_no_close_drops_one_close_of_the_hook_only() -> None:
    sites = find_sites(["shutdown-no-close"], SHUTDOWN, "s.py", "s")
    # the two closes in shutdown, not the one in __init__
    assert [(s.function, s.line) for s in sites["shutdown-no-close"]] == \
        [("s.Connector.shutdown", 7), ("s.Connector.shutdown", 9)]
    text = mutate(SHUTDOWN, sites["shutdown-no-close"][1])
    compile(text, "s.py", "exec")
    assert "            pass\n        log" in text and "self.worker.shutdown()" in text


REPLY = '''\
import zmq


class Server:
    def __init__(self, ctx):
        self.sock = ctx.socket(zmq.REP)

    def serve(self):
        while True:
            msg = self.sock.recv()
            try:
                self.sock.send(self.handle(msg))
            except Exception:
                self.sock.send(b"")

    def once(self):
        self.sock.send(b"hi")
'''


def test_drop_reply_drops_one_of_two_replies_in_a_loop() -> None:
    sites = find_sites(["drop-reply"], REPLY, "s.py", "s")
    assert [(s.function, s.line) for s in sites["drop-reply"]] == \
        [("s.Server.serve", 12), ("s.Server.serve", 14)]
    text = mutate(REPLY, sites["drop-reply"][1])
    compile(text, "s.py", "exec")
    assert "            except Exception:\n                pass\n" in text


PEER = '''\
class Sender:
    def _new_notifs(self):
        notified = set()
        for notif in self.agent.get_new_notifs():
            req_id = notif.decode("utf-8")
            if req_id not in self._reqs_to_send:
                continue
            notified.add(req_id)
        return notified

    def forget(self, req_id):
        if req_id not in self._reqs_to_send:
            continue_later = True
        return req_id
'''


def test_drop_peer_lookup_drops_the_filter_of_a_decoded_id_only() -> None:
    sites = find_sites(["drop-peer-lookup"], PEER, "p.py", "p")
    # the filter of a function that decodes a message; not a test with no continue
    assert [(s.function, s.line) for s in sites["drop-peer-lookup"]] == [("p.Sender._new_notifs", 6)]
    text = mutate(PEER, sites["drop-peer-lookup"][0])
    compile(text, "p.py", "exec")
    assert "not in self._reqs_to_send:\n                continue" not in text
    assert "            pass\n            notified.add(req_id)" in text


NONE_TEST = '''\
class Saver:
    def save(self, meta):
        for request in meta.requests:
            if request.spec is not None and request.spec.ready:
                print(request.spec.n)
            if request.load is None:
                continue
            print(request.load.n)
            if self.engine is not None:
                self.engine.stop()
            if request.other is not None:
                print("no read through it")
'''


def test_drop_none_test_drops_a_none_test_that_guards_a_read_only() -> None:
    sites = find_sites(["drop-none-test"], NONE_TEST, "s.py", "s")["drop-none-test"]
    assert [(s.function, s.line) for s in sites] == [("s.Saver.save", 4), ("s.Saver.save", 6)]
    first = mutate(NONE_TEST, sites[0])
    compile(first, "s.py", "exec")
    assert "            if request.spec.ready:\n" in first
    second = mutate(NONE_TEST, sites[1])
    compile(second, "s.py", "exec")
    assert "if request.load is None" not in second and "            pass\n" in second


PARTS = '''\
class Worker:
    def pop_done(self, transfers):
        done = set()
        for req_id, handles in list(transfers.items()):
            busy = False
            for handle in handles:
                busy = busy or handle.busy
            if not busy:
                done.add(req_id)
                del transfers[req_id]
        for req_id, handles in transfers.items():
            for handle in handles:
                print(handle)
        return done
'''


def test_remove_in_parts_loop_moves_the_removal_into_the_loop_over_parts_only() -> None:
    sites = find_sites(["remove-in-parts-loop"], PARTS, "w.py", "w")["remove-in-parts-loop"]
    # the second loop over parts has no removal after it: no site
    assert [(s.function, s.line) for s in sites] == [("w.Worker.pop_done", 6)]
    text = mutate(PARTS, sites[0])
    compile(text, "w.py", "exec")
    assert "                busy = busy or handle.busy\n" \
        "                transfers.pop(req_id, None)\n" in text


def test_verdicts_name_real_sites_and_mark_misses_read() -> None:
    """Every harmless verdict names a mutant the bench makes (an operator it
    has, a code base it runs) and has a reason; a read miss shows as such,
    and counts neither as caught nor among the rest."""
    import mutants

    data = __import__("json").loads(mutants.VERDICTS.read_text(encoding="utf-8"))
    names = {c.name for c in mutants.CODEBASES}
    assert data["verdicts"] and all(
        v["codebase"] in names and v["operator"] in mutants.OPERATORS and v["reason"]
        and v["verdict"] in ("equivalent", "safe by design", "outside the lifecycle")
        for v in data["verdicts"])
    read = mutants.MutantResult("a.py", 3, "m.f", "drop-lock", "", True)
    caught = mutants.MutantResult("a.py", 9, "m.g", "drop-lock", "", True, detected=True)
    cell = mutants._cell([read, caught], lambda m: m.line == 3)
    assert cell == "1/2 (50%) +1 read"
