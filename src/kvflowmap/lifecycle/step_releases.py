"""Step releases: a hook that releases something per request of the step on
its way out owes that release on its early exits too.

``for request in metadata.requests: engine.lookup_unpin(request.req_id)``
in ``wait_for_save`` releases, for every request of the step, what another
hook (the scheduler's lookup) took for it: a pin, a lease, a lock on the
server. An early ``return`` before that loop (``if self.kv_role ==
"kv_consumer": return``, LMCache 0.4.2; fixed in 0.4.3) skips the release
for every request of every step that takes it, and the pinned chunks leak
until the cache fills.

A release is a call matching the protocol's ``lifecycle.releases`` patterns
whose argument is a request id taken from the loop's element, on every turn
of the loop (before anything that can skip the rest of the turn): the loop
releases every request of the step it walks. A top-level call given a whole
collection of ids (``lookup_unpin(metadata.lookup_requests_in_step)``, LMCache
0.3.3; fixed in 0.3.4) releases them all at once and counts the same way. An early exit is a ``return``
reached from the entry without passing the head of such a loop. A
``return`` under a test that reads the walked collection (``if not
metadata.requests: return``: nothing to release) or the release's receiver
(``if self.engine is None: return``: nothing to release with) is no skip; a
return inside the loop is the loop's business.
"""

from __future__ import annotations

import fnmatch
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass

from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.containers import resets
from kvflowmap.lifecycle.ids import IdState, loop_targets
from kvflowmap.lifecycle.view import FnView, mentions, walk
from kvflowmap.model.cfg import CFG


@dataclass(frozen=True)
class SkippedRelease:
    """``fqn`` returns at ``line`` before the loop at ``loop_line`` that
    releases ``call`` (at ``release_line``) for each request it walks; or,
    with ``handed`` set, before it hands the step's ids gathered in
    ``walked`` to ``handed`` (at ``loop_line``) and empties it (at
    ``release_line``)."""

    fqn: str
    line: int
    loop_line: int
    release_line: int
    call: str
    walked: str
    handed: str = ""


def step_handoffs(fn: FnView, state: IdState) -> list[tuple[Stmt, Stmt, str, str]]:
    """``(hand-off, reset, attr, target)`` per request-keyed ``self``
    collection ``fn`` hands over and empties at its top level, a step's
    gatherings passed on once per call (``meta.lookup_ids = self._lookups``
    then ``self._lookups = []``)."""
    out = []
    top = fn.fact.body
    for i, s in enumerate(top):
        for a in fn.assigns(s) if s.kind == "simple" else ():
            attr = (a.value or "")
            if not attr.startswith("self.") or attr.count(".") != 1 or \
                    attr[5:] not in state.keyed_attrs or a.target.startswith("self."):
                continue
            reset = next((r for r in top[i + 1:]
                          if any(f"self.{x}" == attr for x, _ in resets(fn, r))), None)
            if reset is not None and "." in a.target:
                out.append((s, reset, attr, a.target))
    return out


def release_loops(fn: FnView, state: IdState, releases: Collection[str]
                  ) -> list[tuple[Stmt, Stmt, str, str]]:
    """``(head, statement, callee, walked)`` per ``for`` loop of ``fn`` whose
    body releases, with a request id of the loop's element, something matching
    ``releases`` (``walked``: what the loop walks); and per top-level
    statement that releases a whole collection of ids at once
    (``engine.lookup_unpin(metadata.lookup_requests_in_step)``, the statement
    its own head, ``walked`` the collection)."""
    out = []
    ids = state.of(fn.fqn)
    for s in fn.stmts:
        if s.kind != "for":
            continue
        targets, iterable = loop_targets(s.text)
        if not targets or not iterable:
            continue
        for t in _every_turn(s.body):
            for c in fn.calls(t):
                if not _releases(c.callee, releases):
                    continue
                args = (*c.args, *(v for _, v in c.kwargs))
                if any(a and a.split(".")[0].split("[")[0] in targets and state.is_id(fn, a)
                       for a in args):
                    out.append((s, t, c.callee or "", iterable))
                    break
            else:
                continue
            break
    for s in fn.fact.body:
        if s.kind != "simple":
            continue
        for c in fn.calls(s):
            batch = [a for a in (*c.args, *(v for _, v in c.kwargs)) if a and "." in a and (
                a in ids.colls or a.rpartition(".")[2] in state.keyed_attrs)]
            if _releases(c.callee, releases) and batch:
                out.append((s, s, c.callee or "", batch[0]))
    return out


