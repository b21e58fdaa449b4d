"""Paths on which a request id is dropped.

An id is *bound* at the entry of a function that receives it (a parameter)
or at the head of a loop over ids. From there, a path that reaches its end
(the normal exit; for a loop, the next iteration or leaving the loop) with no
handling effect on the way (see ``effects.HANDLING``) drops the id. Such a
path is only a finding when the function shows, on another path, that it
hands the id over, and the dropping path leaves that other path by

- an ``exception`` edge into a handler that then carries on (``except``
  logs and forgets), or
- an early exit: a branch that jumps out (``return``, ``continue``,
  ``break``) while the hand-over comes after the branch.

Bindings: an id or request parameter (from the function's entry), a
collection of ids it is given, a local collection it fills
(``request_ids.append(rid)``, from the first fill), and each loop over ids.
Every way out of a binding (each ``return``, ``continue``, the end) is its
own path. A branch that merely guards the hand-over (``if awaiting:
self._x.add(rid)``) is a decision, not a drop; so are the other tests of
``decisions``, and so is leaving a loop that did not run.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from kvflowmap.model.cfg import CFG, build_cfg
from kvflowmap.facts import AssignFact, Stmt
from kvflowmap.lifecycle.cfg_paths import (bound_line, can_handle, first_handling, first_nodes,
                                           in_flight, last_line, path_to, region, steps)
from kvflowmap.lifecycle.decisions import (ends_with_status, is_filter, returns_status, tests_id,
                                           warns)
from kvflowmap.lifecycle.containers import assigns_empty
from kvflowmap.lifecycle.effects import HANDLING, Effect, Effects, hands_on_at
from kvflowmap.lifecycle.ids import COLLECT, IDENT, loop_targets, unwrap
from kvflowmap.lifecycle.swallowed import handles_only
from kvflowmap.lifecycle.view import FnView, walk

_JUMPS = ("return", "continue", "break")


@dataclass(frozen=True)
class Drop:
    """A path on which an id bound at ``bound_line`` is dropped."""

    fqn: str
    id_name: str
    bound_line: int
    how: str  # except | early-exit | abandoned | removed | raised | escaped
    branch_line: int  # the test or the call whose exception edge is taken
    exit_line: int  # the jump, or the last statement before the end
    handover_line: int  # where another path hands the id over
    steps: tuple[tuple[int, str], ...]


def drops(fn: FnView, eff: Effects, cfg: CFG | None = None,
          hows: tuple[str, ...] = ("except", "early-exit", "removed"),
          owed: frozenset = frozenset(), cleanup: tuple[str, ...] = (),
          each_handover: tuple[str, ...] = (),
          raising: Callable[[Stmt], bool] | None = None) -> list[Drop]:
    """Every dropping path of ``fn`` (one per binding and way out) whose kind
    is in ``hows``: ``except`` and ``early-exit`` for ids the function
    receives, ``removed`` for ids it takes out of a container it iterates
    (an id left in its container is still held, so skipping it is fine) or
    receives and takes out of an ``owed`` container (one a report reads).
    Ids from ``cleanup`` parameters (``finished_req_ids``) are finished:
    removing them is cleanup. For the kinds in ``each_handover`` a received id
    must reach every place the function hands it to on some path, not only
    the first (the commit hook records a parked request in several
    containers; an exit after the first and before the one the load reads
    still loses it). With ``escaped`` in ``hows`` (code whose exceptions no
    caller sees), an exception a statement ``raising`` accepts raises, left
    uncaught before the hand-over, is a way out too."""
    cfg = cfg or build_cfg(fn.fact.body)
    raises = raising or _any
    effects = {n.id: eff.of(fn, n.stmt) for n in cfg.nodes if n.stmt is not None
               and n.kind == "stmt"}
    handles = {n for n, es in effects.items() if any(e.kind in HANDLING for e in es)}
    out: list[Drop] = []
    ids = eff.state.of(fn.fqn)
    bound = [p for p in fn.param_names if p in ids.ids or p in ids.requests]
    received = tuple(h for h in hows if h != "removed")
    if bound and received:
        out += _search(fn, eff, cfg, cfg.entry, None, bound[0], handles, received, raises)
        if each_handover:
            lines = {cfg.nodes[n].line for n in handles}
            for dest in _destinations(effects):
                out += [d for d in _search(fn, eff, cfg, cfg.entry, None, bound[0], dest, received,
                                           raises)
                        if d.how in each_handover and not _hands_on_after(d, lines)]
    if bound and "removed" in hows and owed and handles:
        # a helper given an id that hands it on somewhere (a pure cleanup
        # helper's removals are its caller's decision)
        out += _removed(fn, eff, cfg, cfg.entry, None, bound[0], handles, effects, owed)
    if received:
        # a collection of ids the function is given (``finished_req_ids``,
        # ``request_ids``) that one path hands on and another drops
        for coll in [p for p in fn.param_names if p in ids.colls and p not in bound][:1]:
            kept = (handles | _coll_handles(fn, eff, cfg, coll)) - _selections(fn, effects)
            if kept:
                out += _search(fn, eff, cfg, cfg.entry, None, coll, kept, received, raises)
        for coll, fill in _filled_locals(fn, eff, cfg):
            out += _search(fn, eff, cfg, fill, None, coll, _coll_handles(fn, eff, cfg, coll),
                           received, raises)
    for n in cfg.nodes:
        loop = n.stmt
        if loop is None or not (n.kind == "loop" or (n.kind == "stmt" and loop.kind == "while")):
            continue
        walked = _loop_ids(fn, eff, loop) if n.kind == "loop" else []
        targets = walked or _assigned_ids(fn, eff, loop)
        if not targets:
            continue
        held = n.kind != "loop" or _iterates_held(loop)
        if "removed" in hows and held and unwrap(loop_targets(loop.text)[1]) not in cleanup:
            out += _removed(fn, eff, cfg, n.id, loop, targets[0], handles, effects, owed)
        if walked and not held and received:
            kept = handles - _selections(fn, effects)
            if kept:
                out += _search(fn, eff, cfg, n.id, loop, targets[0], kept, received, raises)
    return _unique(out)  # one finding per way out, whichever binding found it first


def _selections(fn: FnView, effects: dict[int, list[Effect]]) -> set[int]:
    """Nodes whose only hand-over adds the id to a local collection the
    function returns (``err_reqs.append(rid)`` ... ``return ..., err_reqs``):
    a loop over a collection the caller keeps, picking some ids out, leaves
    the rest with the caller; skipping one there drops nothing."""
    returned = {t for r in fn.all_returns for t in IDENT.findall(r.value or "")}
    out = set()
    for node, es in effects.items():
        handing = [e for e in es if e.kind in HANDLING]
        # an add is labelled by the local and by its method (``err_reqs.append``)
        if handing and all(e.kind == "add" and e.container is None and
                           e.target.partition(".")[0] in returned for e in handing):
            out.add(node)
    return out


def _hands_on_after(d: Drop, lines: set[int]) -> bool:
    """The dropping path hands the id somewhere else after its turn (``if fut
    is None: self._ready.put(rid); return``): it went another way, not lost."""
    turn = max((i for i, (line, _) in enumerate(d.steps) if line == d.branch_line), default=-1)
    return any(line in lines for line, _ in d.steps[turn + 1:])


def _destinations(effects: dict[int, list[Effect]]) -> list[set[int]]:
    """The handing nodes grouped by where they hand the id (a container or a
    callee), in order of the first node of each group."""
    groups: dict[str, set[int]] = {}
    for n, es in sorted(effects.items()):
        for e in es:
            if e.kind in HANDLING:
                groups.setdefault(f"{e.kind}:{e.target}", set()).add(n)
    return list(groups.values())


def _filled_locals(fn: FnView, eff: Effects, cfg: CFG) -> list[tuple[str, int]]:
    """Local collections the function fills with ids (``request_ids.append(rid)``,
    or binds to ids at once: ``ids = [t.req_id for t in batch]``), each with
    the CFG node of its first fill: from there the collection is what carries
    those ids."""
    colls = eff.state.of(fn.fqn).colls - set(fn.param_names)
    first: dict[str, int] = {}
    for n in sorted(cfg.nodes, key=lambda n: (n.line, n.id)):
        if n.stmt is None or n.kind != "stmt":
            continue
        for a in fn.assigns(n.stmt):
            if a.target in colls and a.target not in first and not a.aug and not _empty(a):
                first[a.target] = n.id
        for op in fn.containers(n.stmt):
            if op.container in colls and op.container not in first and \
                    op.op in COLLECT and eff.state.is_id(fn, op.key):
                first[op.container] = n.id
    return sorted(first.items())


def _empty(a: AssignFact) -> bool:
    """``x = []``, ``x = set()``: a collection that holds nothing yet (not
    ``x = list(batch)``, which copies one)."""
    return assigns_empty(a) and a.origin in (None, a.value)


def _coll_handles(fn: FnView, eff: Effects, cfg: CFG, coll: str) -> set[int]:
    """Nodes where a local id collection is handed on (see ``effects.escapes``)."""
    loop_hands_on = lambda s: any(e.kind in HANDLING for b in walk(s.body)  # noqa: E731
                                  for e in eff.of(fn, b))
    return {n.id for n in cfg.nodes if n.stmt is not None and n.kind in ("stmt", "loop")
            and hands_on_at(fn, n.stmt, coll, loop_hands_on,
                            keeps=lambda c: eff.call_keeps(fn, c))}


def _iterates_held(s: Stmt) -> bool:
    """A loop over the connector's own state (``for rid in self._pending``)."""
    _, iterable = loop_targets(s.text)
    return "self." in iterable


