"""The indexer: facts, cache hits, parallel parsing, bad input."""

from __future__ import annotations

from pathlib import Path

from kvflowmap.api import Request, analyse
from kvflowmap.index.cache import FactCache
from kvflowmap.index.parse import facts_from_bytes

SRC = '''
import logging
logger = logging.getLogger(__name__)

class Conn(Base):
    """A connector."""
    limit: int = 3

    def probe(self, request, n: int = 0) -> tuple[int, bool]:
        self._pending[request.request_id] = n
        self._ids.add(request.request_id)
        request.status = RequestStatus.WAITING_FOR_REMOTE_KVS
        if request.status == RequestStatus.WAITING:
            logger.info("parked %s", request.request_id)
        return 0, True
'''


def test_facts_cover_the_kinds() -> None:
    ff = facts_from_bytes("m.py", SRC.encode())
    assert ff.problem is None
    fn = next(f for f in ff.functions if f.name == "probe")
    assert fn.qualname == "Conn.probe" and fn.class_qualname == "Conn"
    assert [p.name for p in fn.params] == ["self", "request", "n"]
    assert fn.params[2].annotation == "int" and fn.params[2].default == "0"
    assert fn.returns == "tuple[int, bool]"
    cls = ff.classes[0]
    assert cls.bases == ("Base",) and cls.doc == "A connector." and ("limit", "int") in cls.attributes
    ops = {(c.container, c.op) for c in ff.containers}
    assert ("self._pending", "setitem") in ops and ("self._ids", "add") in ops
    status = [a for a in ff.assigns if a.target == "request.status"]
    assert status[0].value == "RequestStatus.WAITING_FOR_REMOTE_KVS" and status[0].line == 12
    assert "RequestStatus.WAITING" in ff.compares[0].operands
    assert ff.logs[0].message == "parked %s" and ff.logs[0].level == "info"
    assert ff.returns[0].elements == ("0", "True")
    assert ff.imports[0].module == "logging"


