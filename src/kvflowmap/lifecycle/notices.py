"""A peer notice that one arm sends and its sibling arm, which only logs, does not.

On the consumer of a P/D pair, the producer keeps a request's KV until the
consumer tells it the request is done with it (a pull-done or release
notice). Every way the consumer finishes with the request owes that
notice, the ways that move nothing too: a full local prefix hit, nothing
left to pull. An ``if`` whose one arm sends the notice for the request and
whose other arm (written out: the author saw the case) only logs, leaves
the producer holding the KV until its timeout, for every request that takes
that arm (tpu-inference 0.31.0's ``process_send_load``: ``else: logger.info(
"skip insert_kv_chunks")`` for a full prefix hit; 0.32.0 sends the notice
there too).

Found by structure: a statement sends a notice when it calls one of the
rule's ``notices`` methods (``send_notif``, ``send_multipart``...), or an
analysed function that does (two calls deep),
passing a request id or a request's record. An ``if`` with such a statement
in one arm, and an explicit other arm whose statements only log (or
``pass``/``continue``), is reported at that arm, unless a notice for the
request was sent earlier in the same statement list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.decisions import LOUD
from kvflowmap.lifecycle.effects import is_logging
from kvflowmap.lifecycle.view import FnView, walk


@dataclass(frozen=True)
class SilentArm:
    """``fqn``'s ``if`` at ``test_line`` sends a notice at ``notice_line`` in
    one arm; its other arm, from ``line``, only logs."""

    fqn: str
    test_line: int
    line: int
    notice_line: int
    test: str


def silent_arms(fn: FnView, sends: Callable[[FnView, Stmt], bool]) -> list[SilentArm]:
    """Every ``if`` of ``fn`` with a notice in one arm and only logging in
    its explicit other arm. ``sends(fn, s)``: the statement itself sends a
    notice naming a request."""
    memo: dict[int, bool] = {}

    def sending(x: Stmt) -> bool:
        if id(x) not in memo:
            memo[id(x)] = sends(fn, x)
        return memo[id(x)]

    out = []
    for body in fn.lists:
        sent = False
        for i, s in enumerate(body):
            later = any(sending(x) for x in body[i + 1:]
                        if x.kind not in ("if", "for", "while", "try", "with", "match"))
            if s.kind == "if" and not sent and s.orelse:
                for arm, other in ((s.body, s.orelse), (s.orelse, s.body)):
                    if len(arm) == 1 and arm[0].kind == "if":
                        continue  # an ``elif``: judged as its own ``if``
                    notice = next((x for x in walk(other) if x.kind not in ("def", "class")
                                   and sending(x)), None)
                    if notice is not None and _silent(fn, arm) and not (later and not _ends(arm)):
                        out.append(SilentArm(fn.fqn, s.line, arm[0].line, notice.line,
                                             s.text or ""))
            sent = sent or (s.kind not in ("if", "for", "while", "try", "with", "match")
                            and sending(s))
    return out


def _silent(fn: FnView, arm: tuple[Stmt, ...]) -> bool:
    """Every statement of the arm is ``pass``/``continue`` or logs below
    warning level: a normal way for the request to go (a warning or an
    error marks a case the author treats as an anomaly: an unknown id)."""
    for s in arm:
        calls = fn.calls(s)
        if s.kind == "continue" or (s.kind == "simple" and not s.events):
            continue  # ``continue``, ``pass``, a docstring
        if s.kind != "simple" or not calls or fn.assigns(s) or fn.containers(s) or not all(
                is_logging(c.callee or "") and (c.callee or "").rpartition(".")[2] not in LOUD
                for c in calls):
            return False
    return True


def _ends(arm: tuple[Stmt, ...]) -> bool:
    """The arm leaves the statement list (what follows the ``if`` is skipped)."""
    return bool(arm) and arm[-1].kind in ("continue", "return", "break", "raise")
