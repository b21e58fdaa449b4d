"""A commit hook that records a load without asking whether it was chosen.

vLLM calls the commit hook (``update_state_after_alloc(request, blocks,
num_external_tokens)``) with a count of external tokens, and the count is 0
when this connector is not to load the request: ``MultiConnector`` calls every
connector but the one it chose with 0, the scheduler calls it with 0 when the
probe found nothing, and calls it again with 0 after an async load, for the
blocks the request gets next. A commit hook that records a load for the
request (a pending receive, a tracker moved to "waiting for load", a wait for
a peer's transfer) and never reads the count loads into blocks vLLM fills
itself, or holds what the probe locked for a load that never comes (vLLM
0.29.0's ``LMCacheMPConnectorUpstream``: the tracker went to WAITING_FOR_LOAD
and kept the lookup locks; 0.30.0 tests ``num_external_tokens > 0``).

By structure: the count is the commit hook's parameter at the protocol's
position; it is followed into the analysed functions the hook passes it to
(by position or keyword). It counts as read when a statement uses it other
than by handing it to a log call or to an analysed function (whose own
parameter is then followed). The hook and every analysed function it runs
(three calls deep) are searched for statements that keep the request id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kvflowmap.facts import CallFact
from kvflowmap.lifecycle.effects import is_logging
from kvflowmap.lifecycle.view import FnView, bound_args

_DEPTH = 3


@dataclass(frozen=True)
class Unchosen:
    """The commit hook never reads its count of external tokens (``count``)
    and ``record`` keeps the request at ``line``. ``holder`` is the last
    function that had the count, and ``drop_line`` its def line."""

    count: str
    holder: str
    drop_line: int
    record: str
    line: int


def unchosen(commit: FnView, index: int,
             callees: Callable[[FnView, CallFact], list[FnView]],
             records: Callable[[FnView], set[int]]) -> Unchosen | None:
    """The load ``commit`` records without reading its count (parameter
    ``index``, ``self`` included), or None when it reads it or records
    nothing (see the module docstring)."""
    start = count_param(commit, index)
    todo: list[tuple[FnView, str, int]] = [(commit, start, 0)]
    seen: set[str] = set()
    holder, drop = commit.fqn, commit.fact.line
    first: tuple[str, int] | None = None
    while todo:
        fn, count, depth = todo.pop(0)
        if fn.fqn in seen:
            continue
        seen.add(fn.fqn)
        if count:
            holder, drop = fn.fqn, fn.fact.line
        lines = sorted(records(fn))
        if lines and first is None:
            first = (fn.fqn, lines[0])
        for s in fn.stmts:
            passing = [c for c in fn.calls(s)
                       if count and _passes(c, count) and not is_logging(c.callee or "")]
            handed = s.kind in ("simple", "return") and any(
                _passes(c, count) for c in fn.calls(s))
            if count and count in s.names and not handed:
                return None  # tested, computed with or stored: read
            if depth >= _DEPTH:
                continue
            for c in fn.calls(s):
                targets = callees(fn, c)
                if c in passing and not targets:
                    return None  # handed to code outside the analysis: taken as read
                for t in targets:
                    todo.append((t, _bound(c, t, count) if c in passing else "", depth + 1))
    if first is None:
        return None
    return Unchosen(start, holder, drop, first[0], first[1])


def count_param(fn: FnView, index: int) -> str:
    """The name of ``fn``'s positional parameter ``index`` (``self``
    included); empty when it has none there."""
    ps = [p for p in fn.fact.params if p.kind in ("posonly", "pos")]
    return ps[index].name if index < len(ps) else ""


def _passes(c: CallFact, name: str) -> bool:
    return name in c.args or any(v == name for _, v in c.kwargs)


def _bound(c: CallFact, target: FnView, name: str) -> str:
    """The parameter of ``target`` that call ``c`` binds ``name`` to."""
    return next((p for a, p in bound_args(target.fact, c) if a == name), "")
