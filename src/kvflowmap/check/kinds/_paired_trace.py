"""The path search of ``paired``: from an acquisition to an exit that
neither releases nor hands the resource over."""

from __future__ import annotations

import re
from collections import deque
from typing import TYPE_CHECKING

from kvflowmap.check.kinds._paired_model import FAILING, Edge, Resource, State, Trace
from kvflowmap.facts import Stmt

if TYPE_CHECKING:
    from kvflowmap.check.kinds._paired_sites import FunctionSites
    from kvflowmap.model.cfg import CFG

_TEST = re.compile(r"^(not\s+)?([A-Za-z_][\w.]*)$")
_CONST_ASSIGN = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]+)?=\s*(True|False|None)\s*$")


def trace(sites: FunctionSites, r: Resource) -> Trace:
    """Shortest leaking paths (breadth-first) from ``r`` to the normal and to
    the exceptional exit. The state remembers whether an exception happened
    on the way, for ``failed_paths_only``. Exception edges out of the
    acquiring statement itself are not followed: if it raised, nothing was
    acquired. Coming back to the acquisition (a loop) ends a path: the next
    round is a new acquisition. The state also keeps the local collections
    filled since the acquisition (``valid.append(x)``): a later ``if not
    valid`` cannot be true on that path, and the answers of plain-name tests
    (``if accepted:``) until the name is assigned again: a second ``if
    accepted:`` takes the same edge as the first (also the tests the
    acquisition is nested in, ``Resource.held_if``)."""
    cfg, out = sites.cfg, Trace()
    if sites.hands_over(r.node, r):
        stmt = cfg.nodes[r.node].stmt
        assert stmt is not None  # hands_over is False at a node without a statement
        return Trace(returned=stmt.kind == "return")
    if _recorded_before(sites, r):
        return out
    parent: dict[State, tuple[State, str]] = {}
    queue: deque[State] = deque()
    known = frozenset((t, True) for t in r.held_if) | known_at(sites, r.node)
    start: State = (r.node, False, sites.filled(r.node, frozenset()), known)
    for d, lab in cfg.successors(r.node):
        if lab != "exception" and (r.edge is None or lab == r.edge):
            _visit(parent, queue, start, lab, d, start[2], known)
    while queue:
        state = queue.popleft()
        m, failed, filled, known = state
        if m in (cfg.exit, cfg.raise_exit):
            if m == cfg.raise_exit and failed and not _follows_failures(sites, r):
                continue  # a caught failure raised again: not this rule's to follow
            if failed or not sites.spec.failed_paths_only:
                path = _path(parent, start, state)
                if m == cfg.exit:
                    out.normal = out.normal or path
                else:
                    out.exceptional = out.exceptional or path
            continue
        if m == r.node or sites.releases(m, r):
            continue
        if m in r.failure_returns:
            # an ``except`` handler's return: a failure exit that owes the release
            out.exceptional = out.exceptional or _path(parent, start, state)
            continue
        if sites.hands_over(m, r):
            stmt = cfg.nodes[m].stmt
            assert stmt is not None  # hands_over is False at a node without a statement
            out.returned |= stmt.kind == "return"
            continue
        after = sites.filled(m, filled)
        known = _forget(sites, m, known)
        for d, lab in cfg.successors(m):
            if lab in FAILING and not _follows_failures(sites, r) and \
                    not _caught_here(cfg, lab, d):
                continue
            if r.released_on_failure and _not_owed(cfg, r, m, lab, d):
                continue
            if sites.pruned(m, lab, r.handles | after):
                continue
            taken = _outcome(cfg.nodes[m].stmt, lab)
            if taken is not None and (taken[0], not taken[1]) in known:
                continue  # the same test answered the other way earlier on this path
            now = known | {taken} if taken is not None and "." not in taken[0] else known
            _visit(parent, queue, state, lab, d, after, now)
    return out


def _follows_failures(sites: FunctionSites, r: Resource) -> bool:
    return sites.spec.follow_failures or r.held_on_entry


def _caught_here(cfg: CFG, label: str, dst: int) -> bool:
    """A call's exception that an ``except`` of this function catches: the
    function takes that way on purpose and goes on (it returns, or falls
    out of the ``try``), so what it holds is owed there as on any return."""
    stmt = cfg.nodes[dst].stmt
    return label == "exception" and stmt is not None and stmt.kind == "except"


