"""A request handed to a background worker before it is registered where
the worker looks it up.

A hook often does two things with a request id: it hands the request to a
background worker (a queue a transfer thread takes from, a thread or executor
task) and it registers the id in the container the worker's completion path
looks it up in (``if request_id in self.reqs_to_process: report it``, else
log and drop it). When the hand-off comes first, a transfer that finishes
before the hook reaches the registration (nothing to read, a fast failure, a
peer that answers at once) is looked up, not found and dropped: the request
is never reported and waits forever. vllm-ascend 0.18.0's Mooncake worker
queued each pull to its receiving thread in ``start_load_kv`` and registered
the ids with the task tracker after the loop; 0.23.0 registers them first.

By structure: in a connected function, a statement that hands an id on (a
``put`` into a queue, directly or in an analysed function it calls, two calls
deep, or a thread, executor or callback started with it) and a later
statement, not in another arm of the same ``if`` or ``try``, that adds an id
named in both to a request-keyed container which the handed-on work tests
membership of (``in``/``not in`` in an ``if`` test whose arm for a missing
id only logs and leaves, or is empty): the work is what the thread, task or
callback runs, or what the loops that take from the queue run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.containers import Container, self_attr
from kvflowmap.lifecycle.effects import Effect, is_logging
from kvflowmap.lifecycle.ids import QUEUE_PUTS
from kvflowmap.lifecycle.view import FnView, walk

_DEPTH = 2


@dataclass(frozen=True)
class Gate:
    """Background code ``fqn`` tests whether an id is in ``container`` at ``line``."""

    fqn: str
    line: int
    container: Container


@dataclass(frozen=True)
class LateRegistration:
    """``fqn`` hands ``id`` on at ``handoff_line`` (``how``) and registers it
    in ``gate.container`` only at ``line``."""

    fqn: str
    id: str
    handoff_line: int
    how: str
    line: int
    gate: Gate


def gates(fns: dict[str, FnView], background: set[str],
          is_id: Callable[[FnView, str], bool]) -> dict[Container, list[Gate]]:
    """Per container, the membership tests background code makes of it in an
    ``if`` (the first per function); ``is_id`` says which keys of a
    ``self.X.get(key)`` lookup are request ids."""
    out: dict[Container, list[Gate]] = {}
    for f in sorted(background):
        fn = fns.get(f)
        if fn is None or fn.cls is None:
            continue
        for s in fn.stmts:
            if s.kind != "if":
                continue
            for attr, miss in _lookups(fn, s, is_id):
                if not _drops(fn, miss):
                    continue  # a miss does something: another way to find the request
                box = Container(fn.cls, attr)
                found = out.setdefault(box, [])
                if all(g.fqn != f for g in found):
                    found.append(Gate(f, s.line, box))
    return out


def _lookups(fn: FnView, s: Stmt, is_id: Callable[[FnView, str], bool]
             ) -> Iterator[tuple[str, tuple[Stmt, ...]]]:
    """``(X, the arm run when the id is missing)`` for each lookup of an id
    in ``self.X`` that the test of ``if`` statement ``s`` makes: ``id in
    self.X`` / ``not in``, or ``v is None`` / ``is not None`` / ``not v`` /
    ``v`` of a local bound from ``self.X.get(id)`` (a counter looked up)."""
    for c in fn.compares.get(s.line, ()):
        if {"In", "NotIn"} & set(c.ops):
            for o in c.operands:
                if attr := self_attr(o):
                    yield attr, (s.body if "NotIn" in c.ops else s.orelse)
    text = s.text or ""
    if m := _NONE_TEST.match(text):
        name, missing = m["name"], not m["found"]
    elif m := _TRUTH_TEST.match(text):
        name, missing = m["name"], bool(m["missing"])
    else:
        return
    if attr := _got_from(fn, name, s.line, is_id):
        yield attr, (s.body if missing else s.orelse)


# ``v is None`` / ``v is not None``; ``not v`` / ``v``
_NONE_TEST = re.compile(r"^\s*(?P<name>[A-Za-z_]\w*)\s+is\s+(?P<found>not\s+)?None\s*$")
_TRUTH_TEST = re.compile(r"^\s*(?P<missing>not\s+)?(?P<name>[A-Za-z_]\w*)\s*$")


def _got_from(fn: FnView, name: str, line: int, is_id: Callable[[FnView, str], bool]
              ) -> str | None:
    """``X`` when the last binding of local ``name`` before ``line`` is
    ``self.X.get(key)`` with an id for the key (a queue's ``get()`` takes none)."""
    bound = [a for a in fn.all_assigns if a.target == name and a.line < line]
    if not bound:
        return None
    last = max(bound, key=lambda a: (a.line, a.col))
    attr = self_attr((last.value or "").removesuffix(".get()"))
    if attr and last.value == f"self.{attr}.get()" and any(
            c.line == last.line and c.callee == f"self.{attr}.get" and c.args
            and is_id(fn, c.args[0] or "") for c in fn.all_calls):
        return attr
    return None


def _drops(fn: FnView, arm: tuple[Stmt, ...]) -> bool:
    """The arm only logs and leaves (or is empty): an id not found is dropped."""
    for s in walk(arm):
        if s.kind in ("continue", "break", "pass"):
            continue
        if s.kind not in ("simple", "return") or not all(
                is_logging(c.callee or "") for c in fn.calls(s)) or fn.containers(s):
            return False
    return True


def late_registrations(fn: FnView, gated: dict[Container, list[Gate]],
                       effects: Callable[[FnView, Stmt], list[Effect]],
                       callees: Callable[[FnView, Stmt], list[FnView]],
                       is_id: Callable[[FnView, str], bool],
                       work: Callable[[FnView, list[tuple[str, int]], str], set[str]]
                       ) -> list[LateRegistration]:
    """Each registration in ``fn`` that comes after a hand-off of the same id
    to work that looks the id up where it is registered (see the module
    docstring); the first per registered container. ``work(fn, at,
    receiver)`` is what the hand-offs at ``at`` (``(function, line)``) make
    run in the background, reached through a call on ``receiver`` in ``fn``
    (``self.recv_thread``; empty for a hand-off made in ``fn`` itself)."""
    handed: list[tuple[Stmt, set[str], str, tuple[int, ...], set[str]]] = []
    out: dict[Container, LateRegistration] = {}
    wanted = set(gated)
    for s, where in _positions(fn.fact.body):
        ids = {n for n in s.names if is_id(fn, n)}
        if not ids:
            continue
        for c in sorted(_registers(fn, s, effects, callees, wanted, is_id),
                        key=lambda c: (c.owner, c.attr)):
            for h, h_ids, h_how, h_where, runs in handed:
                common = sorted(ids & h_ids)
                gate = next((g for g in gated[c] if g.fqn in runs), None)
                if gate and common and c not in out and \
                        not _exclusive(h_where, where, fn.fact.body):
                    out[c] = LateRegistration(fn.fqn, common[0], h.line, h_how, s.line, gate)
        how, at, receiver = _hands_on(fn, s, effects, callees)
        if how:
            handed.append((s, ids, how, where, work(fn, at, receiver)))
    return sorted(out.values(), key=lambda r: r.line)


def _reached(fn: FnView, s: Stmt, effects: Callable[[FnView, Stmt], list[Effect]],
             callees: Callable[[FnView, Stmt], list[FnView]], depth: int = 0
             ) -> Iterator[tuple[FnView, Stmt, FnView | None]]:
    """``s`` and, where it hands an id to analysed code, the statements of the
    functions it calls, ``_DEPTH`` calls deep: ``(function, statement, the
    function ``fn`` called to get there, or None for ``s`` itself)``."""
    yield fn, s, None
    if depth < _DEPTH and any(e.kind == "handover" for e in effects(fn, s)):
        for t in callees(fn, s):
            for ts in t.stmts:
                for g, x, _ in _reached(t, ts, effects, callees, depth + 1):
                    yield g, x, t


def _hands_on(fn: FnView, s: Stmt, effects: Callable[[FnView, Stmt], list[Effect]],
              callees: Callable[[FnView, Stmt], list[FnView]]
              ) -> tuple[str, list[tuple[str, int]], str]:
    """How ``s`` hands an id to background work (a spawn, a ``put`` into a
    queue, here or in a function it calls), where that happens
    (``(function, line)``) and the receiver of the call that gets there
    (``self.recv_thread`` of ``self.recv_thread.add_request(req)``; empty
    when ``s`` hands on itself); all empty when it does not."""
    for g, x, via in _reached(fn, s, effects, callees):
        how = _hand_off(g, x, effects)
        if how:
            if via is None:
                return how, [(g.fqn, x.line)], ""
            receiver = next((c.callee.rpartition(".")[0] for c in fn.calls(s) if c.callee
                             and c.callee.rpartition(".")[2] == via.name), "")
            return (f"{via.fqn.rpartition('.')[0].rpartition('.')[2]}.{via.name}",
                    [(g.fqn, x.line)], receiver)
    return "", [], ""


def _hand_off(fn: FnView, s: Stmt, effects: Callable[[FnView, Stmt], list[Effect]]) -> str:
    """The spawn or queue ``put`` of ``s`` itself, if it makes one."""
    for e in effects(fn, s):
        if e.kind == "spawn":
            return e.target or "a background task"
    for c in fn.calls(s):
        if c.callee and c.callee.rpartition(".")[2] in QUEUE_PUTS and any(
                e.kind == "add" and e.container is not None for e in effects(fn, s)):
            return c.callee
    return ""


def _registers(fn: FnView, s: Stmt, effects: Callable[[FnView, Stmt], list[Effect]],
               callees: Callable[[FnView, Stmt], list[FnView]], wanted: set[Container],
               is_id: Callable[[FnView, str], bool]) -> set[Container]:
    """The gated containers ``s`` adds an id to, here or in what it calls."""
    out = set()
    for g, x, _ in _reached(fn, s, effects, callees):
        out |= {e.container for e in effects(g, x)
                if e.kind == "add" and e.container is not None and e.container in wanted}
        # ``self.counts[rid] += 1``: a count per id (a defaultdict) registers it
        if g.cls and any(is_id(g, n) for n in x.names):
            out |= {box for a in g.assigns(x) if a.aug and (attr := self_attr(a.target))
                    and a.target == f"self.{attr}[]" and (box := Container(g.cls, attr)) in wanted}
    return out


def _positions(body: tuple[Stmt, ...], where: tuple[int, ...] = ()
               ) -> Iterator[tuple[Stmt, tuple[int, ...]]]:
    """Every statement with its place: per enclosing compound statement, the
    index in its list and which part (0 body, 1 handlers, 2 orelse, 3 final)."""
    for i, s in enumerate(body):
        here = (*where, i)
        yield s, here
        for k, part in enumerate((s.body, s.handlers, s.orelse, s.final)):
            yield from _positions(part, (*here, k))


def _exclusive(a: tuple[int, ...], b: tuple[int, ...], body: tuple[Stmt, ...]) -> bool:
    """``b`` cannot run after ``a`` in one call: it comes first in the
    source, or the two are in different arms of one ``if``, or in parts of
    one ``try`` that do not run in that order."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    if n >= min(len(a), len(b)):
        return False
    if n % 2 == 0:
        return a[n] > b[n]  # siblings in one list: ``b`` must come after ``a``
    compound = _at(body, a[:n])
    if compound.kind == "if":
        return True  # its body and its else
    if compound.kind != "try":
        return False  # a loop's body and its else: the else runs after
    order = {0: 0, 1: 1, 2: 1, 3: 2}  # body, then a handler or the else, then finally
    return {a[n], b[n]} == {1, 2} or order[b[n]] <= order[a[n]]


def _at(body: tuple[Stmt, ...], path: tuple[int, ...]) -> Stmt:
    """The statement at ``path`` (as ``_positions`` numbers it)."""
    s = body[path[0]]
    for k, i in zip(path[1::2], path[2::2], strict=False):
        s = (s.body, s.handlers, s.orelse, s.final)[k][i]
    return s