def _removed(fn: FnView, eff: Effects, cfg: CFG, start: int, loop: Stmt | None, name: str,
             handles: set[int], effects: dict[int, list[Effect]],
             owed: frozenset) -> list[Drop]:
    """Paths (of one loop iteration, or of the function for a parameter) that
    take the id out of the container the loop walks, or out of one a report
    reads, and then hand it nowhere. After the removal, a branch that guards
    a hand-over is a decision; a loop that hands nothing on anywhere is
    cleanup when a test on the request (``status.req.is_finished()``) led to
    the removal."""
    inside = region(cfg, loop)
    walked = unwrap(loop_targets(loop.text)[1]) if loop is not None and loop.kind == "for" \
        else ""
    removes = {n for n in inside if n not in handles and _bare(fn, cfg.nodes[n].stmt) and any(
        e.kind == "remove" and e.container is not None and
        (f"self.{e.container.attr}" == walked or e.container in owed)
        for e in effects.get(n, ()))}
    if not removes:
        return []
    first = first_nodes(cfg, start, loop)
    parent: dict[tuple[int, bool], tuple[tuple[int, bool], str] | None] = {
        (n, n in removes): None for n in first}
    queue = deque(parent)
    ends = []
    while queue:
        n, removed = state = queue.popleft()
        if n in handles or n == cfg.raise_exit:
            continue
        if n == cfg.exit or (loop is not None and (n == start or n not in inside)):
            if removed:
                ends.append(state)
            continue
        for d, lab in cfg.successors(n):
            key = (d, removed or d in removes)
            if key not in parent:
                parent[key] = (state, lab)
                queue.append(key)
    reach = can_handle(cfg, inside, handles, start)
    cleanup_loop = not (reach & inside)
    for end in ends:
        path = path_to(parent, end)
        nodes = [n for n, _ in path]
        rm = next(i for i, n in enumerate(nodes) if n in removes)
        stmts = [(n, st) for n in nodes if (st := cfg.nodes[n].stmt) is not None and n != start]
        if cleanup_loop and any(is_filter(fn, eff, st, name) for n, st in stmts
                                if n != nodes[-1]):
            continue  # removed after a decision about the request (it finished)
        before = set(nodes[:rm])
        removal = cfg.nodes[nodes[rm]].stmt
        taken = {op.container for op in fn.containers(removal)} if removal else set()
        if any(tests_id(fn, eff, st) and not _membership_of(fn, st, taken)
               for n, st in stmts if n in before):
            continue  # ``if rid not in self._meta: remove``: the request is gone
        after = path[rm:]
        if any(n in reach for n, _ in after[1:]) or any(
                d in reach for n, _ in after[:-1] for d, _ in cfg.successors(n)):
            turn = _classify(fn, eff, cfg, after, reach, handles, name, start)
            if turn is None:
                continue
        return [Drop(fn.fqn, name, bound_line(cfg, start, fn), "removed", cfg.nodes[nodes[rm]].line,
                     last_line(cfg, nodes), 0, steps(cfg, path))]
    return []


