"""An entry removed from its container inside the loop over its own parts.

A request whose entry holds several parts (a transfer handle per remote rank,
per layer or per chunk) is done when every part is. A loop over the entry's
parts that removes the entry when one part is done (``for req_id, handles in
transfers.items(): for h in handles: if done(h): done_ids.add(req_id); del
transfers[req_id]``) reports the request while its other parts are still in
flight, and removes it a second time at the next done part: ``KeyError``,
out of the hook that polls. vLLM 0.9.1's NIXL ``_pop_done_transfers`` did
this; 0.9.2 removes the request after the loop, when no part is in progress.

By structure: an outer ``for K, V in C.items()`` (or over ``list(...)`` of it),
an inner ``for`` over ``V`` (or ``C[K]``), and in the inner loop's body a
removal of ``K`` from ``C`` (``del C[K]``, ``C.pop(K...)``) after which that
statement list neither breaks, returns nor raises.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.ids import loop_targets
from kvflowmap.lifecycle.view import FnView, walk

_ITEMS = re.compile(r"(?:list\()?\s*(?P<c>[\w.]+)\.items\(\)\s*\)?")
_LEAVES = frozenset({"break", "return", "raise"})


@dataclass(frozen=True)
class PartRemoval:
    """``fqn`` removes ``key`` from ``container`` at ``line``, inside the loop
    at ``inner_line`` over the parts of the entry the loop at ``outer_line``
    took from it."""

    fqn: str
    line: int
    outer_line: int
    inner_line: int
    container: str
    key: str


def part_removals(fn: FnView) -> list[PartRemoval]:
    """Every removal of the outer loop's key inside a loop over its entry's
    parts that carries on with the next part (see the module docstring)."""
    out: list[PartRemoval] = []
    for outer in walk(fn.fact.body):
        if outer.kind != "for":
            continue
        targets, iterable = loop_targets(outer.text)
        m = _ITEMS.fullmatch(iterable)
        if m is None or len(targets) != 2:
            continue
        container, (key, value) = m.group("c"), targets
        for inner in walk(outer.body):
            if inner.kind != "for" or loop_targets(inner.text)[1] not in (
                    value, f"{container}[{key}]"):
                continue
            for st, rest in _statements(inner.body):
                if any(s.kind in _LEAVES for s in rest):
                    continue
                for op in fn.containers(st):
                    if op.container == container and op.key == key and \
                            op.op in ("delitem", "pop"):
                        out.append(PartRemoval(fn.fqn, op.line, outer.line, inner.line,
                                               container, key))
    return sorted(set(out), key=lambda r: r.line)


def _statements(body: tuple[Stmt, ...]) -> Iterator[tuple[Stmt, tuple[Stmt, ...]]]:
    """Each statement of ``body`` (nested blocks of the inner loop included,
    not nested loops: their own ``break`` ends only them) with the statements
    after it in its own list."""
    for i, s in enumerate(body):
        yield s, body[i + 1:]
        if s.kind in ("for", "while", "def", "class"):
            continue
        for part in (s.body, s.orelse, s.final, *(h.body for h in s.handlers)):
            yield from _statements(part)