def test_second_run_parses_nothing(tree, tmp_path: Path) -> None:
    root = tree({f"pkg/m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(12)}
                | {"pkg/__init__.py": ""})
    cache = tmp_path / "c"
    first = analyse(Request(sources=[str(root)], cache_dir=cache, jobs=2))
    assert first.stats.parsed == 13 and first.stats.cached == 0
    second = analyse(Request(sources=[str(root)], cache_dir=cache, jobs=2))
    assert second.stats.parsed == 0 and second.stats.cached == 13
    (root / "pkg/m3.py").write_text("def changed():\n    pass\n")
    third = analyse(Request(sources=[str(root)], cache_dir=cache, jobs=2))
    assert third.stats.parsed == 1
    assert "pkg.m3.changed" in third.graph


def test_corrupt_and_foreign_cache_entries_are_rebuilt(tmp_path: Path) -> None:
    cache = FactCache(tmp_path)
    ff = facts_from_bytes("a.py", b"x = 1\n")
    cache.put(ff)
    entry = next((tmp_path / "facts").rglob("*.msgpack"))
    entry.write_bytes(entry.read_bytes()[:20])
    assert cache.get(ff.sha, "a.py") is None
    entry.write_bytes(b"some other tool\n" + b"\0" * 40)
    assert cache.get(ff.sha, "a.py") is None
    cache.put(ff)
    assert cache.get(ff.sha, "b.py").path == "b.py"
    assert (tmp_path / ".gitignore").read_text().strip().endswith("*")


def test_indexed_files_and_graph_do_not_depend_on_worker_count(tmp_path: Path) -> None:
    """Facts arrive in completion order and imports are followed as they do;
    the set of files indexed (by fewest import hops) and the graph must come
    out the same with one worker, two, and from a warm cache."""
    from kvflowmap.check.stubs import stub_root
    from kvflowmap.render.json_out import to_node_link

    subject = Path(__file__).parent / "fixtures" / "minivllm"

    def run(jobs: int, cache: str):
        a = analyse(Request(sources=[str(subject)], context=[str(stub_root())],
                            cache_dir=tmp_path / cache, jobs=jobs))
        return sorted(a.linker.model.facts), to_node_link(a.graph)

    one = run(1, "one")
    assert len(one[0]) > 10
    assert run(2, "two") == one
    assert run(2, "two") == one  # warm: every file from the cache


def test_set_augmented_assignments_are_container_ops() -> None:
    """``self._done -= finished`` empties entries out as ``difference_update``
    would (a drain the lifecycle model must see); numbers are not containers."""
    ff = facts_from_bytes("m.py", b"""
class C:
    def f(self, done, new):
        self._done -= done
        self._done |= new
        self._live &= new
        self._count -= 1
        self._bits |= 4
""")
    assert [(c.container, c.op, c.key) for c in ff.containers] == [
        ("self._done", "difference_update", "done"), ("self._done", "update", "new"),
        ("self._live", "intersection_update", "new")]


def test_what_a_difference_takes_away_is_no_name_of_the_statement() -> None:
    """``done - self._failed`` and ``done.difference(self._failed)`` read the
    failed set only to leave its ids out: nothing of it flows into the result,
    so ``path``/the lifecycle model must not follow ids from it (NIXL's push
    worker, ``done_pushing - self._send_failures``)."""
    ff = facts_from_bytes("m.py", b"""
class C:
    def f(self, done):
        ok = {r for r in done - self._failed if r in self._sent}
        rest = done.difference(self._bad)
        more = self._a - (self._b | done)
""")
    names = [set(s.names) for s in ff.functions[0].body]
    assert "self._failed" not in names[0] and {"done", "self._sent"} <= names[0]
    assert "self._bad" not in names[1] and "done" in names[1]
    # only a whole chain is taken away; an expression's parts stay
    assert {"self._a", "self._b", "done"} <= names[2]


def test_truth_tests_and_type_ignores_are_facts() -> None:
    """A chain used as a condition on its own (``if``, ``while``, ``assert``,
    a conditional expression, ``and``/``or``, ``not``) is a truth test, and a
    ``# type: ignore`` is recorded by line; both survive the fact cache's
    codec: the optional-field rule reads them."""
    from kvflowmap.index.facts_codec import decode, encode

    ff = facts_from_bytes("m.py", b"""
def f(r, config):
    x = config.extra if config else None
    if r.spec and r.spec.n > 0:
        pass
    assert r.other
    while not r.queue:
        pass
    y = r.spec.n  # type: ignore[union-attr]
""")
    assert [(t.operands[0], t.line) for t in ff.truths] == [
        ("config", 3), ("r.spec", 4), ("r.other", 6), ("r.queue", 7)]
    assert ff.type_ignores == (9,)
    back = decode(encode(ff))
    assert back.truths == ff.truths and back.type_ignores == ff.type_ignores


def test_a_tuple_loop_over_enumerate_or_zip_binds_its_elements() -> None:
    """``for i, r in enumerate(meta.requests)`` binds ``r`` to an element of
    ``meta.requests`` (and ``zip`` each name to its sequence), and a loop over
    a mapping's ``items()`` or ``values()`` (also under ``list(...)``) binds
    the value to what a subscript of the mapping reads, so the evaluator
    knows what ``r`` and ``t`` are."""
    ff = facts_from_bytes("m.py", b"""
def f(meta):
    for idx, request in enumerate(meta.requests):
        pass
    for a, b in zip(meta.x, meta.y):
        pass
    for k, v in meta.d.items():
        pass
    for t in meta.trackers.values():
        pass
    for u in list(meta.trackers.values()):
        pass
    for w in meta.trackers.keys():
        pass
""")
    bound = [(b.target, b.value) for b in ff.binds if b.target != "<iter>"]
    assert bound == [("request", "meta.requests[]"), ("a", "meta.x[]"), ("b", "meta.y[]"),
                     ("v", "meta.d[]"), ("t", "meta.trackers[]"), ("u", "meta.trackers[]"),
                     ("w", "meta.trackers.keys()[]")]


def test_a_truth_test_of_an_if_after_comment_lines_is_on_the_if_line() -> None:
    """Leading comment lines belong to the ``if`` statement: its test's truth
    fact is on the ``if`` line, where the statement tree puts the test."""
    ff = facts_from_bytes("m.py", b"""
def f(overrides):
    x = 1

    # apply any overrides
    # (a second comment line)
    if overrides:
        pass
""")
    assert [(t.operands[0], t.line) for t in ff.truths] == [("overrides", 7)]
    assert ff.functions[0].body[1].line == 7
