"""Failures on a connector's load path that never reach vLLM's failed-blocks
report: a failure branch where the connector's failed-blocks hook can only
return nothing (``no-channel``), and a failed transfer raised out of the
load path (``raised``).

A connector's load path is what its own load hooks and load-report hooks
(``start_load_kv``, ``get_finished``...) make run, through calls, threads and
queue hand-offs, less what only the save hooks reach. A hook of the protocol
base is not followed: its ``self.get_finished(...)`` dispatches to every
connector's override, not this one's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kvflowmap.facts import CallFact, Stmt
from kvflowmap.lifecycle.containers import ADD_OPS
from kvflowmap.lifecycle.effects import is_logging
from kvflowmap.lifecycle.failures import (TAKE_OPS, LOUD, empty_returns, failure_branches,
                                         lines_in_loops, logs,
                                          takes)
from kvflowmap.lifecycle.ids import loop_targets
from kvflowmap.lifecycle.request_data import request_data
from kvflowmap.lifecycle.view import FnView, walk

# ``rid in self._pending`` / ``not in``: a test of where the id is kept
_MEMBERSHIP = re.compile(r"\bin\s+self\.")


@dataclass(frozen=True)
class LoadPath:
    """One connector class: the failed-blocks hook vLLM calls on it (None
    when the analysed vLLM has none) and the subject functions of its load path."""

    cls: str
    hook: str | None
    reached: frozenset[str]


def load_paths(lc, classes, base: str, hooks: tuple[str, ...], starters: tuple[str, ...],
               wanted: set[str]) -> list[LoadPath]:
    """Per subject class deriving from the protocol ``base``: its failed-blocks
    hook (the first of ``hooks`` its MRO finds) and what its own ``starters``
    make run, among ``wanted``, not through the base's hooks."""
    own_base = frozenset(f for f, fn in lc.functions.items() if fn.cls == base)
    out = []
    for cls in sorted({fn.cls for fn in lc.functions.values() if fn.cls}):
        if cls == base or base not in classes.mro(cls):
            continue
        hook = next((m for h in hooks if (m := classes.find_member(cls, h))), None)
        starts = [m for h in starters if (m := classes.find_member(cls, h)) in lc.functions
                  and m.rpartition(".")[0] != base]
        reached = (lc.runs_from(starts, own_base) - lc.save_only) & wanted
        out.append(LoadPath(cls, hook, frozenset(reached)))
    return out


def load_failures(fns: dict[str, FnView], reached: set[str],
                  request_names: Callable[[str], set[str]],
                  save_walks: Callable[[FnView, str], bool] = lambda fn, it: False
                  ) -> list[tuple[str, int]]:
    """(function, line) of the failure branches about a request among the
    functions ``reached`` (an ``except`` whose ``try`` works on the request,
    an ``if``/``else`` body that logs an error naming it), neither re-raising,
    nor inside a loop whose iterable ``save_walks`` says holds saves (a
    report hook that polls stores and loads alike). Where the connector has
    no way to report failed blocks, each of these is a failed load vLLM
    takes as a success."""
    out = []
    for fqn, fn, names in _working(fns, reached, request_names):
        in_saves = lines_in_loops(fn, save_walks)
        outcomes = _derived(fn, _outcomes(fn, names))
        for branch, body in failure_branches(fn, names):
            if branch.line in in_saves:
                continue
            if branch.kind == "except":
                # its ``try`` works on the request; a failure worth a log;
                # not a listener run for it (``for cb in self._listeners:
                # cb(session)``), whose failure is the listener's own
                if logs(fn, body, LOUD + ("warning", "warn")) and not _runs_listeners(fn, branch):
                    out.append((fqn, branch.line))
                continue
            # a branch must name the request, or test what a load given the
            # request's data returned (``if num_retrieved < num_expected:``,
            # LMCache 0.3.9), and not be a bookkeeping test of whether the id
            # is where it should be (``rid in self._x``)
            made = {a.target for st in walk(body) for a in fn.assigns(st)}
            named = (names - made) & {n.partition(".")[0] for st in walk(body) for n in st.names}
            tested = outcomes & {n.partition(".")[0] for n in branch.names}
            if (named or tested) and not _MEMBERSHIP.search(branch.text or ""):
                out.append((fqn, branch.line))
    return list(dict.fromkeys(out))


