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

from kvflowmap.lifecycle.containers import ADD_OPS, resets, self_attr
from kvflowmap.lifecycle.effects import HANDLING, Effects, escapes
from kvflowmap.lifecycle.view import FnView, walk

_TAKE = re.compile(r"self\.(\w+)\.(?:get_nowait|get|pop|popleft|popitem)\(")


@dataclass(frozen=True)
class Taken:
    """``local`` received ids taken out of ``attr`` at ``line`` and never leaves."""

    fqn: str
    local: str
    attr: str
    line: int


def lost_locals(fn: FnView, eff: Effects, owed_attrs: set[str]) -> list[Taken]:
    """Locals of ``fn`` filled from owed containers that never hand their ids on."""
    out: dict[str, Taken] = {}
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
    # ``dropped = self._dropped; self._dropped = set()``: a swap in two
    # statements leaves the local as the only holder of the ids
    reset = {attr for s in fn.stmts for attr, _ in resets(fn, s)}
    for a in fn.all_assigns:
        attr = self_attr(a.value or "") if (a.value or "").count(".") == 1 else None
        if a.target.isidentifier() and not a.aug and attr in owed_attrs and attr in reset:
            out.setdefault(a.target, Taken(fn.fqn, a.target, attr, a.line))
    return [t for name, t in sorted(out.items()) if not escapes(fn, name, _hands_on(fn, eff))]


def _hands_on(fn: FnView, eff: Effects):
    """A ``for`` loop whose body hands an id on."""
    return lambda s: any(e.kind in HANDLING for b in walk(s.body) for e in eff.of(fn, b))
