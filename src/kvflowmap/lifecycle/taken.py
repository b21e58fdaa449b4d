"""Ids taken out of owed state into a local that dies with the function.

``failed.add(self._failed_q.get_nowait())`` moves an id out of a container a
report reads (``reports.owed_containers``) into a local collection. From
then on the local is the only thing that knows them: unless it is returned,
stored, passed on, merged into something that is, or walked by a loop that
hands its ids on, those requests are never reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvflowmap.lifecycle.containers import ADD_OPS
from kvflowmap.lifecycle.effects import HANDLING, Effects, is_logging
from kvflowmap.lifecycle.view import FnView

_TAKE = re.compile(r"self\.(\w+)\.(?:get_nowait|get|pop|popleft|popitem)\(")
_MERGE = frozenset({"update", "add", "extend", "append", "union", "__ior__"})
_INERT = frozenset({"len", "bool", "sorted", "list", "set", "tuple", "print", "str", "repr",
                    "min", "max", "any", "all", "isinstance"})


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
    return [t for name, t in sorted(out.items()) if not escapes(fn, eff, name)]


def escapes(fn: FnView, eff: Effects, local: str, depth: int = 3) -> bool:
    """``local`` leaves the function, directly or through locals it is merged into."""
    if depth == 0:
        return True
    for s in fn.stmts:
        if local not in s.names:
            continue
        if fn.returns(s):
            return True
        if s.kind == "for" and (s.text or "").rpartition(" in ")[2].strip() == local:
            if any(e.kind in HANDLING for b in _body(s) for e in eff.of(fn, b)):
                return True
            continue
        for a in fn.assigns(s):
            if a.value == local or (a.aug and a.value == local):
                if "." in a.target or "[" in a.target:
                    return True
                if a.target != local and escapes(fn, eff, a.target, depth - 1):
                    return True
        for c in fn.calls(s):
            if local not in c.args and local not in (v for _, v in c.kwargs):
                continue
            callee = c.callee or ""
            base, _, meth = callee.rpartition(".")
            if is_logging(callee) or callee in _INERT:
                continue
            if meth in _MERGE and base and "." not in base and base != local:
                if escapes(fn, eff, base, depth - 1):
                    return True
                continue
            return True
    return False


def _body(s):
    from kvflowmap.lifecycle.view import walk

    return list(walk(s.body))
