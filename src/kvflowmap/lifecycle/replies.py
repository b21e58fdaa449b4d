"""Replies: a serving loop on a request/reply socket answers every request.

A ZMQ ``REP`` socket alternates strictly: ``recv``, then ``send``, then
``recv`` again. A serving loop that receives a request and then, on some
path, goes back to ``recv`` without sending (an ``except`` that logs a failed
request and carries on, a ``continue`` on a bad message) breaks the
alternation: the next ``recv`` raises, every turn after that fails the same
way, and the peer waiting for its answer (a decoder asking for memory, a
prefiller asking what is cached, a handshake) waits for good. LMCache's
``PDBackend._mem_alloc_loop`` does this; its ``_cache_query_loop`` sends an
empty answer on error, as it must.

Found by structure: the socket is created with ``zmq.REP`` among the
arguments of the call that makes it (``ctx.socket(zmq.REP)``,
``get_zmq_socket(ctx, url, "tcp", zmq.REP, "bind")``), bound to a ``self``
attribute or a local; the loop receives on it and sends on it.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.outcomes import outcomes
from kvflowmap.lifecycle.view import FnView, walk

_REP = re.compile(r"(^|\.)REP$")


@dataclass(frozen=True)
class Unreplied:
    """In ``fqn``, after the ``recv`` at ``recv_line`` on ``socket``, the path
    through ``line`` (an ``except`` handler, or a ``continue``) goes back to
    the loop at ``loop_line`` without sending a reply."""

    fqn: str
    line: int
    loop_line: int
    recv_line: int
    send_line: int
    socket: str
    how: str  # "except" | "skip"


def rep_sockets(fns: dict[str, FnView]) -> dict[tuple[str, str], int]:
    """(class or function FQN, chain) -> line, for every ``self.X`` (keyed by
    the class) or local (keyed by the function) bound to a call given
    ``zmq.REP``."""
    out: dict[tuple[str, str], int] = {}
    for fqn, fn in fns.items():
        for s in fn.stmts:
            rep = any(_REP.search(a or "") for c in fn.calls(s)
                      for a in (*c.args, *(v for _, v in c.kwargs)))
            if not rep:
                continue
            for a in fn.assigns(s):
                if a.target.startswith("self.") and a.target.count(".") == 1 and fn.self_cls:
                    out.setdefault((fn.self_cls, a.target), a.line)
                elif a.target.isidentifier():
                    out.setdefault((fqn, a.target), a.line)
    return out


def unreplied(fn: FnView, reps: dict[tuple[str, str], int],
              recvs: Collection[str] = ("recv", "recv_multipart", "recv_pyobj", "recv_json",
                                        "recv_string"),
              sends: Collection[str] = ("send", "send_multipart", "send_pyobj", "send_json",
                                        "send_string")) -> list[Unreplied]:
    """Paths of ``fn``'s loops that receive a request on a REP socket and go
    back to the loop without replying."""
    out = []
    for loop in walk(fn.fact.body):
        if loop.kind not in ("for", "while"):
            continue
        body = _own(loop.body)
        for sock in sorted(_sockets(fn, body, reps)):
            recv = _first(fn, body, sock, recvs)
            send = _first(fn, body, sock, sends)
            if recv is None or send is None or send.line < recv.line:
                continue
            out += _handlers(fn, loop, body, sock, recv, send, sends)
    return out


def _own(stmts: tuple[Stmt, ...]) -> list[Stmt]:
    """The statements of a loop body, nested ones included, not those of a
    nested loop or def (their own business)."""
    out: list[Stmt] = []
    for s in stmts:
        out.append(s)
        if s.kind in ("for", "while", "def", "class"):
            continue
        for part in (s.body, s.handlers, s.orelse, s.final):
            out += _own(part)
    return out


def _sockets(fn: FnView, body: list[Stmt], reps: dict[tuple[str, str], int]) -> set[str]:
    out = set()
    for s in body:
        for c in fn.calls(s):
            recv = (c.callee or "").rpartition(".")[0]
            if (fn.self_cls, recv) in reps or (fn.fqn, recv) in reps:
                out.add(recv)
    return out


def _calls_on(fn: FnView, s: Stmt, sock: str, names: Collection[str]) -> bool:
    return any((c.callee or "").rpartition(".")[0] == sock
               and (c.callee or "").rpartition(".")[2] in names for c in fn.calls(s))


def _first(fn: FnView, body: list[Stmt], sock: str, names: Collection[str]) -> Stmt | None:
    hits = [s for s in body if s.kind not in ("if", "for", "while", "try", "with")
            and _calls_on(fn, s, sock, names)]
    return min(hits, key=lambda s: s.line) if hits else None


def _handlers(fn: FnView, loop: Stmt, body: list[Stmt], sock: str, recv: Stmt, send: Stmt,
              sends: Collection[str]) -> list[Unreplied]:
    """``except`` handlers of a ``try`` whose body sends the reply, reached
    after the request was received, that neither reply nor leave the loop;
    and the normal paths from the receive back to the loop that skip it."""
    out = []
    for t in body:
        if t.kind != "try":
            continue
        inner = [x.line for x in walk(t.body)]
        if send.line not in inner:
            continue
        for h in t.handlers:
            if "Again" in (h.text or ""):
                continue  # only the receive's own timeout: there is nothing to answer
            hb = list(walk(h.body))
            if any(_calls_on(fn, x, sock, sends) for x in hb):
                continue
            if any(x.kind in ("raise", "return", "break") for x in hb):
                continue
            out.append(Unreplied(fn.fqn, h.line, loop.line, recv.line, send.line, sock,
                                 "except"))
    out += _skipped(fn, loop, sock, recv, send.line, sends)
    return out


def _skipped(fn: FnView, loop: Stmt, sock: str, recv: Stmt, send_line: int,
             sends: Collection[str]) -> list[Unreplied]:
    """Normal paths from the receive (a statement of the loop body, or of a
    ``try`` there) back to the loop head that send nothing on ``sock``: a
    ``continue`` before the reply, or an arm that runs off the end."""
    def replies(s: Stmt) -> bool:
        return _calls_on(fn, s, sock, sends)

    for i, top in enumerate(loop.body):
        if top is recv:
            first, after = list(loop.body[i + 1:]), []
        elif top.kind == "try" and recv in top.body:
            first, after = list(top.body[top.body.index(recv) + 1:]), list(loop.body[i + 1:])
        else:
            continue
        ends: list[int] = []
        falls: list[int] = []
        found = outcomes(first, replies, ends, falls if not after else None)
        if "fall" in found and after:
            found = outcomes(after, replies, ends, falls)
        if "fall" in found:
            ends += falls or [(after or first or [recv])[-1].line]
        return [Unreplied(fn.fqn, line, loop.line, recv.line, send_line, sock, "skip")
                for line in sorted(set(ends))]
    return []
