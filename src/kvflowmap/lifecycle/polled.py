"""Polled transfers: a completion seen must be acted on.

A report function polls what is in flight per request: it walks a
request-keyed container of futures or transfer handles and asks each one
whether it is done (``if not fut.query(): continue``, ``if
handle.done():``). Once a transfer is seen done, the request must go
somewhere on every path: reported (added to what the function returns),
taken out of the container, or handed on. A path that only logs (``if not
result: logger.error(...)`` where the report was forgotten) leaves the
request in the container: it is polled again every step, seen done again,
and never reported, so vLLM waits for it forever.

Found by structure: the walked container is request-keyed (the lifecycle
model's containers), the completion test calls a method named in the
protocol's ``lifecycle.done_tests`` on something of the entry (or a local
bound to that call), and a statement acts on the request when it mentions
the walked id and adds it to a collection, removes, stores, returns or hands
it on, or passes it to a call that is not logging.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass

from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.effects import HANDLING, Effects, is_logging
from kvflowmap.lifecycle.outcomes import outcomes
from kvflowmap.lifecycle.pending import walked_container
from kvflowmap.lifecycle.view import FnView, walk

_CALL_TEST = re.compile(r"^(not\s+)?[\w.\[\]]+\.(\w+)\(\)$")
_NAME_TEST = re.compile(r"^(not\s+)?(\w+)$")


@dataclass(frozen=True)
class Unacted:
    """In ``fqn``, the loop at ``loop_line`` walks ``self.<attr>`` by
    ``rid``; after the completion test at ``test_line`` a path ends at
    ``line`` without acting on the request."""

    fqn: str
    line: int
    loop_line: int
    test_line: int
    attr: str
    rid: str
    test: str


def unacted(fn: FnView, eff: Effects, keyed: Collection[str],
            done_tests: Collection[str]) -> list[Unacted]:
    """Paths of ``fn``'s loops over request-keyed ``self`` containers
    (attribute names in ``keyed``) that see a transfer done and then neither
    report, remove nor hand on its request."""
    out = []
    for loop in walk(fn.fact.body):
        if loop.kind not in ("for", "while"):
            continue
        walked = walked_container(fn, loop)
        if walked is None or walked[0] not in keyed:
            continue
        attr, rid = walked
        found = _done_region(fn, loop.body, done_tests)
        if found is None:
            continue
        test, region = found
        acts = _acts(fn, eff, rid)
        ends: list[int] = []
        falls: list[int] = []
        if "fall" in outcomes(region, acts, ends, falls):
            ends += falls or [loop.body[-1].line if loop.body else loop.line]
        if ends:
            out.append(Unacted(fn.fqn, min(ends), loop.line, test.line, attr, rid,
                               (test.text or "").strip()))
    return out


def _done_region(fn: FnView, body: tuple[Stmt, ...], done_tests: Collection[str]
                 ) -> tuple[Stmt, list[Stmt]] | None:
    """The completion test among the loop's top-level statements and what
    runs once it says done: the statements after ``if not x.done():
    continue``, or the body of ``if x.done():``."""
    bound: set[str] = set()  # locals bound to a completion call (``ready = h.is_ready()``)
    for i, s in enumerate(body):
        for a in fn.assigns(s):
            m = _CALL_TEST.match((a.value or "").strip())
            if m and not m.group(1) and m.group(2) in done_tests and a.target.isidentifier():
                bound.add(a.target)
        if s.kind != "if":
            continue
        text = (s.text or "").strip()
        m = _CALL_TEST.match(text)
        n = _NAME_TEST.match(text)
        if not ((m and m.group(2) in done_tests) or (n and n.group(2) in bound)):
            continue
        negated = bool((m or n).group(1))  # type: ignore[union-attr]
        if negated and [b.kind for b in s.body] == ["continue"] and not s.orelse:
            return s, list(body[i + 1:])
        if not negated:
            return s, [*s.body, *body[i + 1:]] if not s.orelse else list(s.body)
    return None


def _acts(fn: FnView, eff: Effects, rid: str) -> Callable[[Stmt], bool]:
    """Whether a simple statement acts on request ``rid``."""
    def acts(s: Stmt) -> bool:
        if rid not in s.names and not any(n.startswith(rid + ".") for n in s.names):
            return False
        if any(e.kind in HANDLING or e.kind == "remove" for e in eff.of(fn, s)):
            return True
        if fn.containers(s):
            return True  # ``done.append(rid)``, ``del self._x[rid]``
        return any(not is_logging(c.callee or "") and rid in (*c.args, *(v for _, v in c.kwargs))
                   for c in fn.calls(s))
    return acts
