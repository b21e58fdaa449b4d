"""A cache whose miss branch does not keep what it makes.

Connectors keep one socket, connection or handle per peer in a dict on
``self`` and look it up before making a new one:

    if path in self.notif_sockets:
        sock = self.notif_sockets[path]
    else:
        sock = make_zmq_socket(ctx, path, zmq.DEALER)
    return sock

When the miss branch does not put what it made into the dict, every call
makes a new one and nothing ever closes the old: a socket (a file
descriptor, a connection to the peer) per request, until the process runs
out (tpu-inference 0.18.0's ``_maybe_build_notif_socket``, fixed in 0.19.0
by ``self.notif_sockets[sock_path] = sock``).

Found by structure: a test of ``key in self.D`` (or ``not in``) whose hit
branch binds a local from ``self.D[...]`` and whose miss branch binds the
same local from a call; or ``x = self.D.get(key)`` followed by ``if x is
None:`` (or ``if not x:``) whose body binds ``x`` from a call. Nothing in the
function after the test puts anything into ``self.D``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.containers import ADD_OPS
from kvflowmap.lifecycle.view import FnView, walk

_MISSING = re.compile(r"^(?:not\s+(\w+)|(\w+)\s+is\s+None)$")


@dataclass(frozen=True)
class UnkeptMiss:
    """``fqn`` looks ``local`` up in ``self.<attr>`` (test at ``test_line``)
    and on a miss makes it at ``line`` without keeping it."""

    fqn: str
    attr: str
    local: str
    test_line: int
    line: int


def unkept_misses(fn: FnView, functions: dict[str, FnView]) -> list[UnkeptMiss]:
    """Every cache lookup of ``fn`` whose miss branch makes a value that
    nothing after the test puts into the cache (see the module docstring);
    ``functions`` (by FQN) has the methods of ``fn``'s class it may call."""
    out = []
    for s in fn.stmts:
        if s.kind != "if":
            continue
        found = _membership(fn, s) or _got_missing(fn, s)
        if found is None:
            continue
        attr, local, made = found
        if not _kept(fn, s, attr) and not _kept_elsewhere(fn, made, attr, functions):
            out.append(UnkeptMiss(fn.fqn, attr, local, s.line, made))
    return out


def _membership(fn: FnView, s: Stmt) -> tuple[str, str, int] | None:
    """``if k in self.D: x = self.D[k] else: x = make()`` (either order):
    (D, x, the line that makes it)."""
    for c in fn.compares.get(s.line, ()):
        if len(c.ops) != 1 or c.ops[0] not in ("In", "NotIn") or len(c.operands) != 2:
            continue
        cache = c.operands[1]
        if not cache.startswith("self.") or cache.count(".") != 1:
            continue
        hit, miss = (s.body, s.orelse) if c.ops[0] == "In" else (s.orelse, s.body)
        read = {a.target for x in hit for a in fn.assigns(x)
                if a.target.isidentifier() and (a.value or "").startswith(f"{cache}[")}
        for x in miss:
            for a in fn.assigns(x):
                if a.target in read and (a.value or "").endswith("()"):
                    return cache[5:], a.target, a.line
    return None


def _got_missing(fn: FnView, s: Stmt) -> tuple[str, str, int] | None:
    """``x = self.D.get(k)`` then ``if x is None: x = make()``: (D, x, the
    line that makes it)."""
    m = _MISSING.match((s.text or "").strip())
    if m is None:
        return None
    local = m.group(1) or m.group(2)
    got = [a for x in fn.stmts if x.line < s.line for a in fn.assigns(x)
           if a.target == local and re.fullmatch(r"self\.\w+\.get\(\)", a.value or "")]
    if not got:
        return None
    cache = (got[-1].value or "").removesuffix(".get()")
    for x in s.body:
        for a in fn.assigns(x):
            if a.target == local and (a.value or "").endswith("()"):
                return cache[5:], local, a.line
    return None


def _kept(fn: FnView, test: Stmt, attr: str) -> bool:
    """Something in the test's branches or after it puts into ``self.<attr>``
    (or rebinds it)."""
    after = [x for x in fn.stmts if x.line >= test.line]
    inside = {id(x) for x in walk((*test.body, *test.orelse))}
    return any(
        (op.container == f"self.{attr}" and op.op in ADD_OPS)
        for x in after for op in fn.containers(x)) or any(
        a.target == f"self.{attr}" for x in after for a in fn.assigns(x)) or any(
        (c.callee or "").startswith(f"self.{attr}.") for x in after if id(x) in inside
        for c in fn.calls(x))


def _kept_elsewhere(fn: FnView, made_line: int, attr: str,
                    functions: dict[str, FnView]) -> bool:
    """The value is computed by a method of the same object
    (``x = self._compute(k)``: no new resource), or another method of the
    class puts into ``self.<attr>``: the cache is kept there."""
    calls = [c for x in fn.stmts if x.line == made_line for c in fn.calls(x)]
    if fn.cls is None or any(f"{fn.cls}.{(c.callee or '')[5:]}" in functions
                             for c in calls if (c.callee or "").startswith("self.")):
        return True
    return any(
        g.cls == fn.cls and g.fqn != fn.fqn and not g.name.startswith("__init__") and any(
            op.container == f"self.{attr}" and op.op in ADD_OPS for op in g.all_containers)
        for g in functions.values())
