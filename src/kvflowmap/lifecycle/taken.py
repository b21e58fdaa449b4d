"""Ids taken out of owed state into a local that dies with the function.

``failed.add(self._failed_q.get_nowait())`` (or ``rid =
self._done_q.get_nowait()``, or the swap ``x = self._done; self._done = set()``)
moves ids out of a container a report reads (``reports.owed_containers``) into a
local. From then on the local is the only thing that knows them: unless it is returned,
stored, passed on, merged into something that is, or walked by a loop that
hands its ids on, those requests are never reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvflowmap.lifecycle.containers import ADD_OPS, REMOVE_OPS, resets, self_attr
from kvflowmap.lifecycle.effects import HANDLING, Effects, hands_on_at
from kvflowmap.lifecycle.pending import returned_names, walked_container
from kvflowmap.lifecycle.view import FnView, walk

_TAKE = re.compile(r"self\.(\w+)\.(?:get_nowait|get|pop|popleft|popitem)\(")


@dataclass(frozen=True)
class Taken:
    """``local`` received ids taken out of ``attr`` at ``line`` and never leaves."""

    fqn: str
    local: str
    attr: str
    line: int


def lost_locals(fn: FnView, eff: Effects, owed_attrs: set[str],
                takers: dict[str, str] | None = None) -> list[Taken]:
    """Locals of ``fn`` filled from owed containers, or from a call to one of
    the ``takers`` (fqn -> the owed attribute it takes from), that never
    hand their ids on."""
    out = taken_locals(fn, eff, owed_attrs)
    takers = takers or {}
    for s in fn.stmts:
        for a in fn.assigns(s):
            if not a.target.isidentifier() or a.aug or not (a.value or "").endswith("()"):
                continue
            hits = [takers[t.fqn] for c in fn.calls(s) if c.callee == (a.value or "")[:-2]
                    for t in eff.calls.resolve(fn.ctx, c) if t.fqn in takers]
            if hits:
                out.setdefault(a.target, Taken(fn.fqn, a.target, hits[0], a.line))
    return [t for _, t in sorted(out.items()) if not _escapes_from(fn, eff, t)]


def _escapes_from(fn: FnView, eff: Effects, t: Taken) -> bool:
    """The ids ``t.local`` took at ``t.line`` leave before the local is
    assigned again (``dropped = self._a; ...; dropped = self._b``: the second
    value's hand-over does not carry the first)."""
    again = min((a.line for a in fn.all_assigns if a.target == t.local and a.line > t.line),
                default=None)
    hands_on = _hands_on(fn, eff)
    if any(hands_on_at(fn, s, t.local, hands_on) for s in fn.stmts
           if s.line >= t.line and (again is None or s.line < again)):
        return True
    # ``done = {self._map[s] for s in done if ...}``: the new value is made
    # of the old one, and carries its ids on
    return again is not None and any(
        (b.value or "").startswith(f"{t.local}[") for b in fn.binds.get(again, ())) and \
        _escapes_from(fn, eff, Taken(t.fqn, t.local, t.attr, again))


def takers(fns: dict[str, FnView], eff: Effects,
           owed_attrs: dict[str, set[str]]) -> dict[str, str]:
    """Functions that return ids they take out of an owed container of their
    class (``owed_attrs``: class -> attributes), with that attribute:
    ``expired = set(); ... self._delayed.pop(rid) ... return expired``, or a
    swap ``done = self._done; self._done = set(); return done``. A caller
    that drops what such a call returns drops those requests."""
    out: dict[str, str] = {}
    for f, fn in fns.items():
        attrs = owed_attrs.get(fn.cls or "")
        if not attrs:
            continue
        returned = returned_names(fn)
        for name, t in sorted(taken_locals(fn, eff, attrs).items()):
            if name in returned:
                out[f] = t.attr
                break
    return out


def taken_locals(fn: FnView, eff: Effects, owed_attrs: set[str]) -> dict[str, Taken]:
    """Every local of ``fn`` filled with ids taken out of an owed container,
    whether or not it hands them on."""
    out: dict[str, Taken] = {}
    returned = returned_names(fn)
    for s in fn.stmts:
        for op in fn.containers(s):
            m = _TAKE.search(op.key or "")
            if "." not in op.container and op.op in ADD_OPS and m and m.group(1) in owed_attrs:
                out.setdefault(op.container, Taken(fn.fqn, op.container, m.group(1), op.line))
        for a in fn.assigns(s):
            # ``rid = self._done_q.get_nowait()``: the local is the id itself
            # (a queue's or deque's next element: no key, so not a dict's value)
            m = _TAKE.search(a.value or "")
            if a.target.isidentifier() and not a.aug and m and m.group(1) in owed_attrs and any(
                    c.callee == (a.value or "")[:-2] and not c.args and not c.kwargs
                    for c in fn.calls(s)):
                out.setdefault(a.target, Taken(fn.fqn, a.target, m.group(1), a.line))
    # ``while self._delayed: rid = next(iter(self._delayed)); ...
    # self._delayed.popitem(); expired.add(rid)``: a walk that takes each id
    # out (by key or not) and collects it
    for loop in walk(fn.fact.body):
        walked = walked_container(fn, loop)
        if walked is None or walked[0] not in owed_attrs:
            continue
        walked_attr, rid = walked
        body = list(walk(loop.body))
        if not any(op.container == f"self.{walked_attr}" and op.op in REMOVE_OPS
                   for st in body for op in fn.containers(st)):
            continue
        adds = [op for st in body for op in fn.containers(st)
                if "." not in op.container and op.op in ADD_OPS and op.key == rid]
        # one of them is returned (``done_sending.add(rid)``): the others
        # are side notes on the same ids (``timed_out.add(rid)``)
        if any(op.container in returned for op in adds):
            adds = [op for op in adds if op.container in returned]
        for op in adds:
            out.setdefault(op.container, Taken(fn.fqn, op.container, walked_attr, op.line))
    # ``dropped = self._dropped; self._dropped = set()``: a swap in two
    # statements leaves the local as the only holder of the ids
    reset = {attr for s in fn.stmts for attr, _ in resets(fn, s)}
    for a in fn.all_assigns:
        attr = self_attr(a.value or "") if (a.value or "").count(".") == 1 else None
        if a.target.isidentifier() and not a.aug and attr in owed_attrs and attr in reset:
            out.setdefault(a.target, Taken(fn.fqn, a.target, attr, a.line))
    return out


def _hands_on(fn: FnView, eff: Effects):
    """A ``for`` loop whose body hands an id on."""
    return lambda s: any(e.kind in HANDLING for b in walk(s.body) for e in eff.of(fn, b))
