"""Ids a report function takes out of pending state without reporting them.

A report function (a report hook, or a helper it calls, that fills a local
collection of ids and returns it) finishes a request by taking its id out of
the container it was pending in (``del self._reqs_to_send[rid]``,
``self._futures.pop(rid)``, a walk of ``self._futures`` followed by
``self._futures.clear()``) and adding it to what it returns. Where the
same container is emptied that way at one place and, at another place of a
report function, the id is taken out and not reported (nor handed on), the
second place loses the request: nothing will ever report it again, and vLLM
waits for it forever (``WAITING_FOR_REMOTE_KVS``, or blocks never freed).

A tracker object reports the same way without returning anything: it
*moves* the id out of one container into an owed one (a container a report
function reads, ``self.finished_requests``), and the report function later
returns what the owed one holds. The methods of such a helper class (one
with no protocol hook) that return nothing are judged like report
functions, and such a move counts as the report.

The judgement is by deviance from the code's own pairing, not by names: a
container none of whose removals is paired with a report is cleanup state,
and is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.containers import REMOVE_OPS, RESET_OPS, Container, container_of
from kvflowmap.lifecycle.effects import Effects
from kvflowmap.lifecycle.ids import COLLECT, loop_targets, unwrap
from kvflowmap.lifecycle.pending import reported_into, returned_names
from kvflowmap.lifecycle.view import FnView, walk

# What else may become of an id taken out: it leaves with a call, a thread or
# the return value (a container add does not count: that is the next state,
# judged where it is emptied).
_ONWARD = frozenset({"handover", "spawn", "return"})


@dataclass(frozen=True)
class Removal:
    """``fqn`` takes ``id_name`` out of ``container`` at ``line``."""

    fqn: str
    container: Container
    id_name: str
    line: int
    reported: bool
    # the returned local the id is added to ("" when reported another way)
    into: str = ""


@dataclass(frozen=True)
class Unreported:
    """An unreported removal, and a removal of the same container that reports."""

    removal: Removal
    paired: Removal


def unreported(fns: dict[str, FnView], eff: Effects, reporters: list[str],
               keyed: Collection[Container],
               owed: Collection[Container] = (),
               hooks: Collection[str] = ()) -> list[Unreported]:
    """Removals in report functions that report nothing, for containers whose
    removals elsewhere in report functions do report the id. A removal key
    counts as an id when the model knows it is one, or when it is a plain
    name taken out of a container ``keyed`` by request ids. Methods of the
    helper classes owning an ``owed`` container are judged too
    (``tracker_methods``), and moving the id into an owed container reports it."""
    by_container: dict[Container, list[Removal]] = {}
    # a report function reports into what it returns; a tracker by a move
    # (in a report function, a move is side state following the report)
    trackers = set(tracker_methods(fns, owed, hooks))
    for f in sorted(set(reporters) | trackers):
        fn = fns.get(f)
        returned = returned_names(fn) if fn is not None else set()
        if fn is None or not (returned or f in trackers):
            continue
        for r in removals(fn, eff, returned, keyed, owed if f in trackers else ()):
            by_container.setdefault(r.container, []).append(r)
    out = []
    for rs in by_container.values():
        for r in rs:
            if r.reported:
                continue
            # a removal reporting in the same function first, then elsewhere in
            # a report slot this function does not leave constantly None
            paired = next((p for p in rs if p.reported and p.fqn == r.fqn), None) or next(
                (p for p in rs if p.reported and _may_report(fns[p.fqn], p.into, fns[r.fqn])),
                None)
            if paired is not None:
                out.append(Unreported(r, paired))
    return sorted(out, key=lambda u: (u.removal.fqn, u.removal.line))


def tracker_methods(fns: dict[str, FnView], owed: Collection[Container],
                    hooks: Collection[str]) -> list[str]:
    """Methods of helper classes (no protocol hook among their methods) that
    own an owed container, returning nothing: where a tracker moves ids. One
    that returns a value hands what it took out back to its caller, which
    decides (``req = self.waits.pop(rid); return req``)."""
    owners = {c.owner for c in owed}
    hooked = {v.cls for v in fns.values() if v.cls in owners and v.name in hooks}
    return sorted(f for f, v in fns.items() if v.cls in owners - hooked and
                  v.name != "__init__" and all((r.value or "None") == "None"
                                               for r in v.all_returns))


def _may_report(paired: FnView, into: str, fn: FnView) -> bool:
    """``fn`` can report what ``paired`` reports through its local ``into``:
    some tuple slot ``into`` flows to is not the constant ``None`` in every
    return of ``fn`` (``return None, finished_retrieves`` reports no saves)."""
    slots = _slots(paired, into) if into else set()
    if not slots:
        return True
    mine = [r.elements for r in fn.all_returns if r.elements]
    return not mine or any(any(i >= len(e) or e[i] != "None" for e in mine) for i in slots)


def _slots(fn: FnView, local: str) -> set[int]:
    """Tuple positions of ``fn``'s returns that ``local`` flows into."""
    width = max((len(r.elements) for r in fn.all_returns if r.elements), default=0)
    return {i for i in range(width) if local in returned_names(
        fn, [r.elements[i] for r in fn.all_returns if r.elements and len(r.elements) > i])}


