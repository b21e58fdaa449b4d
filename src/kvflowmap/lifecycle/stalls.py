"""Pending transfers polled with no age arm.

A report hook (``get_finished``) walks the requests still waiting for their
transfer and lets one go only when a status query on its transfer says so
(``if load_state.is_ready():``, ``if status.Succeeded():``). A transfer whose
status never turns (a lost completion, a peer that died mid-transfer) keeps
its request in ``WAITING_FOR_REMOTE_KVS`` for good: nothing in the walk reads
a clock, so no arm ever gives up on it and reports it failed.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass

from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.containers import ADD_OPS, REMOVE_OPS
from kvflowmap.lifecycle.effects import is_clock
from kvflowmap.lifecycle.ids import IDENT, loop_targets
from kvflowmap.lifecycle.view import FnView, walk

@dataclass(frozen=True)
class Stall:
    """A walk (``loop_line``) over pending state ``walked`` whose only way out
    for an entry is the status test at ``test_line``."""

    fqn: str
    loop_line: int
    test_line: int
    walked: str


def stalls(fn: FnView, ids: set[str], finished: tuple[str, ...] = (),
           success_only: bool = False,
           saves: Callable[[str], bool] = lambda chain: False) -> list[Stall]:
    """Walks of ``fn`` over a ``self`` container or a parameter whose entries
    leave (are removed from it, or their id is added to what is reported)
    only under a test that queries an item's status, when no test of ``fn``
    reads a clock. ``ids``: the names that hold request ids in ``fn``;
    ``finished``: parameters of requests that have ended (``finished_req_ids``),
    whose walk waits for nothing. With ``success_only``, clock or not, the
    walks whose one way out is a single status test with no other arm and
    no look at the outcome inside (``if status.Succeeded(): done.add(rid)``):
    a transfer that fails never satisfies it, and its request waits forever.
    ``saves(chain)``: the ``self`` chain names save state (walking it, or
    testing it, is about saves, whose failures owe vLLM no failed blocks)."""
    if age_arm(fn) and not success_only:
        return []
    out = []
    for loop in fn.stmts:
        targets, walked = loop_targets(loop.text) if loop.kind == "for" else ([], "")
        root = walked.partition("(")[2].partition(")")[0] or walked  # list(x.items())
        base = root.rpartition(".items")[0] or root.rpartition(".values")[0] or root
        # pending state is held in a container; what a call returns
        # (``self._wrapper.get_new_notifs().values()``) is news, not state
        if not targets or base in finished or "(" in base or not (
                base.startswith("self.") or base in fn.param_names):
            continue
        if saves(base) or _fed_by(fn, base, finished):
            continue
        items = _item_data(fn, loop, set(targets))
        tests = [s for s in walk(loop.body) if s.kind == "if" and _queries(fn, s, items, base)
                 and not any(saves(n) for n in s.names if n.startswith("self."))]
        leaving = [s for s in tests if _lets_go(fn, s, base, set(targets) | ids)]
        if success_only and not (len(leaving) == 1 and _only_success(fn, leaving[0], items)):
            continue
        if leaving:
            out.append(Stall(fn.fqn, loop.line, leaving[0].line, base))
    return out


def _fed_by(fn: FnView, chain: str, finished: tuple[str, ...]) -> bool:
    """``fn`` fills ``chain`` with the ids of finished requests
    (``self._acc.update(finished_req_ids)``): a walk of it waits for their
    saves, not for loads."""
    return any(op.container == chain and op.op in ADD_OPS and
               set(finished) & {n.partition(".")[0] for n in st.names}
               for st in fn.stmts for op in fn.containers(st))


def _only_success(fn: FnView, test: Stmt, items: set[str]) -> bool:
    """``test`` has no other arm (no ``else``/``elif``) and its arm asks
    nothing more about the item (``if not ok:``): it lets go only the
    transfers whose status says they succeeded."""
    if test.orelse:
        return False
    return not any(s.kind == "if" and (_queries(fn, s, items) or
                                       items & {n.partition(".")[0] for n in s.names})
                   for s in walk(test.body))


def age_arm(fn: FnView) -> bool:
    """A test of ``fn`` reads a clock, directly or through a local computed
    from one (``now = time.monotonic()`` ... ``timed_out = now - t0 > T`` ...
    ``elif timed_out:``); a clock read only for statistics is no age arm."""
    timed: set[str] = set()
    for _ in range(3):
        for s in fn.stmts:
            if s.kind == "simple" and (any(is_clock(c.callee or "") for c in fn.calls(s)) or
                                       timed & set(s.names)):
                timed |= {a.target for a in fn.assigns(s) if "." not in a.target}
    return any(s.kind in ("if", "while") and (
        timed & {n.partition(".")[0] for n in s.names} or
        any(is_clock(c.callee or "") for c in fn.calls(s))) for s in fn.stmts)


def _item_data(fn: FnView, loop: Stmt, names: set[str]) -> set[str]:
    """The loop's targets and the locals its body binds from them
    (``load_state = self._loads.get(shm)``)."""
    out = set(names)
    for s in walk(loop.body):
        if s.kind in ("simple", "for") and out & {n.partition(".")[0] for n in s.names}:
            out |= {a.target for a in fn.assigns(s) if "." not in a.target}
            if s.kind == "for":
                out |= set(loop_targets(s.text)[0])
    return out


def _queries(fn: FnView, s: Stmt, items: set[str], walked: str = "") -> bool:
    """The test calls a method on an item's data (``state.is_ready()``,
    ``status.Succeeded()``, ``check_state(handle)``, and, walking the keys of
    ``walked``, ``self._futures[rid].done()``)."""
    for c in fn.calls(s):
        callee = c.callee or ""
        if callee in _BUILTINS or callee.rpartition(".")[2] in _CONTAINER_READS:
            continue  # ``set(ids).issubset(self._done)`` reads our own state, not a transfer's
        if walked and callee.startswith(walked + "[]."):
            return True
        head = callee.partition(".")[0].partition("[")[0]  # ``status_list[-1].Succeeded()``
        if ("." in callee and head in items) or {(a or "").partition(".")[0]
                                                 for a in c.args} & items:
            return True
    return False


_BUILTINS = frozenset(n for n in dir(builtins) if not n.startswith("_"))
# what a value's own container methods answer: about data held, never a status
_CONTAINER_READS = frozenset({"issubset", "issuperset", "isdisjoint", "get", "keys", "values",
                              "items", "count", "index", "startswith", "endswith"})


def _lets_go(fn: FnView, s: Stmt, walked: str, ids: set[str]) -> bool:
    """An arm of ``s`` removes from the walked container or adds an id to a
    collection (the set the hook reports)."""
    for arm in (s.body, s.orelse):
        for st in walk(arm):
            for op in fn.containers(st):
                if op.op in REMOVE_OPS and op.container.startswith(walked):
                    return True
                if op.op in ADD_OPS and {n.partition(".")[0] for n in st.names} & ids and \
                        not op.container.startswith("self."):
                    return True
            if any(IDENT.fullmatch(n) and n in ids for n in st.names) and any(
                    (c.callee or "").rpartition(".")[2] in ("update", "add", "append")
                    for c in fn.calls(st)):
                return True
    return False
