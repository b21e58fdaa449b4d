"""Request-keyed state changed without the lock its other changes hold.

Connector state is shared between vLLM's threads and the connector's own
(a transfer thread fills ``self._done`` while ``get_finished`` swaps it out),
and the code says which lock guards a container by taking it around the
changes: ``with self._lock: self._done.add(rid)``. A change of the same
container made without that lock races with them: an id added between the
copy and the clear of a swap is lost (the request is never reported), a
``dict changed size during iteration`` kills the thread that walks it.

A lock is what a ``with`` statement enters as a plain attribute chain
(``with self._lock:``, ``with self._tracker.cv:``), named like a container
(``Tracker.cv``), so the same lock reached through a helper object is the
same. A function every analysed caller calls with a lock held holds it
too (``_mark_failed_unlocked``, called under the lock). Constructors run
before any thread exists and are left out. The judgement is by the code's
own discipline, never by names: a container none of whose changes holds a
lock is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass

from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.containers import ADD_OPS, REMOVE_OPS, RESET_OPS, Container, container_of
from kvflowmap.lifecycle.effects import Effects
from kvflowmap.lifecycle.ids import loop_targets, unwrap
from kvflowmap.lifecycle.view import FnView

_CHAIN = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_CHANGES = ADD_OPS | REMOVE_OPS | RESET_OPS
# constructors run before any thread exists (and before any request)
SETUP = frozenset({"__init__", "__post_init__", "__new__"})
# changes that act on the whole container (not atomic against a locked walk or swap)
_WHOLE = frozenset({"=", "clear"})
_VIEWS = frozenset({"items", "keys", "values", "copy"})
_COPIERS = frozenset({"list", "set", "dict", "tuple", "sorted", "frozenset"})
_LOGS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "log"})
ROUNDS = 3  # caller-held locks are followed this many calls deep

Locks = frozenset[Container]


@dataclass(frozen=True)
class Change:
    """``fqn`` changes ``container`` at ``line`` (``op``) holding ``locks``."""

    fqn: str
    container: Container
    line: int
    op: str
    locks: Locks


@dataclass(frozen=True)
class CopyClear:
    """``change`` clears (or rebinds) a container it read at ``read_line``,
    holding no lock, while ``adder`` adds to it on another thread, holding
    none either: what lands between the read and the clear is lost."""

    change: Change
    read_line: int
    adder: Change


@dataclass(frozen=True)
class Unlocked:
    """A change made without ``lock``, which ``guarded`` (another change of
    the same container) holds."""

    change: Change
    lock: Container
    guarded: Change


def unlocked(fns: dict[str, FnView], eff: Effects, keyed: Collection[Container],
             judged: Collection[str], roots: dict[str, frozenset[str]],
             held: dict[str, Locks]) -> list[Unlocked]:
    """Changes of request-keyed containers (``keyed``) in the ``judged``
    functions that hold no lock, where a change of the same container on
    another thread (``roots``: function -> the threads it runs on) holds one,
    and the unlocked change can break the other side: it rebinds or clears
    the container, or another thread walks it or clears it (an id added
    between its copy and its clear is lost). (A lone ``add`` or ``pop`` of
    one key is atomic in CPython; racing a locked check-then-act or a swap
    ``done, self._d = self._d, set()``, it behaves as some serial order
    would.) ``held``: the locks every caller holds (``held_by_callers``)."""
    by_container: dict[Container, list[Change]] = {}
    walks: dict[Container, set[str]] = {}
    bare_walks: list[Change] = []
    for f in sorted(judged):
        fn = fns.get(f)
        if fn is None or fn.name in SETUP:
            continue
        for s, locks in _with_locks(fn, eff, fn.fact.body, frozenset()):
            holding = locks | held.get(f, frozenset())
            passed = _through_helpers(fns, fn, eff, s, keyed)
            made = _changes(fn, eff, s, keyed)
            for c, (_, op) in passed.items():
                if op:
                    made.setdefault(c, op)
            for c, op in made.items():
                by_container.setdefault(c, []).append(Change(f, c, s.line, op, holding))
            for c in _walked(fn, eff, s, keyed) | {c for c, (w, _) in passed.items() if w}:
                walks.setdefault(c, set()).add(f)
                if not holding and s.kind == "for":
                    bare_walks.append(Change(f, c, s.line, "walk", holding))
    out = _bare_walks(bare_walks, by_container, roots)
    for c, changes in by_container.items():
        for ch in changes:
            mine = roots.get(ch.fqn, frozenset())
            if ch.locks or not mine:
                continue
            guarded = next((g for g in changes if g.locks and _other_thread(
                mine, roots.get(g.fqn, frozenset()))), None)
            if guarded is None:
                continue
            walked = any(_other_thread(mine, roots.get(w, frozenset())) for w in walks.get(c, ()))
            # a locked ``copy(); clear()`` elsewhere loses what lands in between
            cleared = any(g.op == "clear" and g.locks and
                          _other_thread(mine, roots.get(g.fqn, frozenset())) for g in changes)
            if ch.op in _WHOLE or walked or cleared:
                out.append(Unlocked(ch, sorted(guarded.locks)[0], guarded))
    return sorted(out, key=lambda u: (u.change.fqn, u.change.line))


def copy_then_clear(fns: dict[str, FnView], eff: Effects, keyed: Collection[Container],
                    judged: Collection[str], roots: dict[str, frozenset[str]],
                    held: dict[str, Locks]) -> list[CopyClear]:
    """Containers no change of which holds a lock, read whole (a walk, a
    copy, ``out.update(c)``, ``x = c``) and then cleared or rebound by a
    later statement of the same function, while a function on another thread
    adds to them: an id added between the read and the clear is neither in
    what was read nor left in the container (a done-callback adding to
    ``self._failed`` while ``get_finished`` does ``done.update(self._failed);
    self._failed.clear()``). The one-statement swap ``out, self._c = self._c,
    set()`` reads and rebinds at once and is left alone. ``held``: the locks
    every caller holds (``held_by_callers``)."""
    adds: dict[Container, list[Change]] = {}
    locked: set[Container] = set()
    clears: list[tuple[Change, int]] = []
    for f in sorted(judged):
        fn = fns.get(f)
        if fn is None or fn.name in SETUP:
            continue
        reads: dict[Container, int] = {}
        for s, locks in _with_locks(fn, eff, fn.fact.body, frozenset()):
            holding = locks | held.get(f, frozenset())
            changes = _changes(fn, eff, s, keyed)
            if holding:
                locked.update(changes)
                continue
            for c, op in changes.items():
                if op in ADD_OPS:
                    adds.setdefault(c, []).append(Change(f, c, s.line, op, holding))
                elif op in _WHOLE and reads.get(c, s.line) < s.line:
                    clears.append((Change(f, c, s.line, op, holding), reads[c]))
            for c in _walked(fn, eff, s, keyed) | _read_whole(fn, eff, s, keyed):
                reads.setdefault(c, s.line)
    out = []
    for ch, read in clears:
        if ch.container in locked:
            continue  # the lock discipline of ``unlocked`` judges it
        if _loop_confined(fns[ch.fqn], read, ch.line):
            continue
        mine = roots.get(ch.fqn, frozenset())
        adder = next((a for a in adds.get(ch.container, ()) if mine and
                      _other_thread(mine, roots.get(a.fqn, frozenset()))), None)
        if adder is not None:
            out.append(CopyClear(ch, read, adder))
    return sorted(out, key=lambda u: (u.change.fqn, u.change.line))


def _loop_confined(fn: FnView, start: int, end: int) -> bool:
    """A coroutine that does not await between ``start`` and ``end``: nothing
    else on its event loop runs in between (state of a loop is the loop's)."""
    return fn.fact.is_async and not any(
        c.awaited and start <= c.line < end for c in fn.facts.calls
        if c.scope == fn.fact.qualname)


def _read_whole(fn: FnView, eff: Effects, s: Stmt, keyed: Collection[Container]) -> set[Container]:
    """Containers statement ``s`` takes whole: passed as an argument
    (``done.update(self._failed)``) or aliased (``out = self._failed``)."""
    chains = [a for call in fn.calls(s) for a in call.args[:1]
              if a and "." in (call.callee or "") and
              (call.callee or "").rpartition(".")[2] not in _LOGS]
    chains += [a.value for a in fn.assigns(s) if a.value and "(" not in a.value]
    found = (container_of(ch, fn, eff.values) for ch in chains if _CHAIN.fullmatch(ch))
    return {c for c in found if c is not None and c in keyed}


def _bare_walks(walks: list[Change], by_container: dict[Container, list[Change]],
                roots: dict[str, frozenset[str]]) -> list[Unlocked]:
    """Loops over a container without its lock while another thread changes
    it holding the lock: the loop dies with ``dictionary changed size during
    iteration`` (or skips an entry), and the thread running it with it."""
    out = []
    for w in walks:
        mine = roots.get(w.fqn, frozenset())
        guarded = next((g for g in by_container.get(w.container, []) if g.locks and
                        _other_thread(mine, roots.get(g.fqn, frozenset()))), None)
        if mine and guarded is not None:
            out.append(Unlocked(w, sorted(guarded.locks)[0], guarded))
    return out


def _other_thread(mine: frozenset[str], theirs: frozenset[str]) -> bool:
    """Some thread of ``theirs`` is not one of ``mine`` (or the other way)."""
    return bool(theirs) and any(a != b for a in mine for b in theirs)


def _with_locks(fn: FnView, eff: Effects, body: tuple[Stmt, ...],
                locks: Locks) -> Iterator[tuple[Stmt, Locks]]:
    """Every statement of ``body`` (nested included) with the locks held there."""
    for s in body:
        inner = locks | _entered(fn, eff, s) if s.kind == "with" else locks
        yield s, locks
        for part in (s.body, s.orelse, s.final):
            yield from _with_locks(fn, eff, part, inner if part is s.body else locks)
        for h in s.handlers:
            yield from _with_locks(fn, eff, (h,), locks)


def _entered(fn: FnView, eff: Effects, s: Stmt) -> Locks:
    """The locks a ``with`` enters: its items that are plain attribute chains."""
    out = set()
    for item in (s.text or "").split(","):
        item = item.strip()
        if _CHAIN.fullmatch(item) and (c := container_of(item, fn, eff.values)) is not None:
            out.add(c)
    return frozenset(out)


def _changes(fn: FnView, eff: Effects, s: Stmt,
             keyed: Collection[Container]) -> dict[Container, str]:
    """Request-keyed containers statement ``s`` itself changes, each with how:
    an add, a removal or a reset (the operation), or ``=`` for rebinding the
    attribute (a swap)."""
    found = [(op.container, op.op) for op in fn.containers(s) if op.op in _CHANGES]
    found += [(a.target, "=") for a in fn.assigns(s) if "." in a.target and "[" not in a.target]
    out: dict[Container, str] = {}
    for chain, how in found:
        c = container_of(chain, fn, eff.values)
        if c is not None and c in keyed:
            out.setdefault(c, how)
    return out


def _walked(fn: FnView, eff: Effects, s: Stmt, keyed: Collection[Container]) -> set[Container]:
    """Request-keyed containers statement ``s`` walks: a ``for`` over it (or
    its ``items()``/``list(...)``), a copy, or a view of its entries."""
    found = (container_of(ch, fn, eff.values) for ch in _walked_chains(fn, s))
    return {c for c in found if c is not None and c in keyed}


def _through_helpers(fns: dict[str, FnView], fn: FnView, eff: Effects, s: Stmt,
                     keyed: Collection[Container]) -> dict[Container, tuple[bool, str | None]]:
    """Request-keyed containers ``s`` passes to an analysed helper that walks
    or changes the parameter they bind (``self._pop_done(self._sending)``,
    which walks and deletes entries): whether it walks it, and its first
    change. The helper's own statements name a local, so this is the only
    place the container's change is seen."""
    out: dict[Container, tuple[bool, str | None]] = {}
    for call in fn.calls(s):
        for t in eff.calls.resolve(fn.ctx, call):
            callee = fns.get(t.fqn)
            if callee is None or callee is fn:
                continue
            params = list(callee.param_names)
            if callee.cls and params and params[0] in ("self", "cls"):
                params = params[1:]
            for arg, p in zip(call.args, params, strict=False):
                c = container_of(arg, fn, eff.values) if arg else None
                if c is None or c not in keyed:
                    continue
                walks = any(p in _walked_chains(callee, x) for x in callee.stmts)
                change = next((op.op for x in callee.stmts for op in callee.containers(x)
                               if op.op in _CHANGES and op.container.replace("[]", "") == p),
                              None)
                if walks or change:
                    out.setdefault(c, (walks, change))
    return out


def _walked_chains(fn: FnView, s: Stmt) -> list[str]:
    """The chains statement ``s`` walks (see ``_walked``)."""
    chains = [unwrap(loop_targets(s.text)[1])] if s.kind == "for" else []
    for call in fn.calls(s):
        base, _, meth = (call.callee or "").rpartition(".")
        if meth in _VIEWS and base:
            chains.append(base)
        elif call.callee in _COPIERS and call.args and call.args[0]:
            chains.append(call.args[0] or "")
    return [ch for ch in chains if ch]


def held_by_callers(fns: dict[str, FnView], eff: Effects,
                     overrides: Callable[[str], list[str]]) -> dict[str, Locks]:
    """Locks every analysed call of a function is made with, a few calls
    deep; a call resolved to a method also calls its overrides (a base
    class's template method calling ``self._finish_locked()``)."""
    sites: dict[str, list[tuple[str, Locks]]] = {}
    for f, fn in sorted(fns.items()):
        for s, locks in _with_locks(fn, eff, fn.fact.body, frozenset()):
            for c in fn.calls(s):
                for t in eff.calls.resolve(fn.ctx, c):
                    for callee in (t.fqn, *(overrides(t.fqn) if t.fqn in fns else ())):
                        if callee in fns and callee != f:
                            sites.setdefault(callee, []).append((f, locks))
    held: dict[str, Locks] = {}
    for _ in range(ROUNDS):
        nxt = {t: frozenset.intersection(*(locks | held.get(caller, frozenset())
                                           for caller, locks in calls))
               for t, calls in sites.items()}
        nxt = {t: v for t, v in nxt.items() if v}
        if nxt == held:
            break
        held = nxt
    return held