def _runs_listeners(fn: FnView, handler: Stmt) -> bool:
    """Every call in the ``try`` of ``handler`` calls a loop's target: the
    try runs callbacks the loop walks, code this function does not know."""
    targets = {t for s in fn.stmts if s.kind == "for" for t in loop_targets(s.text)[0]}
    for s in fn.stmts:
        if s.kind == "try" and any(h is handler for h in s.handlers):
            calls = [c for st in walk(s.body) for c in fn.calls(st)]
            return bool(calls) and all(c.callee in targets for c in calls)
    return False


def _working(fns: dict[str, FnView], reached: set[str],
             request_names: Callable[[str], set[str]]) -> Iterator[tuple[str, FnView, set[str]]]:
    """(fqn, view, the request's data there) for each function of ``reached``
    that knows a request (``request_names``), in name order."""
    for fqn in sorted(reached):
        fn = fns.get(fqn)
        names = request_names(fqn) if fn is not None else set()
        if fn is not None and names:
            yield fqn, fn, request_data(fn, names)


def empty_hook(fns: dict[str, FnView], hook: str) -> bool:
    """The analysed hook ``hook`` can only return an empty collection and
    takes nothing out of any container (a constant ``return set()``)."""
    fn = fns.get(hook)
    return fn is not None and bool(empty_returns(fn)) and not takes(fn)


# the test of a transfer's outcome: ``ok``, ``not ok``, ``state == "DONE"``,
# ``ret < 0`` (a status against a constant), not a computed invariant
_LITERAL = r"(?:-?\d+|\"[^\"]*\"|'[^']*'|True|False)"
_STATUS_TEST = re.compile(rf"^(?:not\s+)?(?P<a>\w+)$|^(?P<b>\w+)\s*(?:==|!=|<=|>=|<|>)\s*{_LITERAL}$")


def raised_failures(fns: dict[str, FnView], reached: set[str],
                    request_names: Callable[[str], set[str]]) -> list[tuple[str, int, str]]:
    """(function, line of the ``raise``, the outcome tested) for each arm of
    an ``if`` among ``reached`` that ends by raising an exception of its own,
    where the test reads what a call given the request's data returned (``ok,
    msg = client.load(..., block_ids)``; ``state = check(handle)``): a failed
    transfer raised out of the load path instead of reported."""
    out = []
    for fqn, fn, names in _working(fns, reached, request_names):
        outcomes = _outcomes(fn, names)
        for s in fn.stmts:
            m = _STATUS_TEST.match((s.text or "").strip()) if s.kind == "if" else None
            tested = (m.group("a") or m.group("b")) if m else None
            if tested not in outcomes:
                continue
            for body in (s.body, s.orelse):
                # an unsupported configuration is not a failed transfer
                if body and body[-1].kind == "raise" and body[-1].text and \
                        "NotImplementedError" not in body[-1].text:
                    out.append((fqn, body[-1].line, str(tested)))
    return list(dict.fromkeys(out))


def _outcomes(fn: FnView, names: set[str]) -> set[str]:
    """Locals bound to what a method call given one of ``names`` (or made on
    one) returned; container reads and writes (``d.get(rid)``) are lookups,
    not transfers."""
    out = set()
    for st in fn.stmts:
        if st.kind == "simple" and any(_transfer_call(c, names) for c in fn.calls(st)):
            out |= {a.target for a in fn.assigns(st) if "." not in a.target}
    return out


def _derived(fn: FnView, outcomes: set[str]) -> set[str]:
    """``outcomes`` and the locals computed from them in ``fn`` (two steps:
    ``num = mask.sum().item()`` of ``mask = engine.retrieve(tokens, ...)``)."""
    out = set(outcomes)
    for _ in range(2):
        out |= {a.target for st in fn.stmts if st.kind == "simple" for a in fn.assigns(st)
                if "." not in a.target and {n.partition(".")[0] for n in st.names} & out}
    return out


def _transfer_call(c: CallFact, names: set[str]) -> bool:
    base, _, meth = (c.callee or "").rpartition(".")
    if not base or is_logging(c.callee or "") or meth in TAKE_OPS | ADD_OPS:
        return False
    given = {(a or "").partition(".")[0] for a in (*c.args, *(v for _, v in c.kwargs))}
    return bool((given | {base.partition(".")[0]}) & names - {"self"})
