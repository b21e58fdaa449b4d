"""``forbid`` option ``polling_loops``: a loop that waits for another
thread by spinning, with no deadline.

``while True: if ready(): break; time.sleep(0.001)`` (or ``continue`` until a
flag another thread sets appears) in a hook is a wait with no timeout under
another name: when the other side never comes (a dead peer, a lost
completion), the hook never returns and the engine stops. A loop counts as
spinning when its body ``continue``s or sleeps; it is bounded when it reads
a clock (``time.monotonic()`` against a deadline), or counts its turns (a
local of its test that its body steps: ``retries -= 1``); a drain that
takes an item each turn and stops when there is none is no wait.
"""

from __future__ import annotations

from kvflowmap.check.context import CheckContext
from kvflowmap.facts import CallFact, Stmt
from kvflowmap.lifecycle.effects import is_clock
from kvflowmap.lifecycle.view import walk

_TAKES = frozenset({"get_nowait", "pop", "popleft", "popitem"})


def spin_loops(ctx: CheckContext, fqn: str) -> list[Stmt]:
    """The ``while`` loops of ``fqn`` that spin with no deadline."""
    fn = ctx.function(fqn)
    calls = ctx.facts(fqn).calls
    steps = {a.target for a in ctx.facts(fqn).assigns if a.aug and a.scope == fn.qualname}
    out = []
    for w in walk(fn.body):
        if w.kind != "while":
            continue
        inner = list(walk(w.body))
        made = [calls[i] for s in (w, *inner) for k, i in s.events if k == "call"]
        spins = any(s.kind == "continue" for s in inner) or any(_sleeps(c) for c in made)
        if spins and not _drains(w, inner, calls) and not any(is_clock(c.callee or "") for c in made) and \
                not (steps & set(w.names)) and not _counted_exit(inner, steps):
            out.append(w)
    return out


def _drains(w: Stmt, inner: list[Stmt], calls: list[CallFact]) -> bool:
    """A drain takes an item each turn and ends when there is none: ``while
    True: try: x = q.get_nowait() except Empty: break`` or ``while q: x =
    q.popleft()``. No wait."""
    for s in inner:
        if s.kind == "try" and any(h.body and h.body[-1].kind in ("break", "return")
                                   for h in s.handlers):
            if any(_takes(calls[i]) for b in walk(s.body) for k, i in b.events if k == "call"):
                return True
    tested = {n.partition(".")[0] for n in w.names}
    return any(_takes(calls[i]) and (calls[i].callee or "").partition(".")[0] in tested
               for b in inner for k, i in b.events if k == "call")


def _takes(c: CallFact) -> bool:
    return (c.callee or "").rpartition(".")[2] in _TAKES


def _counted_exit(body: list[Stmt], steps: set[str]) -> bool:
    """An ``if`` on a stepped local that leaves the loop (``if attempt > n: break``)."""
    return any(s.kind == "if" and steps & set(s.names) and any(
        b and b[-1].kind in ("break", "raise", "return") for b in (s.body, s.orelse))
        for s in body)


def _sleeps(c: CallFact) -> bool:
    return (c.callee or "").rpartition(".")[2] == "sleep"


