"""The path search of ``paired``: from an acquisition to an exit that
neither releases nor hands the resource over."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from kvflowmap.check.kinds._paired_model import FAILING, Edge, Resource, State, Trace

if TYPE_CHECKING:
    from kvflowmap.check.kinds._paired_sites import FunctionSites


def trace(sites: FunctionSites, r: Resource) -> Trace:
    """Shortest leaking paths (breadth-first) from ``r`` to the normal and to
    the exceptional exit. The state remembers whether an exception happened
    on the way, for ``failed_paths_only``. Exception edges out of the
    acquiring statement itself are not followed: if it raised, nothing was
    acquired. Coming back to the acquisition (a loop) ends a path: the next
    round is a new acquisition. The state also keeps the local collections
    filled since the acquisition (``valid.append(x)``): a later ``if not
    valid`` cannot be true on that path."""
    cfg, out = sites.cfg, Trace()
    if sites.hands_over(r.node, r):
        stmt = cfg.nodes[r.node].stmt
        assert stmt is not None  # hands_over is False at a node without a statement
        return Trace(returned=stmt.kind == "return")
    if _recorded_before(sites, r):
        return out
    parent: dict[State, tuple[State, str]] = {}
    queue: deque[State] = deque()
    start: State = (r.node, False, sites.filled(r.node, frozenset()))
    for d, lab in cfg.successors(r.node):
        if lab != "exception" and (r.edge is None or lab == r.edge):
            _visit(parent, queue, start, lab, d, start[2])
    while queue:
        state = queue.popleft()
        m, failed, filled = state
        if m in (cfg.exit, cfg.raise_exit):
            if failed or not sites.spec.failed_paths_only:
                path = _path(parent, start, state)
                if m == cfg.exit:
                    out.normal = out.normal or path
                else:
                    out.exceptional = out.exceptional or path
            continue
        if m == r.node or sites.releases(m, r):
            continue
        if sites.hands_over(m, r):
            stmt = cfg.nodes[m].stmt
            assert stmt is not None  # hands_over is False at a node without a statement
            out.returned |= stmt.kind == "return"
            continue
        after = sites.filled(m, filled)
        for d, lab in cfg.successors(m):
            if not sites.pruned(m, lab, r.handles | after):
                _visit(parent, queue, state, lab, d, after)
    return out


def _recorded_before(sites: FunctionSites, r: Resource) -> bool:
    """Record-then-pin: every path from the entry to the acquisition first
    stores the resource's names into an owner (``self._jobs[j] = ids`` then
    ``pool.touch(ids)``), so the owner already holds it. Only for resources
    known by name: a nameless one would match any earlier store."""
    if not r.handles:
        return False
    cfg = sites.cfg
    seen, queue = {cfg.entry}, deque([cfg.entry])
    while queue:
        m = queue.popleft()
        if m == r.node:
            return False
        if m != cfg.entry and sites.hands_over(m, r):
            continue
        for d, _ in cfg.successors(m):
            if d not in seen:
                seen.add(d)
                queue.append(d)
    return True


def _visit(parent: dict[State, tuple[State, str]], queue: deque[State], state: State,
           label: str, dst: int, filled: frozenset[str]) -> None:
    nxt = (dst, state[1] or label in FAILING, filled)
    if nxt not in parent:
        parent[nxt] = (state, label)
        queue.append(nxt)


def _path(parent: dict[State, tuple[State, str]], start: State, end: State) -> list[Edge]:
    edges: list[Edge] = []
    state = end
    while True:
        src, lab = parent[state]
        edges.append((src[0], lab, state[0]))
        state = src
        if state == start:
            return edges[::-1]