def _not_owed(cfg: CFG, r: Resource, node: int, label: str, dst: int) -> bool:
    """For what is released before a failure exit: the function's own raises
    and asserts owe it (a call's exception only on its way into an ``except``,
    which may raise again or return), except raises that say it is missing."""
    if label == "exception":
        stmt = cfg.nodes[dst].stmt
        return stmt is None or stmt.kind != "except"
    return label in ("raise", "assert") and node in r.owes_nothing


def _outcome(stmt: Stmt | None, label: str) -> tuple[str, bool] | None:
    """(tested name, its truth) on an edge out of ``if name`` / ``if not
    name`` (``while`` too); the false edge of a test that ends a block carries
    the label of the way out it falls into."""
    if stmt is None or stmt.kind not in ("if", "while") or label == "exception":
        return None
    m = _TEST.match((stmt.text or "").strip())
    if m is None:
        return None
    return m.group(2), (label == "true") != bool(m.group(1))


def _forget(sites: FunctionSites, node: int, known: frozenset[tuple[str, bool]]
            ) -> frozenset[tuple[str, bool]]:
    """``known`` after ``node``: without the names it may change (those it
    assigns, and any plain name it uses other than as a test: ``items.pop()``,
    ``fill(items)`` change what ``if items:`` answers), plus the name it
    binds to a constant (``used_direct = True``)."""
    stmt = sites.cfg.nodes[node].stmt
    if stmt is None or stmt.kind in ("if", "while"):
        return known
    targets = {sites.ff.assigns[i].target for i in sites.events(stmt, "assign")}
    targets |= {n for n in stmt.names if "." not in n}
    if stmt.kind == "for":
        targets |= {t.strip(" ()") for t in (stmt.text or "").partition(" in ")[0].split(",")}
    out = frozenset(k for k in known if k[0] not in targets) if targets else known
    const = _CONST_ASSIGN.match(sites.text(stmt)) if stmt.kind == "simple" else None
    return out | {(const.group(1), const.group(2) == "True")} if const else out


def known_at(sites: FunctionSites, node: int) -> frozenset[tuple[str, bool]]:
    """(name, truth) pairs that hold on every path from the entry to
    ``node``: names bound to ``True``/``False``/``None`` and plain-name tests,
    as ``_forget`` and ``_outcome`` follow them (a must-analysis to a fixed
    point; memoised per function)."""
    memo = sites.memo.setdefault("known_at", {})
    if not memo:
        memo.update(_must_known(sites))
    return memo.get(node, frozenset())


def _must_known(sites: FunctionSites) -> dict[int, frozenset[tuple[str, bool]]]:
    cfg = sites.cfg
    state: dict[int, frozenset[tuple[str, bool]]] = {cfg.entry: frozenset()}
    work = deque([cfg.entry])
    while work:
        m = work.popleft()
        after = _forget(sites, m, state[m])
        for d, lab in cfg.successors(m):
            taken = _outcome(cfg.nodes[m].stmt, lab)
            if taken is not None and (taken[0], not taken[1]) in after:
                continue  # the edge cannot be taken
            now = after | {taken} if taken is not None and "." not in taken[0] else after
            new = now if d not in state else state[d] & now
            if d not in state or new != state[d]:
                state[d] = new
                work.append(d)
    return state


def _recorded_before(sites: FunctionSites, r: Resource) -> bool:
    """Record-then-pin: every path from the entry to the acquisition first
    stores the resource's names into an owner (``self._jobs[j] = ids`` then
    ``pool.touch(ids)``), so the owner already holds it. Only for resources
    known by name: a nameless one would match any earlier store."""
    if not r.handles:
        return False
    cfg = sites.cfg
    return r.node not in cfg.reached(cfg.entry, lambda m: sites.hands_over(m, r))


def _visit(parent: dict[State, tuple[State, str]], queue: deque[State], state: State,
           label: str, dst: int, filled: frozenset[str],
           known: frozenset[tuple[str, bool]]) -> None:
    nxt = (dst, state[1] or label in FAILING, filled, known)
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
