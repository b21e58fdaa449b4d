"""Pending state that has to count: a request queued again before its
earlier work completed.

A hook that runs every step (``wait_for_save``, ``build_connector_meta``)
hands the same request to a queue or an executor each step it has work
(chunked prefill saves a few blocks per step). When it marks the request
pending in a *set* (``self._pending.add(rid)``) and the completion of any one
of those tasks takes it out again (``self._pending.discard(rid)`` and then
the report), the first task to finish reports the request while later ones
still run: vLLM frees blocks that are still being read. Pending state that
can be entered twice must count (``self._pending[rid] += 1``).

Found by structure: in a function the per-step hooks reach, an id is added
to a request-keyed container with ``add`` (a set), the same function puts
work on a queue or spawns it, and no membership test on that container
keeps the request from being queued again (a ``continue``/``return`` when
it is already pending, or the put inside ``if rid not in ...``); another
function removes the id from the container.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.containers import Container, container_of
from kvflowmap.lifecycle.ids import QUEUE_PUTS, loop_targets, unwrap
from kvflowmap.lifecycle.view import FnView, walk

_JUMPS = ("continue", "return", "break")


@dataclass(frozen=True)
class SetPending:
    """In ``fqn``, ``container`` is added to at ``add_line`` while the work is
    queued at ``put_line``; ``removed_in`` takes the id out at ``removed_line``."""

    fqn: str
    container: Container
    add_line: int
    put_line: int
    removed_in: str
    removed_line: int


def set_pending(fn: FnView, values, keyed: dict[Container, list[tuple[str, int]]],
                is_id, spawn_lines: set[int]) -> list[SetPending]:
    """The set-pending containers of one function (see the module docstring).
    ``keyed``: request-keyed containers with their removal sites (function,
    line); ``is_id(fn, text)``: the lifecycle model's id test;
    ``spawn_lines``: lines of ``fn`` that start a thread or executor task."""
    puts = [s for s in fn.stmts if s.kind == "simple" and (s.line in spawn_lines or any(
        (c.callee or "").rpartition(".")[2] in QUEUE_PUTS and
        (c.callee or "").startswith("self.") for c in fn.calls(s)))]
    if not puts:
        return []
    loops = _enclosing_loops(fn.fact.body, ())
    out: list[SetPending] = []
    seen: set[Container] = set()
    for s in fn.stmts:
        for op in fn.containers(s):
            if op.op != "add" or not is_id(fn, op.key):
                continue
            c = container_of(op.container, fn, values)
            if c is None or c in seen or c not in keyed:
                continue
            removals = [(f, line) for f, line in keyed[c] if f != fn.fqn]
            mine = [p for p in puts if _same_ids(p, op.key or "", loops.get(id(s), ()), loops)]
            if not removals or not mine or _deduped(fn, op.container, mine):
                continue
            seen.add(c)
            out.append(SetPending(fn.fqn, c, op.line, mine[0].line, *removals[0]))
    return out


def _enclosing_loops(body: tuple[Stmt, ...], outer: tuple[Stmt, ...]) -> dict[int, tuple[Stmt, ...]]:
    """For each statement (by id), the ``for`` loops it is nested in, innermost last."""
    out: dict[int, tuple[Stmt, ...]] = {}
    for s in body:
        out[id(s)] = outer
        inner = (*outer, s) if s.kind == "for" else outer
        out.update(_enclosing_loops(s.body, inner))
        for part in (s.orelse, s.handlers, s.final):
            out.update(_enclosing_loops(part, outer))
    return out


def _same_ids(put: Stmt, key: str, add_loops: tuple[Stmt, ...],
              loops: dict[int, tuple[Stmt, ...]]) -> bool:
    """The put carries the ids the add marks pending: it names the id inside
    the same loop, or the collection that loop walks (``for rid in ids: add``
    ... ``put(Task(request_ids=ids))``)."""
    names = set(put.names)
    if not add_loops:
        return key in names
    loop = add_loops[-1]
    targets, iterable = loop_targets(loop.text)
    if key in targets and key in names and loop in loops.get(id(put), ()):
        return True
    walked = unwrap(iterable)
    return bool(walked) and walked in names


def _deduped(fn: FnView, chain: str, puts: list[Stmt]) -> bool:
    """A membership test on ``chain`` keeps a pending request from being
    queued again: it encloses a put, or its branch leaves (``continue``)."""
    put_ids = {id(p) for p in puts}
    for s in walk(fn.fact.body):
        if s.kind not in ("if", "while"):
            continue
        cmps = fn.compares.get(s.line, ())
        if not any(c.ops[:1] in (("In",), ("NotIn",)) and chain in c.operands for c in cmps):
            continue
        inner = list(walk(s.body + s.orelse))
        if any(id(x) in put_ids for x in inner) or any(x.kind in _JUMPS for x in inner):
            return True
    return False
