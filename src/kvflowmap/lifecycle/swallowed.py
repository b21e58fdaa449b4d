"""Failures reported as successes: an ``except`` that only logs, after which
the request goes on to the same hand-over as when the work succeeded.

In a function that carries a request id, a handler whose whole body is
logging (or ``pass``) forgets the failure: nothing records it (no flag it
sets, no failure container, no helper told, no status returned, nothing
re-raised), and the code after the ``try`` (its ``finally`` included)
hands the id on as if the transfer had worked. vLLM then reports the load
finished and runs on blocks that were never written, or frees blocks the
peer is still reading. Handlers of exceptions that mean "nothing there"
(``KeyError``, ``queue.Empty``, ``StopIteration``...) are not failures.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.effects import HANDLING, Effects, is_logging
from kvflowmap.lifecycle.ids import loop_targets
from kvflowmap.lifecycle.view import FnView, walk

# Exceptions that say something is absent or over, not that work failed.
BENIGN = frozenset({"KeyError", "IndexError", "Empty", "QueueEmpty", "StopIteration",
                    "StopAsyncIteration", "ImportError", "ModuleNotFoundError",
                    "AttributeError", "CancelledError", "GeneratorExit", "KeyboardInterrupt",
                    "FileNotFoundError", "NotImplementedError", "TypeError", "ValueError",
                    "Again", "ZMQError", "TimeoutError", "Full", "QueueFull"})


@dataclass(frozen=True)
class Swallowed:
    """In ``fqn``, the handler at ``handler_line`` of the ``try`` at
    ``try_line`` only logs; ``handover_line`` hands ``id_name`` on after it."""

    fqn: str
    id_name: str
    try_line: int
    handler_line: int
    handover_line: int


def swallowed(fn: FnView, eff: Effects, ids: set[str], values: set[str]) -> list[Swallowed]:
    """Handlers of ``fn`` that only log while the code after their ``try``
    hands one of ``ids`` on. ``values``: names holding the request's data;
    the ``try`` must do work on one of them (a best-effort notification
    about something else may fail quietly)."""
    out = []
    carriers = values | {(a.value or "").partition(".")[0].removesuffix("[]")
                         for a in fn.all_assigns if a.target in ids}
    for block, then in _blocks(fn.fact.body):
        for i, st in enumerate(block):
            if st.kind != "try" or not works_on(fn, st.body, carriers) or \
                    _succeeds_inside(fn, st.body) or _after_failure(fn, eff, block[:i], ids):
                continue
            after = [*st.final, *block[i + 1:], *then]
            hand = _first_handover(fn, eff, after, ids)
            if hand is None:
                continue
            for h in st.handlers:
                if _only_logs(fn, h) and not benign(h):
                    out.append(Swallowed(fn.fqn, hand[1], st.line, h.line, hand[0]))
    return out


def forgotten(fn: FnView, eff: Effects, ids: set[str], values: set[str]) -> list[Swallowed]:
    """Handlers of ``fn`` (code only a background thread or task runs) that
    only log a failure of work on the request, after which nothing hands any
    of ``ids`` on: the failure is known, with the request, and told to no one.
    No hook sees the exception and no report names the request, so whatever
    waits for it (a pending wait, ``finished_recving``) waits for good (a
    prefill HTTP call that fails on the decode side's sender thread). Each
    has ``handover_line`` 0."""
    out = []
    carriers = values | {(a.value or "").partition(".")[0].removesuffix("[]")
                         for a in fn.all_assigns if a.target in ids}
    repeated = _in_peer_loops(fn.fact.body, ids | carriers)
    for block, then in _blocks(fn.fact.body):
        for i, st in enumerate(block):
            if st.kind != "try" or not works_on(fn, st.body, carriers) or \
                    _succeeds_inside(fn, st.body) or id(st) in repeated:
                continue
            if _first_handover(fn, eff, (*st.final, *block[i + 1:], *then), ids) is not None:
                continue  # handed on after a logged failure: ``swallowed``
            out += [Swallowed(fn.fqn, _named(fn, h, ids | carriers), st.line, h.line, 0)
                    for h in st.handlers
                    if _only_logs(fn, h) and not benign(h) and _logs_request(fn, h, carriers)]
    return out


def _in_peer_loops(body: tuple[Stmt, ...], names: set[str]) -> set[int]:
    """The ``try`` statements (by id) inside a ``for`` loop over something
    other than the request (``for rank in range(n)``): the same request's
    work done for each peer, where one failed delivery is logged and the
    others go on (a broadcast of a failure notice)."""
    out: set[int] = set()
    for s in walk(body):
        if s.kind == "for" and not set(loop_targets(s.text)[0]) & names:
            out |= {id(t) for t in walk(s.body) if t.kind == "try"}
    return out


def _named(fn: FnView, handler: Stmt, names: set[str]) -> str:
    """What the handler's logging names the request by (``task.request_id``),
    for messages."""
    found = [n for s in walk(handler.body) for n in s.names if n.partition(".")[0] in names]
    return max(found, key=len) if found else "the request"


def _logs_request(fn: FnView, handler: Stmt, names: set[str]) -> bool:
    """The handler's logging names the request (its id or data): it knows
    which request failed."""
    return any(n.partition(".")[0] in names for s in walk(handler.body) for n in s.names)


def _blocks(body: tuple[Stmt, ...], then: tuple[Stmt, ...] = ()
            ) -> list[tuple[tuple[Stmt, ...], tuple[Stmt, ...]]]:
    """Every statement list of the function (its body and each nested block,
    not entering nested defs), each with what runs after it ends: the
    enclosing ``finally`` blocks and the statements that follow."""
    out = [(body, then)]
    for j, s in enumerate(body):
        if s.kind in ("def", "class"):
            continue
        rest = (*body[j + 1:], *then)
        for sub in (s.body, s.orelse, *(h.body for h in s.handlers)):
            if sub:
                out += _blocks(sub, (*s.final, *rest))
        if s.final:
            out += _blocks(s.final, rest)
    return out


def _after_failure(fn: FnView, eff: Effects, before: tuple[Stmt, ...], ids: set[str]) -> bool:
    """The ``try`` follows, in a branch that logs an error, a statement that
    already handed the id on: the failure is recorded, and what the ``try``
    does is a best-effort follow-up (telling the peer to free its blocks)."""
    loud = any(is_logging(c.callee or "") and
               (c.callee or "").rpartition(".")[2] in ("error", "exception", "critical")
               for s in before for c in fn.calls(s))
    return loud and _first_handover(fn, eff, before, ids) is not None


def works_on(fn: FnView, body: tuple[Stmt, ...], names: set[str]) -> bool:
    """``body`` does work on the request that can fail: a call that is not
    logging and is given one of ``names`` (its id or data)."""
    return any(not is_logging(c.callee or "") and any(
        (a or "").partition(".")[0].removesuffix("[]") in names
        for a in (*c.args, *(v for _, v in c.kwargs))) for s in walk(body) for c in fn.calls(s))


def _succeeds_inside(fn: FnView, body: tuple[Stmt, ...]) -> bool:
    """The ``try`` leaves on success itself: a ``return`` under a test of
    what its work returned (``ok = client.unpin(...); if ok: return None``).
    Falling out of it, or out of its handler, is then the failure path, and
    what follows is how the function reports the failure, not a success."""
    results: set[str] = set()
    for s in walk(body):
        if s.kind == "simple" and fn.calls(s):
            results.update(a.target for a in fn.assigns(s))  # ``ok, msg =``: one per name
        elif s.kind == "if" and results & set(s.names) and any(
                b.kind == "return" for b in s.body):
            return True
    return False


def _only_logs(fn: FnView, handler: Stmt) -> bool:
    """The handler's body is logging calls and ``pass`` only."""
    for s in walk(handler.body):
        if s.kind != "simple" or fn.assigns(s) or fn.containers(s):
            return False
        if any(not is_logging(c.callee or "") for c in fn.calls(s)):
            return False
        if not fn.calls(s) and s.names:
            return False
    return True


def benign(handler: Stmt) -> bool:
    """A handler only of exceptions that mean absence (``except queue.Empty``)."""
    return handles_only(handler, BENIGN)


def handles_only(handler: Stmt, names: frozenset[str]) -> bool:
    """The ``except`` catches named exceptions, all of them in ``names``
    (by their last dotted part: ``zmq.ContextTerminated``)."""
    caught = [n.rpartition(".")[2] for n in handler.names if n[:1].isupper() or "." in n]
    caught = [n for n in caught if n[:1].isupper()]
    return bool(caught) and all(n in names for n in caught)


def _first_handover(fn: FnView, eff: Effects, stmts, ids: set[str]) -> tuple[int, str] | None:
    """(line, id) of the first statement in ``stmts`` (nested ones included)
    that hands one of ``ids`` on."""
    for s in walk(tuple(stmts)):
        if s.kind in ("def", "class"):
            continue
        if any(e.kind in HANDLING for e in eff.of(fn, s)):
            named = [n for n in s.names if n in ids]
            if named:
                return s.line, named[0]
    return None
