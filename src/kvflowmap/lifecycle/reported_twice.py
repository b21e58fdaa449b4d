"""Reported twice: a function that reports an id whether or not it is still
pending, while another path already reports the pending ones.

``finished.add(rid)`` followed by ``if rid in self._delayed: pop`` (vllm-ascend
0.11.0's ``update_done_task_count``): the function asks whether the request
is still pending, and reports it either way. When another function took it
out of the pending container and reported it (an expiry: "force freed"), a
late completion reports it a second time, and vLLM frees blocks it no longer
owns or trips on an unknown id; whatever the function records on the "not
pending" arm for a later event (``record_finished_requests.add(rid)``) waits
for an event that already happened. vllm-ascend 0.13.0 reports only ids
still being processed.

Found structurally: in one function, a test ``k in self.P`` whose true arm
takes ``k`` out of ``P``, and an add of ``k`` to a container a report hook
reads (``owed``) outside that arm; and another function that takes ids out
of ``P`` and reports them (adds to an owed container or returns them).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.containers import ADD_OPS, REMOVE_OPS, Container, container_of
from kvflowmap.lifecycle.effects import Effects
from kvflowmap.lifecycle.view import FnView, siblings, walk

_MEMBER = re.compile(r"^\s*([A-Za-z_][\w.]*)\s+in\s+(self(?:\.\w+)+)\s*$")


@dataclass(frozen=True)
class ReportedTwice:
    """``fqn`` reports ``key`` into ``report`` at ``line`` outside the test at
    ``test_line`` of whether it is still in ``pending``, which ``other``
    empties (at ``other_line``) and reports from too."""

    fqn: str
    line: int
    test_line: int
    key: str
    report: Container
    pending: Container
    other: str
    other_line: int


def reported_twice(fns: dict[str, FnView], eff: Effects, owed: Collection[Container],
                   judged: Collection[str]) -> list[ReportedTwice]:
    """Every unconditional report of an id whose pending state the same
    function tests, when another function reports that state's ids too."""
    reporters = _reporting_removers(fns, eff, owed, judged)
    out: list[ReportedTwice] = []
    for f in sorted(judged):
        fn = fns.get(f)
        if fn is None:
            continue
        for test, key, pending in _pending_tests(fn, eff, fns):
            others = [(g, ln) for g, ln in reporters.get(pending, ()) if g != f]
            if not others:
                continue
            inside = {id(x) for x in walk(test.body)}
            for s in siblings(fn.fact.body, test):
                if id(s) in inside:
                    continue
                for op in fn.containers(s):
                    c = container_of(op.container, fn, eff.values)
                    if c is not None and op.op in ADD_OPS and op.key == key and c in owed \
                            and c != pending:
                        out.append(ReportedTwice(f, op.line, test.line, key, c, pending,
                                                 *others[0]))
    return sorted(set(out), key=lambda r: (r.fqn, r.line))


def _pending_tests(fn: FnView, eff: Effects, fns: dict[str, FnView]
                   ) -> Iterator[tuple[Stmt, str, Container]]:
    """``if k in self.P:`` statements whose true arm takes ``k`` out of ``P``."""
    for s in fn.stmts:
        if s.kind != "if":
            continue
        m = _MEMBER.match(s.text or "")
        if not m:
            continue
        key, chain = m.groups()
        pending = container_of(chain, fn, eff.values)
        if pending is None:
            continue
        takes = any(op.op in REMOVE_OPS and op.key == key and
                    container_of(op.container, fn, eff.values) == pending
                    for x in walk(s.body) for op in fn.containers(x))
        # a helper called with the key on the true arm that removes it
        takes = takes or any(
            key in c.args and any(
                op.op in REMOVE_OPS and container_of(op.container, h, eff.values) == pending
                for t in eff.calls.resolve(fn.ctx, c) if (h := fns.get(t.fqn)) is not None
                for op in h.all_containers)
            for x in walk(s.body) for c in fn.calls(x))
        if takes:
            yield s, key, pending


def _reporting_removers(fns: dict[str, FnView], eff: Effects, owed: Collection[Container],
                        judged: Collection[str]) -> dict[Container, list[tuple[str, int]]]:
    """Container -> (function, line) of removals in functions that also
    report: add to an owed container, or return a collection."""
    out: dict[Container, list[tuple[str, int]]] = {}
    for f in sorted(judged):
        fn = fns.get(f)
        if fn is None:
            continue
        reports = any(op.op in ADD_OPS and container_of(op.container, fn, eff.values) in owed
                      for op in fn.all_containers) or any(
            (r.value or "None") != "None" for r in fn.all_returns)
        if not reports:
            continue
        for op in fn.all_containers:
            c = container_of(op.container, fn, eff.values)
            if c is not None and op.op in REMOVE_OPS:
                out.setdefault(c, []).append((f, op.line))
    return out
