"""Walking a function's control-flow graph for the lifecycle passes: regions
(a loop body), backward reachability, the path a search found, and the
``(line, note)`` steps a finding shows."""

from __future__ import annotations

from collections import deque

from kvflowmap.model.cfg import CFG
from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.view import FnView, walk


def first_nodes(cfg: CFG, start: int, loop: Stmt | None) -> list[int]:
    """Where a binding's region starts: the loop body, or the function's first node."""
    if loop is None:
        return [d for d, _ in cfg.successors(start)]
    return [d for d, lab in cfg.successors(start) if lab in ("true", "next")]


def in_flight(cfg: CFG, exc: bool, label: str, dst: int) -> bool:
    """Whether an exception is still on its way out on arriving at ``dst``:
    raised now or before, and not caught by an ``except`` there."""
    stmt = cfg.nodes[dst].stmt
    if stmt is None:  # an exit node
        return exc
    return (exc or label in ("exception", "raise", "assert")) and stmt.kind != "except"


def region(cfg: CFG, loop: Stmt | None) -> set[int]:
    if loop is None:
        return {n.id for n in cfg.nodes}
    body = {id(s) for s in walk(loop.body)}
    return {n.id for n in cfg.nodes if n.stmt is not None and id(n.stmt) in body}


def can_handle(cfg: CFG, inside: set[int], handles: set[int], start: int) -> set[int]:
    """Nodes from which a handling node is reachable without leaving the region."""
    return reaching(cfg, {h for h in handles if h in inside}, inside - {start})


def reaching(cfg: CFG, targets: set[int], within: set[int] | None = None) -> set[int]:
    """``targets`` and the nodes (inside ``within``, when given) from which
    one of them is reachable, going back along edges inside ``within``."""
    pred: dict[int, list[int]] = {}
    for a, b, _ in cfg.edges():
        pred.setdefault(b, []).append(a)
    seen, queue = set(targets), deque(targets)
    while queue:
        n = queue.popleft()
        for p in pred.get(n, ()):
            if p not in seen and (within is None or p in within):
                seen.add(p)
                queue.append(p)
    return seen


def path_to(parent: dict, end: tuple[int, int]) -> list[tuple[int, str]]:
    """(node, label of the edge taken out of it) from the first node to ``end``."""
    out: list[tuple[int, str]] = [(end[0], "")]
    cur = parent.get(end)
    while cur is not None:
        out.append((cur[0][0], cur[1]))
        cur = parent.get(cur[0])
    return out[::-1]


def bound_line(cfg: CFG, start: int, fn: FnView) -> int:
    return cfg.nodes[start].line or fn.fact.line


def last_line(cfg: CFG, nodes: list[int]) -> int:
    lines = [cfg.nodes[n].line for n in nodes if cfg.nodes[n].line]
    return lines[-1] if lines else 0


def first_handling(cfg: CFG, start: int, handles: set[int]) -> int:
    """The line of the nearest handling node from ``start``."""
    seen, queue = {start}, deque([start])
    while queue:
        n = queue.popleft()
        if n in handles:
            return cfg.nodes[n].line
        for d, _ in cfg.successors(n):
            if d not in seen:
                seen.add(d)
                queue.append(d)
    return cfg.nodes[start].line


def steps(cfg: CFG, path: list[tuple[int, str]]) -> tuple[tuple[int, str], ...]:
    out = []
    for n, lab in path:
        node = cfg.nodes[n]
        if node.stmt is None or not node.line:
            continue
        what = {"true": "taken", "false": "not taken", "exception": "raises"}.get(lab, "")
        text = f"{node.stmt.kind} {what}".strip()
        out.append((node.line, text))
    return tuple(out)