def removals(fn: FnView, eff: Effects, returned: set[str],
             keyed: Collection[Container] = (),
             owed: Collection[Container] = ()) -> list[Removal]:
    """Every place ``fn`` takes an id out of a request-keyed container, with
    whether the id is reported (or handed on, or moved into another ``owed``
    container) in the scope that binds it: the innermost ``for`` loop around
    the removal, else the function body."""
    out = []
    for s, loop in _with_loop(fn.fact.body, None):
        for op in fn.containers(s):
            c = container_of(op.container, fn, eff.values) if op.op in REMOVE_OPS else None
            if c is not None and op.key and (eff.state.is_id(fn, op.key) or (
                    c in keyed and op.key.isidentifier() and op.key != "self")):
                scope = loop.body if loop is not None else fn.fact.body
                into = _reports_in(fn, eff, loop, scope, op.key, returned,
                                   [o for o in owed if o != c])
                out.append(Removal(fn.fqn, c, op.key, s.line, into is not None, into or ""))
    for block in fn.lists:
        for i, s in enumerate(block):
            for op in fn.containers(s):
                walker = _walker(block[:i], op.container) if op.op in RESET_OPS else None
                if walker is not None and \
                        (c := container_of(op.container, fn, eff.values)) is not None:
                    rid = loop_targets(walker.text)[0][0]
                    into = _reports_in(fn, eff, walker, walker.body, rid, returned,
                                       [o for o in owed if o != c])
                    out.append(Removal(fn.fqn, c, rid, s.line, into is not None, into or ""))
    return out


def _with_loop(body: tuple[Stmt, ...], loop: Stmt | None) -> Iterator[tuple[Stmt, Stmt | None]]:
    """Every statement of ``body``, nested ones included, with the innermost
    ``for`` loop whose body holds it (``loop`` for the top level)."""
    for s in body:
        yield s, loop
        yield from _with_loop(s.body, s if s.kind == "for" else loop)
        for part in (s.handlers, s.orelse, s.final):
            yield from _with_loop(part, loop)


def _walker(before: tuple[Stmt, ...], chain: str) -> Stmt | None:
    """The last ``for`` loop of ``before`` that walks ``chain`` (``.items()``,
    ``list(...)``) and binds an id: the ids a reset after it takes out."""
    for prev in reversed(before):
        if prev.kind == "for":
            targets, iterable = loop_targets(prev.text)
            if targets and unwrap(iterable) == chain:
                return prev
    return None


def _reports_in(fn: FnView, eff: Effects, binder: Stmt | None, scope: tuple[Stmt, ...],
                rid: str, returned: set[str], owed: Collection[Container] = ()) -> str | None:
    """How ``rid`` is reported where it is bound: the returned local the loop
    walks or a statement of the scope adds it to, "" when a statement hands it
    on, returns it or adds it to an ``owed`` container, None when nothing does."""
    walked = unwrap(loop_targets(binder.text)[1]) if binder is not None else ""
    if walked in returned:
        return walked
    for s in walk(scope):
        into = reported_into(fn, s, rid, returned)
        if into is not None:
            return into
        if rid in s.names and any(e.kind in _ONWARD for e in eff.of(fn, s)):
            return ""
        if owed and any(op.op in COLLECT and op.key == rid and
                        container_of(op.container, fn, eff.values) in owed
                        for op in fn.containers(s)):
            return ""
        if any(re.search(rf"\b{re.escape(rid)}\b", r.value or "") for r in fn.returns(s)):
            return ""
    return None