def _membership_of(fn: FnView, s: Stmt, taken: set[str]) -> bool:
    """``if rid in self._x:`` before taking ``rid`` out of ``self._x``: the
    usual guard of a removal, which says nothing about the request being gone."""
    cmps = fn.compares.get(s.line, ())
    return bool(cmps) and all(c.ops == ("In",) and c.operands[-1:] and c.operands[-1] in taken
                              for c in cmps)


def _bare(fn: FnView, s: Stmt | None) -> bool:
    """A removal whose result is thrown away (``del x[k]``, ``x.discard(k)``):
    ``meta = x.pop(k)`` and ``for a in x.pop(k, [])`` take the entry over."""
    return s is not None and s.kind == "simple" and not fn.assigns(s) and \
        len(fn.calls(s)) <= 1


def _assigned_ids(fn: FnView, eff: Effects, loop: Stmt) -> list[str]:
    """Ids a loop body takes out of a container itself (``rid, x = q.get()``)."""
    ids = eff.state.of(fn.fqn).ids
    for s in loop.body:
        for a in fn.assigns(s):
            if a.target in ids:
                return [a.target]
    return []


def _loop_ids(fn: FnView, eff: Effects, s: Stmt) -> list[str]:
    targets, _ = loop_targets(s.text)
    ids = eff.state.of(fn.fqn)
    return [t for t in targets if t in ids.ids or t in ids.requests][:1]


