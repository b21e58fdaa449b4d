"""Reported ids leave the container they were pending in.

A report function walks a container of pending requests (``for rid, fut in
self._futures.items()``, ``while self._reqs: rid, t = next(iter(...))``) and
adds the ids that are done to the collection it returns. Each reported id
must leave that container on the way to the return: taken out (``pop``,
``del``, ``discard``), or the container reset. One left behind is reported
again on every later call (vLLM frees a request's blocks twice, or counts a
finished load for a request that is long gone), and a ``while`` over the
container never ends.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

from kvflowmap.model.cfg import CFG
from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.cfg_paths import first_nodes, region
from kvflowmap.lifecycle.effects import Effects
from kvflowmap.lifecycle.ids import COLLECT, loop_targets, unwrap
from kvflowmap.lifecycle.view import FnView, walk

_WHILE = re.compile(r"(?:len\()?self\.(\w+)\)?(?:\s*>\s*0)?")


@dataclass(frozen=True)
class StillPending:
    """``fqn`` reports ``id_name`` (walked from ``self.<attr>``) at ``line``
    and can return without taking it out."""

    fqn: str
    attr: str
    id_name: str
    loop_line: int
    report_line: int
    return_line: int


def still_pending(fn: FnView, eff: Effects, cfg: CFG) -> list[StillPending]:
    """Every loop of ``fn`` over a ``self`` container whose reported ids can
    reach a ``return`` of the reported collection with no removal from (or
    reset of) that container on the way."""
    returned = returned_names(fn)
    if not returned:
        return []
    out = []
    for loop in walk(fn.fact.body):
        walked = walked_container(fn, loop)
        if walked is None:
            continue
        attr, rid = walked
        reports = sorted(n for n in region(cfg, loop) if cfg.nodes[n].kind == "stmt"
                         and (st := cfg.nodes[n].stmt) and reported_into(fn, st, rid, returned)
                         and not _marked(fn, loop, st, attr))
        if not reports:
            continue
        clears = {n.id for n in cfg.nodes if n.stmt is not None and (
            (n.kind == "stmt" and _takes_out(fn, eff, n.stmt, attr)) or
            (n.kind == "loop" and _clearing_loop(fn, eff, n.stmt, attr, returned)))}
        heads = [n.id for n in cfg.nodes if n.stmt is loop and n.kind in ("loop", "stmt")]
        starts = [d for h in heads for d in first_nodes(cfg, h, loop)]
        end = _returns_without(cfg, starts, set(reports), clears, returned)
        if end is not None:
            out.append(StillPending(fn.fqn, attr, rid, loop.line,
                                    cfg.nodes[reports[0]].line, end))
    return out


def walked_container(fn: FnView, loop: Stmt) -> tuple[str, str] | None:
    """(attribute, id name) for ``for rid in self.X`` (``.items()``, wrappers)
    and for ``while self.X:`` whose body first binds ``rid`` from ``self.X``
    (``rid, t = next(iter(self.X.items()))``)."""
    if loop.kind == "for":
        targets, iterable = loop_targets(loop.text)
        base = unwrap(iterable)
        if targets and base.startswith("self.") and base.count(".") == 1:
            return base[5:], targets[0]
    m = _WHILE.fullmatch((loop.text or "").strip()) if loop.kind == "while" else None
    if m:
        for s in loop.body:
            assigns = fn.assigns(s)
            if assigns and f"self.{m.group(1)}" in s.names:
                return m.group(1), assigns[0].target
    return None


def returned_names(fn: FnView, values: list[str] | None = None) -> set[str]:
    """Local names the function returns, alone, in a tuple, or through what it
    computes from them (``ret = self._process(done); return ret``); with
    ``values``, those flowing into these returned texts only."""
    out: set[str] = set()
    for v in (values if values is not None else [r.value or "" for r in fn.all_returns]):
        out.update(re.findall(r"[A-Za-z_]\w*", v))
    locals_ = {a.target for a in fn.all_assigns} | set(fn.param_names)
    out &= locals_
    changed = True
    while changed:
        changed = False
        for st in fn.stmts:
            if any(a.target in out for a in fn.assigns(st)):
                new = {n for n in st.names if n in locals_} - out
                if new:
                    out |= new
                    changed = True
    return out - {"self"}


def reported_into(fn: FnView, s: Stmt, rid: str, returned: set[str]) -> str | None:
    """The returned local ``s`` adds ``rid`` to (``done.add(rid)``), if any."""
    return next((op.container for op in fn.containers(s) if op.container in returned
                 and op.op in COLLECT and op.key == rid), None)


def _marked(fn: FnView, loop: Stmt, report: Stmt, attr: str) -> bool:
    """The report sits under a test that reads the id's entry in
    ``self.<attr>`` (or a local taken from it), and that test's body writes
    into the entry: ``if self._x[rid][1] is None: ...; self._x[rid][1] = kv;
    done.add(rid)``. The entry is marked reported and the test keeps it from
    being reported again: it may stay."""
    entry = {a.target for s in walk(loop.body) for a in fn.assigns(s)
             if a.value and a.value.startswith(f"self.{attr}[")}
    for s in _around(loop.body, report):
        if s.kind != "if":
            continue
        body = list(walk(s.body))
        if f"self.{attr}" in s.names and any(
                op.container.startswith(f"self.{attr}[") for x in body
                for op in fn.containers(x)):
            return True
        if entry & set(s.names) and any(
                a.target.partition(".")[0] in entry and "." in a.target
                for x in body for a in fn.assigns(x)):
            return True
    return False


def _around(body: tuple[Stmt, ...], target: Stmt) -> list[Stmt]:
    """The compound statements of ``body`` that hold ``target``, outermost first."""
    for s in body:
        for part in (s.body, s.orelse, s.final, *(h.body for h in s.handlers)):
            if any(x is target for x in walk(part)):
                return [s, *_around(part, target)]
    return []


def _takes_out(fn: FnView, eff: Effects, s: Stmt, attr: str) -> bool:
    """The statement removes from, resets or rebinds ``self.<attr>``."""
    if any(e.kind in ("remove", "reset") and e.container is not None and e.container.attr == attr
           for e in eff.of(fn, s)):
        return True
    if any(op.container == f"self.{attr}" for op in fn.containers(s)
           if op.op not in COLLECT):
        return True
    return any(a.target == f"self.{attr}" for a in fn.assigns(s))


def _clearing_loop(fn: FnView, eff: Effects, loop: Stmt, attr: str, returned: set[str]) -> bool:
    """``for rid in done: self.<attr>.pop(rid)``: a walk of the reported
    collection that takes each id out (it runs for every reported id)."""
    _, iterable = loop_targets(loop.text)
    return unwrap(iterable) in returned and any(
        _takes_out(fn, eff, s, attr) for s in walk(loop.body))


def _returns_without(cfg: CFG, starts: list[int], reports: set[int], clears: set[int],
                     returned: set[str]) -> int | None:
    """The line of a ``return`` of a reported collection that a path from
    ``starts`` reaches through a node of ``reports`` without passing a node
    of ``clears``; None if there is none."""
    state = [(n, n in reports) for n in starts if n not in clears]
    seen = set(state)
    queue = deque(state)
    while queue:
        n, reported = queue.popleft()
        for d, lab in cfg.successors(n):
            if lab == "exception" or d in clears or d == cfg.raise_exit:
                continue
            st = cfg.nodes[d].stmt
            if reported and st is not None and st.kind == "return" and any(
                    name in returned for name in re.findall(r"\w+", st.text or "")):
                return cfg.nodes[d].line
            nxt = (d, reported or d in reports)
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return None
