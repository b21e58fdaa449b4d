"""Failed blocks computed into a local and then dropped on some path.

A function that hands a local to a failed-blocks container
(``self._invalid_block_ids.update(missing)``) shows that the local holds the
blocks of failed loads. Each value the local is given (``missing =
record_failed_blocks(...)``) must then be used on every normal path that
follows: put into the container, logged, passed on, returned or tested.
A path that reaches the function's end, or gives the local a new value,
without any of these drops the blocks of that failure: vLLM takes them as
loaded and the request runs on whatever they held. A test of the local
counts as a use: ``elif missing:`` on the way out means it was empty.

Exception edges are not followed: a call raising after the blocks were
computed is the caller's failure to handle (``failed-blocks`` ``branch``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.cfg_paths import path_to, steps
from kvflowmap.lifecycle.view import FnView
from kvflowmap.model.cfg import CFG

# Container methods that put their argument's contents (or it) into the container
_PUTS = frozenset({"update", "add", "extend", "append", "put", "put_nowait"})
# Edges a dropped value is followed along (not implicit exceptions)
_NORMAL = frozenset({"next", "true", "false", "case", "no-match", "break", "continue",
                     "return", "end"})


@dataclass(frozen=True)
class DroppedBlocks:
    """The value ``local`` got at ``line`` in ``fqn`` is dropped at ``lost_line``."""

    fqn: str
    local: str
    attr: str
    line: int
    fill_line: int
    lost_line: int
    steps: tuple[tuple[int, str], ...]


def blocks_locals(fn: FnView, attrs: set[str]) -> dict[str, tuple[str, int]]:
    """Locals ``fn`` puts into one of the failed-blocks ``attrs`` -> (attr, line)."""
    out: dict[str, tuple[str, int]] = {}
    for s in fn.stmts:
        for c in fn.calls(s):
            base, _, meth = (c.callee or "").rpartition(".")
            head, _, attr = base.partition(".")
            if head == "self" and attr in attrs and meth in _PUTS and c.args and \
                    (c.args[0] or "").isidentifier():
                out.setdefault(c.args[0] or "", (attr, c.line))
    return out


def dropped_blocks(fn: FnView, cfg: CFG, attrs: set[str]) -> list[DroppedBlocks]:
    """Values of failed-blocks locals of ``fn`` that some normal path drops."""
    out = []
    for local, (attr, fill_line) in sorted(blocks_locals(fn, attrs).items()):
        for s in fn.stmts:
            if not _computes(fn, s, local):
                continue
            for start in cfg.stmt_nodes(s):
                lost = _drop_path(cfg, start, local)
                if lost is not None:
                    end, path = lost
                    out.append(DroppedBlocks(fn.fqn, local, attr, s.line, fill_line,
                                             cfg.nodes[end].line or fn.fact.end_line,
                                             steps(cfg, path)))
                    break
    return out


def _computes(fn: FnView, s: Stmt, local: str) -> bool:
    """``s`` gives ``local`` a value computed by a call (not an empty start)."""
    return s.kind == "simple" and any(
        a.target == local and not a.aug and (a.value or "").endswith("()")
        for a in fn.assigns(s))


def _uses(stmt: Stmt | None, local: str) -> bool:
    return stmt is not None and local in stmt.names


def _drop_path(cfg: CFG, start: int, local: str) -> tuple[int, list[tuple[int, str]]] | None:
    """(the node where the value is lost, the path there) from ``start``."""
    parent: dict = {}
    seen = {start}
    queue = deque([start])
    while queue:
        n = queue.popleft()
        for d, lab in cfg.successors(n):
            if lab not in _NORMAL:
                continue
            if d == start:  # around a loop: the next value replaces this one
                parent[(d, True)] = ((n, False), lab)
                return d, path_to(parent, (d, True))
            if d in seen:
                continue
            seen.add(d)
            parent[(d, False)] = ((n, False), lab)
            node = cfg.nodes[d]
            if d == cfg.exit:
                return d, path_to(parent, (d, False))
            if node.stmt is not None and node.kind == "stmt" and _uses(node.stmt, local):
                continue
            queue.append(d)
    return None