def _releases(callee: str | None, releases: Collection[str]) -> bool:
    name = (callee or "").rpartition(".")[2]
    return any(fnmatch.fnmatch(name, p) for p in releases)


def _every_turn(body: tuple[Stmt, ...]) -> list[Stmt]:
    """The statements of a loop body that run on every turn: its top level,
    up to the first one that can skip the rest (``continue``, ``break``,
    ``return``, or a branch holding one)."""
    out = []
    for s in body:
        if s.kind in ("continue", "break", "return", "raise"):
            break
        out.append(s)
        if any(x.kind in ("continue", "break", "return") for x in walk((s,))):
            break
    return out


def skipped_releases(fqn: str, fn: FnView, cfg: CFG, state: IdState,
                     releases: Collection[str]) -> list[SkippedRelease]:
    """The early returns of ``fn`` that skip every loop releasing per
    request, and those that skip a hand-over of the step's gathered ids."""
    out = []
    for give, reset, attr, target in step_handoffs(fn, state):
        heads = set(cfg.stmt_nodes(give)) | set(cfg.stmt_nodes(reset))
        out += [SkippedRelease(fqn, line, give.line, reset.line, "", attr, target)
                for line in _early_returns(fn, cfg, heads, set(), [attr], [])]
    loops = release_loops(fn, state, releases)
    if not loops:
        return sorted(set(out), key=lambda x: x.line)
    heads = {n for loop, _, _, _ in loops for n in cfg.stmt_nodes(loop)}
    inside = {id(x) for loop, _, _, _ in loops for x in walk(loop.body)}
    walked = [w for _, _, _, w in loops]
    loop, stmt, callee, _ = loops[0]
    out += [SkippedRelease(fqn, line, loop.line, stmt.line, callee, walked[0])
            for line in _early_returns(fn, cfg, heads, inside, walked,
                                       [c.rpartition(".")[0] for _, _, c, _ in loops])]
    return sorted(set(out), key=lambda x: x.line)


def _early_returns(fn: FnView, cfg: CFG, heads: set[int], inside: set[int],
                   walked: list[str], receivers: list[str]) -> list[int]:
    """Lines of the ``return``s reached from the entry without passing
    ``heads``, outside the statements ``inside``, and not under a test of a
    ``walked`` collection or a ``receivers`` object (nothing to release)."""
    guarded = _guards(fn.fact.body, ())
    seen, queue = {cfg.entry}, deque([cfg.entry])
    out = []
    while queue:
        n = queue.popleft()
        node = cfg.nodes[n]
        st = node.stmt
        if st is not None and node.kind == "stmt" and st.kind == "return" and \
                id(st) not in inside and not _about(guarded.get(id(st), ()), walked) and \
                not _about(guarded.get(id(st), ()), receivers):
            out.append(st.line)
        for d, lab in cfg.successors(n):
            if lab in ("exception", "raise", "assert") or d in heads or d in seen:
                continue
            seen.add(d)
            queue.append(d)
    return out


def _guards(body: tuple[Stmt, ...], tests: tuple[str, ...]) -> dict[int, tuple[str, ...]]:
    """id(statement) -> the texts of the ``if`` tests around it."""
    out: dict[int, tuple[str, ...]] = {}
    for s in body:
        out[id(s)] = tests
        inner = tests + ((s.text or ""),) if s.kind == "if" else tests
        for part in (s.body, s.orelse, s.final, *(h.body for h in s.handlers)):
            out.update(_guards(part, inner))
    return out


def _about(tests: tuple[str, ...], walked: list[str]) -> bool:
    """A test reads a walked collection (or the object holding it): the
    return is for a step with nothing to release."""
    for w in walked:
        while w.endswith(")") and "(" in w and not w.startswith("self."):
            w = w[w.index("(") + 1:-1]  # ``enumerate(metadata.requests)``
        base = w.rsplit(".", 1)[0] if "." in w else w
        base = base.partition("(")[0]
        if base in ("self", "cls"):
            base = w  # ``self.engine``: the attribute itself, not every ``self.``
        # whole names only: ``attn_metadata is None`` does not test ``metadata``
        if any(mentions(t, (w,)) or (base and mentions(t, (base,))) for t in tests):
            return True
    return False