def _search(fn: FnView, eff: Effects, cfg: CFG, start: int, loop: Stmt | None, name: str,
            handles: set[int], hows: tuple[str, ...],
            raises: Callable[[Stmt], bool] | None = None) -> list[Drop]:
    """The dropping paths of one binding. With ``raised`` in ``hows`` (code
    only a background thread or task runs, where an exception is seen by no
    caller that could report the id), a ``raise`` statement of the function's
    own that leaves it uncaught is a way out too; with ``escaped`` (no caller
    sees the exception at all), so is one a statement ``raises`` accepts."""
    inside = region(cfg, loop)
    first = first_nodes(cfg, start, loop)
    reach = can_handle(cfg, inside, handles, start)
    if not any(n in reach for n in first):
        return []  # no path hands the id over: nothing to compare with
    # BFS over (node, exception in flight): an exception that leaves the
    # loop body through a ``with`` or ``finally`` is still on its way out.
    # In flight is 1 for an exception a call raised, 2 for the function's
    # own ``raise``/``assert`` (only that one counts as ``raised``).
    State = tuple[int, int]
    parent: dict[State, tuple[State, str] | None] = {(n, 0): None for n in first}
    queue: deque[State] = deque(parent)
    # Each way out is its own end (the last node before the exit, the loop
    # head or the region's edge), so that one ``return`` does not hide another.
    ends: list[tuple[State, str, int]] = []
    escaping: set[int] = set()  # the ends a call's exception leaves by (``escaped``)

    def leaves(d: int) -> bool:
        return d == cfg.exit or (loop is not None and (d == start or d not in inside))

    while queue:
        n, exc = state = queue.popleft()
        if n == cfg.raise_exit or leaves(n):
            continue  # an exception out of the function stops the step: not a drop
        for d, lab in cfg.successors(n):
            if n in handles and lab != "exception":
                continue  # handed on; a hand-over that raises did not happen
            # a hand-over that raises replaces the exception in flight with
            # its own (a failure of the hand-over, not of the function's raise)
            own = 2 if _own_raise(cfg, n, lab) else (1 if n in handles else max(exc, 1))
            flying = d == cfg.raise_exit or in_flight(cfg, bool(exc), lab, d)
            nxt = (d, own if flying else 0)
            if not nxt[1] and leaves(d) and d != cfg.raise_exit:
                ends.append((state, lab, d))
            elif d == cfg.raise_exit and nxt[1] == 2 and "raised" in hows:
                ends.append((state, lab, d))
            elif d == cfg.raise_exit and nxt[1] == 1 and "escaped" in hows:
                escaping.add(len(ends))
                ends.append((state, lab, d))
            elif nxt not in parent:
                parent[nxt] = (state, lab)
                queue.append(nxt)
    out = []
    for i, (state, lab, d) in enumerate(ends):
        path = path_to(parent, state)
        path = [*path[:-1], (path[-1][0], lab), (d, "")]
        drop = _classify(fn, eff, cfg, path, reach, handles, name, start,
                         (raises or _any) if i in escaping else None)
        if drop and drop.how in hows:
            out.append(drop)
    return _unique(out)


