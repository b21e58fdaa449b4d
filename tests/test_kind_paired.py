"""The ``paired`` rule kind: acquire/release on every path of a function."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvflowmap.api import Request, analyse
from kvflowmap.check.engine import run_rules
from kvflowmap.check.kinds._paired_spec import Spec
from kvflowmap.check.model import AppliesTo, Finding, Rule
from kvflowmap.check.stubs import stub_root

LEASE = {"resource": "lease", "acquire": ["lease"], "release": ["release"]}
PENDING = {"resource": "pending entry", "containers": ["_inflight"]}


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory) -> Path:
    """One fact cache for the module, so the stub vLLM is parsed once."""
    return tmp_path_factory.mktemp("paired-cache")


@pytest.fixture
def check(tree, shared_cache):
    """``check(code, **params)``: findings of a paired rule on ``pkg/m.py``."""

    def run(code: str | dict[str, str], **params) -> list[Finding]:
        files = code if isinstance(code, dict) else {"pkg/m.py": code}
        root = tree({"pkg/__init__.py": "", **files})
        analysis = analyse(Request(sources=[str(root)], context=[str(stub_root())],
                                   cache_dir=shared_cache))
        return run_rules(analysis, [make_rule(params)])

    return run


def make_rule(params: dict, modules: tuple[str, ...] = ("pkg.*",)) -> Rule:
    return Rule(id="t-paired", title="t", severity="error", rationale="r", kind="paired",
                params=params, applies_to=AppliesTo(modules=modules), examples=(), help="h",
                pack="test", path=Path("t.yaml"))


def lines(findings: list[Finding]) -> list[int]:
    return [f.line for f in findings]


def test_release_on_every_path_is_clean(check) -> None:
    assert check("""
        class C:
            def f(self, k):
                lease = self.client.lease(k)
                try:
                    self.work(lease)
                finally:
                    self.client.release(lease)
    """, **LEASE) == []


def test_early_return_leaks(check) -> None:
    found = check("""
        class C:
            def f(self, k):
                lease = self.client.lease(k)
                if not k:
                    return None
                self.client.release(lease)
    """, **LEASE)
    assert lines(found) == [3]
    f = found[0]
    assert "returns at line 5" in f.message and "self.client.lease" in f.message
    assert [(s.line, s.note) for s in f.path][:3] == [
        (3, "lease acquired by `self.client.lease`"), (4, "`not k` is true"), (5, "returns")]
    assert f.path[-1].note.startswith("leaves f() normally")
    assert f.anchor == "self.client.lease:pkg.m.C.f" and f.function == "pkg.m.C.f"


def test_raise_leaks_unless_released_first(check) -> None:
    code = """
        class C:
            def f(self, k):
                lease = self.client.lease(k)
                if k < 0:
                    {release}raise ValueError(k)
                self.client.release(lease)
    """
    found = check(code.format(release=""), **LEASE)
    assert lines(found) == [3] and "exception raised at line 5" in found[0].message
    fixed = code.format(release="self.client.release(lease)\n                    ")
    assert check(fixed, **LEASE) == []


def test_exception_from_a_call_without_try(check) -> None:
    found = check("""
        class C:
            def f(self, k):
                lease = self.client.lease(k)
                self.work(lease)
                self.client.release(lease)
    """, **LEASE)
    assert lines(found) == [3]
    assert "exception from `self.work` at line 4 leaves the function" in found[0].message
    assert (4, "`self.work` raises") in [(s.line, s.note) for s in found[0].path]


def test_on_exception_false_ignores_exception_paths(check) -> None:
    assert check("""
        class C:
            def f(self, k):
                lease = self.client.lease(k)
                self.work(lease)
                self.client.release(lease)
    """, **LEASE, on_exception=False) == []


def test_exception_inside_try_reaches_handler_that_releases(check) -> None:
    assert check("""
        class C:
            def f(self, k):
                lease = self.client.lease(k)
                try:
                    self.work(lease)
                except Exception:
                    self.client.release(lease)
                    raise
                self.client.release(lease)
    """, **LEASE) == []


def test_handler_that_does_not_catch_everything_leaks(check) -> None:
    found = check("""
        class C:
            def f(self, k):
                lease = self.client.lease(k)
                try:
                    self.work(lease)
                except KeyError:
                    self.client.release(lease)
                    raise
                self.client.release(lease)
    """, **LEASE)
    assert lines(found) == [3] and "`self.work` at line 5" in found[0].message


def test_handler_that_swallows_without_release_leaks(check) -> None:
    found = check("""
        class C:
            def f(self, k):
                lease = self.client.lease(k)
                try:
                    self.work(lease)
                    self.client.release(lease)
                except Exception:
                    self.log_failure()
                return 1
    """, **LEASE)
    assert lines(found) == [3]
    assert "exception from `self.work` at line 5 is caught and the function returns at " \
        "line 9" in found[0].message
    assert any(s.note == "`self.work` raises" and s.line == 5 for s in found[0].path)


def test_finally_covers_return_and_exception(check) -> None:
    assert check("""
        class C:
            def f(self, k):
                lease = self.client.lease(k)
                try:
                    if k:
                        return self.work(lease)
                    self.other(lease)
                finally:
                    self.client.release(lease)
                return 0
    """, **LEASE) == []


def test_with_block_releases_a_lock_and_manual_acquire_leaks(check) -> None:
    params = {"resource": "lock", "acquire": ["acquire"], "release": ["release"]}
    assert check("""
        class C:
            def f(self):
                with self._lock.acquire():
                    self.work()
    """, **params) == []
    found = check("""
        class C:
            def f(self):
                self._lock.acquire()
                with self._cv:
                    if self.done:
                        return
                self._lock.release()
    """, **params)
    assert lines(found) == [3]
    assert any("leaves the `with` block" in s.note for s in found[0].path)


def test_loop_with_break_skips_release(check) -> None:
    found = check("""
        class C:
            def f(self, items):
                lease = self.client.lease(items)
                for x in items:
                    if x is None:
                        break
                    self.client.release(lease)
                    return x
                return None
    """, **LEASE, on_exception=False)
    assert lines(found) == [3]
    notes = [s.note for s in found[0].path]
    assert "break" in notes or "leaves the loop `x in items`" in notes


def test_acquire_in_loop_released_in_loop(check) -> None:
    assert check("""
        class C:
            def f(self, keys):
                for k in keys:
                    lease = self.client.lease(k)
                    self.client.release(lease)
    """, **LEASE, on_exception=False) == []


def test_release_in_helper_counts_through_its_summary(check) -> None:
    code = """
        class C:
            def f(self, k):
                lease = self.client.lease(k)
                try:
                    self.work(lease)
                finally:
                    self._drop(lease)

            def _drop(self, lease):
                if not lease:
                    return
                for one in lease.parts:
                    self.client.release(one)
    """
    assert check(code, **LEASE) == []
    assert lines(check(code, **LEASE, summaries=False)) == [3]


def test_helper_that_releases_on_some_paths_only_is_not_a_release(check) -> None:
    found = check("""
        class C:
            def f(self, k):
                lease = self.client.lease(k)
                self._maybe_drop(lease, k)

            def _maybe_drop(self, lease, k):
                if k > 3:
                    self.client.release(lease)
    """, **LEASE)
    assert lines(found) == [3]


def test_recursive_helpers_do_not_loop(check) -> None:
    found = check("""
        class C:
            def f(self, k):
                lease = self.client.lease(k)
                self._a(lease)

            def _a(self, lease):
                self._b(lease)

            def _b(self, lease):
                self._a(lease)
    """, **LEASE)
    assert lines(found) == [3]


def test_hand_over_into_an_owning_container(check) -> None:
    code = """
        class C:
            def f(self, req_id, k):
                lease = self.client.lease(k)
                if k:
                    self._leases[req_id] = lease
                    return
                self.client.release(lease)
    """
    assert check(code, **LEASE) == []
    # Not an owner when the rule says only `self._held*` owns leases.
    assert lines(check(code, **LEASE, owners=["self._held*"])) == [3]


def test_hand_over_by_attribute_and_by_helper_that_stores_it(check) -> None:
    assert check("""
        class Probe:
            def mark_ready(self, ready):
                self.leases = ready.leases

        class C:
            def f(self, probe: Probe, k):
                ready = self.client.lease(k)
                probe.mark_ready(ready)

            def g(self, k):
                self._current = self.client.lease(k)
    """, **LEASE) == []


def test_hand_over_by_return_and_the_caller_then_owns_it(check) -> None:
    code = """
        class C:
            def take(self, k):
                lease = self.client.lease(k)
                if lease is None:
                    return None
                return lease

            def use(self, k):
                got = self.take(k)
                if got is None:
                    return 0
                self.work()
                self.client.release(got)
                return 1
    """
    found = check(code, **LEASE)
    assert [(f.function, f.line) for f in found] == [("pkg.m.C.use", 9)]
    assert "exception from `self.work` at line 12" in found[0].message
    assert check(code, **LEASE, return_hands_over=False, on_exception=False) \
        and lines(check(code, **LEASE, return_hands_over=False))[0] == 3


def test_none_check_prunes_the_empty_branch(check) -> None:
    assert check("""
        class C:
            def f(self, k):
                lease = self.client.lease(k)
                if lease is None:
                    return 0
                self.client.release(lease)
                return 1
    """, **LEASE) == []


def test_acquire_in_a_condition_is_held_on_that_branch_only(check) -> None:
    params = {"acquire": ["acquire"], "release": ["release"]}
    assert check("""
        class C:
            def f(self):
                if not self._lock.acquire(blocking=False):
                    return False
                self._lock.release()
                return True
    """, **params) == []


def test_local_aliases_and_collections_are_followed(check) -> None:
    assert check("""
        class C:
            def f(self, keys):
                held = []
                try:
                    for k in keys:
                        result = self.client.lease(k)
                        held.append(result)
                    self.work()
                finally:
                    for lease in held:
                        self.client.release(lease)
    """, **LEASE) == []


def test_pending_container_entry_rolled_back_on_failure(check) -> None:
    code = """
        class C:
            def f(self, req_id):
                self._inflight.add(req_id)
                try:
                    self.work(req_id)
                {clause}
                    self._inflight.discard(req_id)
    """
    assert check(code.format(clause="finally:"), **PENDING) == []
    found = check(code.format(clause="except KeyError:"), **PENDING)
    assert lines(found) == [3]
    assert found[0].message.startswith("pending entry added to `self._inflight[req_id]`")
    assert found[0].anchor == "self._inflight:pkg.m.C.f"


def test_container_key_must_match_and_reset_releases(check) -> None:
    found = check("""
        class C:
            def f(self, a, b):
                self._inflight[a] = 1
                self._inflight.pop(b, None)

            def g(self, a):
                self._inflight[a] = 1
                self._inflight = {}
    """, **PENDING)
    assert [(f.function, f.line) for f in found] == [("pkg.m.C.f", 3)]


def test_on_return_false_reports_only_exception_paths(check) -> None:
    code = """
        class C:
            def f(self, req_id):
                self._inflight[req_id] = 1
                self.work(req_id)
    """
    found = check(code, **PENDING, on_return=False)
    assert lines(found) == [3] and "exception" in found[0].message
    assert check(code.replace("self.work(req_id)", "x = 1"), **PENDING, on_return=False) == []


def test_removal_in_a_helper_counts(check) -> None:
    assert check("""
        class C:
            def f(self, req_id):
                self._inflight[req_id] = 1
                try:
                    self.work(req_id)
                finally:
                    self._forget(req_id)

            def _forget(self, req_id):
                self._inflight.pop(req_id, None)
    """, **PENDING) == []


def test_same_callee_twice_gets_distinct_anchors(check) -> None:
    found = check("""
        class C:
            def f(self, a, b):
                x = self.client.lease(a)
                y = self.client.lease(b)
    """, **LEASE, on_exception=False)
    assert [f.anchor for f in found] == ["self.client.lease:pkg.m.C.f",
                                         "self.client.lease:pkg.m.C.f#2"]


def test_fqn_glob_patterns_match_resolved_calls(check) -> None:
    found = check({"pkg/m.py": """
        from pkg.store import Store

        class C:
            def __init__(self):
                self.store = Store()

            def f(self, k):
                h = self.store.grab(k)
                return 1
    """, "pkg/store.py": """
        class Store:
            def grab(self, k):
                return k
    """}, acquire=["pkg.store.Store.grab"], release=["drop"])
    assert [(f.function, f.line) for f in found] == [("pkg.m.C.f", 8)]


def test_scope_class_requires_a_removing_method(check) -> None:
    code = """
        class C:
            def __init__(self):
                self._pending_saves = set()
                self._pending_loads = {}

            def build(self, req_id):
                self._pending_saves.add(req_id)
                self._pending_loads[req_id] = 1

            def finished(self, req_id):
                self._pending_saves.discard(req_id)

            def shutdown(self):
                self._pending_loads.clear()
    """
    found = check(code, scope="class", containers=["_pending_*"])
    assert found == []
    found = check(code, scope="class", containers=["_pending_*"], removal_from=["finished"])
    assert len(found) == 1 and "`self._pending_loads`" in found[0].message
    assert "shutdown()" in found[0].message and found[0].anchor == "self._pending_loads:pkg.m.C"
    found = check(code.replace("self._pending_saves.discard(req_id)", "pass"),
                  scope="class", containers=["_pending_*"])
    assert len(found) == 1 and "no method of C ever removes" in found[0].message


def test_bad_params_are_rejected() -> None:
    with pytest.raises(ValueError, match="'scope': expected one of function, class"):
        Spec.from_params({"scope": "module"})
    with pytest.raises(ValueError, match="'acquire': expected a list of strings"):
        Spec.from_params({"acquire": "pin"})
    with pytest.raises(ValueError, match="unknown parameter of kind 'paired' "
                       r"\(did you mean acquire\?"):
        Spec.from_params({"acquires": []})


def test_a_crash_in_one_function_is_an_internal_error_finding(check, monkeypatch) -> None:
    from kvflowmap.check.kinds import _paired_sites

    def boom(self):
        raise RuntimeError("boom")

    monkeypatch.setattr(_paired_sites.FunctionSites, "acquires", boom)
    found = check("""
        def f():
            pass
    """, **LEASE)
    assert [f.rule for f in found] == ["internal-error"] and "t-paired" in found[0].message


def test_zip_loop_variables_follow_the_collection_they_come_from(check) -> None:
    code = """
        class C:
            def f(self, keys):
                leases = self.client.lease(keys)
                kept = []
                for k, one in zip(keys, leases):
                    if one is not None:
                        kept.append(one)
                return {returned}
    """
    assert check(code.format(returned="kept"), **LEASE) == []
    assert lines(check(code.format(returned="keys"), **LEASE)) == [3]


def test_pinning_a_list_built_from_ids_is_tracked_through_the_ids(check) -> None:
    params = {"acquire": ["*pool.touch"], "release": ["free_blocks"]}
    code = """
        class C:
            def pin(self, pool, job, ids):
                blocks = [pool.blocks[b] for b in ids]
                pool.touch(blocks)
                if len(ids) > 8:
                    {fail}
                self._pinned[job] = ids
    """
    assert lines(check(code.format(fail="return False"), **params)) == [4]
    assert check(code.format(fail="pool.free_blocks(blocks)\n                    return False"),
                 **params) == []


def test_collections_filled_after_the_acquisition_are_not_empty(check) -> None:
    assert check("""
        class C:
            def stale(self, ids):
                return not ids

            def drain(self, pool, items):
                for ids in items:
                    valid = []
                    blocks = [pool.blocks[b] for b in ids]
                    pool.touch(blocks)
                    if self.stale(ids):
                        pool.free_blocks(blocks)
                        continue
                    valid.append(ids)
                    if not valid:
                        continue
                    self._pinned.append(ids)
    """, acquire=["*pool.touch"], release=["free_blocks"]) == []


def test_helper_that_catches_everything_does_not_raise(check) -> None:
    code = """
        class C:
            def f(self, k):
                a = self.client.lease(k)
                self._note(k)
                self.client.release(a)

            def _note(self, k):
                {body}
    """
    safe = "try:\n                    self.journal.write(k)\n" \
           "                except Exception:\n                    pass"
    assert check(code.format(body=safe), **LEASE) == []
    risky = check(code.format(body="self.journal.write(k)"), **LEASE)
    assert lines(risky) == [3] and "`self._note` at line 4" in risky[0].message


def test_storing_into_an_object_self_owns_hands_over(check) -> None:
    assert check("""
        class C:
            def f(self, req_id, k):
                lease = self.client.lease(k)
                slot = self._slots.setdefault(req_id, {})
                slot.lease = lease
    """, **LEASE) == []


def test_removal_as_a_done_callback_releases_the_entry(check) -> None:
    assert check("""
        class C:
            def f(self, task):
                self._inflight.add(task)
                task.add_done_callback(self._inflight.discard)
                self.work(task)
    """, **PENDING) == []


def test_scope_class_sees_callback_helper_and_difference_update_removals(check) -> None:
    found = check("""
        class C:
            def start(self, task, key, done):
                self._inflight_tasks.add(task)
                task.add_done_callback(self._inflight_tasks.discard)
                self._pending_keys.add(key)
                self._pending_store[key] = 1
                self._pending_hashes.update(done)

            def finish(self, key, done):
                self._record(key, pending=self._pending_store)
                self._forget(self._pending_keys, key)
                self._pending_hashes.difference_update(done)

            def _record(self, key, pending):
                pending.pop(key, None)

            def _forget(self, keys, key):
                keys.discard(key)
    """, scope="class", containers=["_pending_*", "_inflight*"])
    assert found == []


def test_record_then_pin_is_handed_over_before_the_pin(check) -> None:
    params = {"acquire": ["*pool.touch"], "release": ["free_blocks"]}
    code = """
        class C:
            def pin(self, pool, job, ids):
                {record}
                pool.touch([pool.blocks[b] for b in ids])
                return True
    """
    assert check(code.format(record="self._pinned[job] = (ids, 4)"), **params) == []
    assert lines(check(code.format(record="self._count += 1"), **params)) == [4]


def test_tests_prove_emptiness_through_and_or_and_sentinels() -> None:
    from kvflowmap.check.kinds._paired_text import emptiness

    # (names empty on the true edge, names empty on the false edge)
    assert emptiness('"pool" in locals() and pool is not None') == (set(), {"pool"})
    assert emptiness("not x or x is None") == ({"x"}, set())
    assert emptiness("x is None or y is None") == (set(), set())  # either one: neither proven
    assert emptiness("a and b") == (set(), set())
    assert emptiness("fd >= 0") == (set(), {"fd"}) and emptiness("fd < 0") == ({"fd"}, set())


INFERRED = {"resource": "resource", "infer_from_release": True, "on_exception": False,
            "follow_failures": False, "acquire": ["acquire", "_acquire*"],
            "release": ["release", "_release*", "close", "os.close"]}


def test_inferred_pairs_and_held_on_entry(check) -> None:
    found = check('''
class W:
    def ok(self, ctx, stop):
        sock = ctx.socket()
        try:
            if stop:
                return
            sock.send(b"x")
        finally:
            sock.close()

    def early(self, ctx, stop):
        sock = ctx.socket()
        if stop:
            return
        sock.close()

    def popped(self, rid):
        lease = self._leases.pop(rid)
        self._log.debug("lease %s", lease.get_id())
        self._store.read(lease)
        self._client.release(lease)

    def counted(self, n):
        k = len(self._items)
        if n:
            return
        self._sem.release(k)
''', **INFERRED)
    got = sorted((f.function.rpartition(".")[2], f.line) for f in found)
    # ``popped``: read() may raise after the pop (held on entry: raising
    # exits count); the logging statement before it raises nothing
    assert got == [("early", 12), ("popped", 18)], got
    popped = next(f for f in found if f.function.endswith("popped"))
    assert "an exception from `self._store.read` at line 20" in popped.message


def test_released_before_one_raise_is_owed_on_every_raise(check) -> None:
    found = check('''
class S:
    def alloc(self, request, n):
        req_id = request.request_id
        self._requests[req_id] = request
        self._log.debug("alloc %s", req_id)
        assert n >= 0
        probe = self._probes.get(req_id)
        if probe is not None and probe.n != n:
            self._release_probe(req_id)
            raise RuntimeError("changed")
        if not probe.lease:
            raise RuntimeError("no lease")
        if n > 8:
            raise ValueError("too many")
        self._loads[req_id] = probe

    def handler(self, req_id, n):
        try:
            self._load(req_id, n)
        except RuntimeError:
            self._release_probe(req_id)
            raise
        if n < 0:
            raise ValueError(n)

    def fine(self, req_id, n):
        self._load(req_id, n)
        if n < 0:
            self._release_probe(req_id)
            raise ValueError(n)
        self._other(req_id)

    def reraise(self, req_id, n):
        try:
            self._load(req_id, n)
        except RuntimeError:
            raise
        if n < 0:
            self._release_probe(req_id)
            raise ValueError(n)
''', **INFERRED)
    got = sorted((f.function.rpartition(".")[2], f.line) for f in found)
    # ``alloc``: the assert is the first raising exit without the release
    # (its shortest path); ``if not probe.lease: raise`` says it is missing
    # and owes nothing; the calls' own exceptions are not this question.
    # ``fine``: its only raise releases; a call raising is not counted.
    # ``reraise``: the call's exception is counted on its way into the
    # ``except`` that raises it again.
    assert got == [("alloc", 6), ("handler", 24), ("reraise", 37)], got
    alloc = next(f for f in found if f.function.endswith("alloc"))
    assert "`self._release_probe(req_id)` runs before the failure exit at line 10" in alloc.message
    assert "the assertion at line 6 fails" in alloc.message


def test_a_raise_that_says_the_resource_is_missing_owes_nothing(check) -> None:
    found = check('''
class S:
    def alloc(self, req_id, probe):
        if probe is None:
            raise KeyError(req_id)
        assert probe.lease
        if probe.stale:
            self._release_probe(req_id)
            raise RuntimeError("stale")
        self._loads[req_id] = probe
''', **INFERRED)
    assert found == [], [f.message for f in found]


def test_released_before_one_failure_return_is_owed_on_every_handler_return(check) -> None:
    found = check('''
class S:
    def probe(self, request):
        req_id = request.request_id
        try:
            hit = self._query(req_id)
        except TimeoutError:
            self._unpin(req_id)
            return 0, False
        try:
            n = self._count(hit)
        except ValueError:
            self._log.warning("bad hit for %s", req_id)
            return 0, False
        return n, True
''', **{**INFERRED, "release": [*INFERRED["release"], "_unpin"]})
    assert [(f.function.rpartition(".")[2], f.line) for f in found] == [("probe", 13)], found
    assert "is caught and the handler returns at line 13" in found[0].message