def _classify(fn: FnView, eff: Effects, cfg: CFG, path: list[tuple[int, str]],
              reach: set[int], handles: set[int], name: str, start: int,
              raises: Callable[[Stmt], bool] | None = None) -> Drop | None:
    """The drop's kind, from the last point where the path turned away from a
    hand-over; None when that turn is a decision (a guard, a test on the id
    or its record, a configuration flag), or when the exception that leaves
    (``escaped``, when ``raises`` is given) comes from a statement
    ``raises`` does not accept."""
    nodes = [n for n, _ in path]
    if nodes[-1] == cfg.raise_exit:
        own = [n for n, lab in path if _own_raise(cfg, n, lab)]
        kind = "raised"
        if raises is not None:  # the last statement whose exception edge the path takes
            kind, own = "escaped", [n for n, lab in path if lab == "exception"]
            st = cfg.nodes[own[-1]].stmt if own else None
            # a hand-over that raises is a failure of the hand-over itself;
            # and the exception must skip one (the statement leads to one)
            if st is None or own[-1] in handles or own[-1] not in reach or not raises(st):
                return None
        n = own[-1]
        return Drop(fn.fqn, name, bound_line(cfg, start, fn), kind, cfg.nodes[n].line,
                    cfg.nodes[n].line, first_handling(cfg, nodes[0], handles), steps(cfg, path))
    for i in range(len(path) - 2, -1, -1):
        n, lab = path[i]
        node = cfg.nodes[n]
        nxt = nodes[i + 1]
        others = [d for d, _ in cfg.successors(n) if d != nxt and d in reach]
        if node.stmt is None or not others:
            continue
        batch = lab != "exception" and _abandons_batch(fn, cfg, node.stmt, nodes[i + 1:], name)
        if lab != "exception" and not batch and is_filter(fn, eff, node.stmt, name):
            return None  # (a test that raises decided nothing)
        how = None
        if lab == "exception":
            how = "except" if not ends_with_status(cfg, nodes[i + 1:]) and \
                not _shutdown_handler(cfg, nodes[i + 1:]) else None
        elif node.stmt.kind in ("if", "case") and lab in ("true", "false"):
            jump = _jump_inside(cfg, nodes[i + 1:], node.stmt)
            if jump is not None and not returns_status(cfg.nodes[jump].stmt) and \
                    (batch or not warns(fn, node.stmt)):
                how = "abandoned" if batch else "early-exit"
        if how is None:
            return None  # the last turn guards the hand-over: a decision
        return Drop(fn.fqn, name, bound_line(cfg, start, fn), how, node.line,
                    last_line(cfg, nodes), first_handling(cfg, others[0], handles),
                    steps(cfg, path))
    return None


def _abandons_batch(fn: FnView, cfg: CFG, test: Stmt, rest: list[int], name: str) -> bool:
    """The turn is a test inside a loop over the batch ``name`` carries
    (``for req_id in meta.request_ids``) and the path ``return``s out of the
    function: whatever it decides about one element, the other elements of
    the batch are dropped with it (vLLM 0.15.1's Mooncake sender returned on
    the first id it could not find and left the ids it had already marked as
    being sent, and every id after it, with no report)."""
    if not rest or rest[-1] != cfg.exit:
        return False
    jumps = [st for n in rest if (st := cfg.nodes[n].stmt) is not None and st.kind in _JUMPS]
    if not jumps or jumps[0].kind != "return":
        return False
    for loop in fn.stmts:
        if loop.kind != "for" or not any(x is test for x in walk(loop.body)):
            continue
        it = unwrap(loop_targets(loop.text)[1])
        if it == name or it.startswith(name + "."):
            return True
    return False


def _any(s: Stmt) -> bool:
    return True


def _own_raise(cfg: CFG, n: int, label: str) -> bool:
    """The edge out of ``n`` is a ``raise`` statement's own (not a ``with`` or
    ``finally`` passing an exception on). A failed ``assert`` is left out: on
    the bench's code bases nearly all of them state an internal invariant
    (``assert len(local) == len(remote)``), 9 findings on four code bases."""
    node = cfg.nodes[n]
    return node.kind == "stmt" and node.stmt is not None and label == "raise" \
        and node.stmt.kind == label


# Exceptions that mean the process or its event loop is going away: a handler
# of only these that leaves is teardown, no request is waiting on it any more.
_SHUTDOWN = frozenset({"ContextTerminated", "CancelledError", "GeneratorExit",
                       "KeyboardInterrupt", "SystemExit"})


def _shutdown_handler(cfg: CFG, rest: list[int]) -> bool:
    """The first handler on the path catches only shutdown exceptions."""
    for n in rest:
        st = cfg.nodes[n].stmt
        if st is not None and st.kind == "except":
            return handles_only(st, _SHUTDOWN)
    return False


def _jump_inside(cfg: CFG, rest: list[int], branch: Stmt) -> int | None:
    inner = {id(s) for s in walk(branch.body + branch.orelse)}
    for n in rest:
        st = cfg.nodes[n].stmt
        if st is not None and st.kind in _JUMPS and id(st) in inner:
            return n
    return None


def _unique(drops_: list[Drop]) -> list[Drop]:
    seen: dict[tuple[int, str], Drop] = {}
    for d in drops_:
        seen.setdefault((d.branch_line, d.how), d)
    return sorted(seen.values(), key=lambda d: (d.branch_line, d.how))
