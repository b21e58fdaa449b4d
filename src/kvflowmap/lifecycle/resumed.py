"""Blocks of running requests appended where vLLM replaces them.

Each step the scheduler's output lists the requests already running
(``scheduled_cached_reqs``) with their ``new_block_ids``: blocks to append
to the request's table, except for a request resumed after preemption
(``resumed_req_ids``; ``resumed_from_preemption`` in older vLLMs), whose
``new_block_ids`` are its whole new table: its old blocks were freed when it
was preempted, and other requests may hold them now. A connector that keeps
each request's blocks and appends ``new_block_ids`` without ever telling a
resumed request apart keeps the freed blocks in front of the new ones, and
loads or saves through them.

Found by structure: a function reads the block field of the carrier (a
chain ending in the carrier, or a local bound from one); the names bound
from that read (through assignments and calls given it, not through ``len``
and other scalar builtins) reach an ``extend``/``append``/``insert`` on a
``self`` container, in the function or in an analysed callee they are passed
to (two calls deep); and neither the function nor that callee reads any of
the resumed names. A module that reads what tells a request was preempted
(``preempted_req_ids``, ``RequestStatus.PREEMPTED``) keeps its own account of
resumed requests, or drops their state, and is not judged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kvflowmap.facts import CallFact
from kvflowmap.lifecycle.view import FnView, bound_args, mentions

APPENDS = frozenset({"extend", "append", "appendleft", "insert"})
# calls whose result is a number or a truth value, not the blocks passed in
_SCALAR = frozenset({"len", "sum", "min", "max", "bool", "int", "float", "str", "any", "all",
                     "isinstance", "hash", "id", "print", "repr"})
DEPTH = 2


@dataclass(frozen=True)
class ResumedAppend:
    """``fqn`` reads the running requests' new blocks at ``line``; they are
    appended to ``container`` in ``append_fqn`` at ``append_line``, through
    the calls ``via`` ((function, line) of each)."""

    fqn: str
    line: int
    append_fqn: str
    append_line: int
    container: str
    via: tuple[tuple[str, int], ...] = ()


def resumed_appends(functions: dict[str, FnView], analysed: Callable[[FnView, CallFact], list[str]],
                    carrier: str, field: str, resumed: tuple[str, ...],
                    preempted: tuple[str, ...]) -> list[ResumedAppend]:
    """Each function that appends the carrier's ``field`` to per-request
    state and reads none of the ``resumed`` names, in a module that reads
    none of the ``preempted`` ones (module docstring)."""
    out = []
    accounts: dict[str, bool] = {}
    for fqn in sorted(functions):
        fn = functions[fqn]
        q = fn.fact.qualname
        reads = sorted(r.line for r in fn.facts.reads
                       if r.scope == q and r.attr == field and _is_carrier(fn, r.base, carrier))
        if not reads or _reads_any(fn, resumed):
            continue  # told apart here
        if fn.module not in accounts:
            accounts[fn.module] = any(_keeps_account(g, preempted) for g in functions.values()
                                      if g.module == fn.module)
        if accounts[fn.module]:
            continue  # the module keeps its own account of preempted requests
        tracked = _tracked(fn, {"." + field})
        hit = _append_of(fn, tracked, functions, analysed, resumed, DEPTH, ())
        if hit is not None:
            append_fqn, append_line, container, via = hit
            out.append(ResumedAppend(fqn, reads[0], append_fqn, append_line,
                                     container.replace("[]", "[...]"), via))
    return out


def _keeps_account(fn: FnView, preempted: tuple[str, ...]) -> bool:
    """``fn`` acts on what tells it a request was preempted: tests it
    (``if request.status == RequestStatus.PREEMPTED``), loops over it, or
    puts it (or a local bound from it) into a ``self`` container; not one
    that only hands it on (into the workers' metadata)."""
    def marks(name: str) -> bool:
        return name.rpartition(".")[2] in preempted

    bound = {a.target for st in fn.stmts if any(marks(n) for n in st.names)
             for a in fn.assigns(st) if a.target.isidentifier()}
    for st in fn.stmts:
        if st.kind in ("if", "while", "for") and any(marks(n) for n in st.names):
            return True
        for c in fn.containers(st):
            if c.container.startswith("self.") and (
                    any(marks(n) for n in st.names) or mentions(c.key, bound)):
                return True
    return False


def _is_carrier(fn: FnView, base: str, carrier: str) -> bool:
    """``base`` is the carrier: a chain ending in it, or a name this
    function binds to such a chain."""
    if base == carrier or base.endswith("." + carrier):
        return True
    return any(a.target == base and a.value is not None and
               (a.value == carrier or a.value.endswith("." + carrier))
               for a in fn.all_assigns)


def _reads_any(fn: FnView, names: tuple[str, ...]) -> bool:
    """``fn`` reads one of ``names`` as an attribute, or asks ``getattr`` for it."""
    q = fn.fact.qualname
    return any(r.scope == q and r.attr in names for r in fn.facts.reads) or any(
        lit in names for c in fn.all_calls for lit in c.literal_args if lit)


def _tracked(fn: FnView, seeds: set[str]) -> set[str]:
    """Names of ``fn`` holding the blocks: the seeds (parameters, or the
    field as ``.field``), and every name bound from one of them (an
    assignment, or a call given one that is not a scalar builtin), to a
    fixpoint."""
    names = set(seeds)
    q = fn.fact.qualname
    binds = [b for b in fn.facts.binds if b.scope == q]
    assigns = fn.all_assigns + binds
    calls_by_line: dict[int, list[CallFact]] = {}
    for c in fn.all_calls:
        calls_by_line.setdefault(c.line, []).append(c)
    changed = True
    while changed:
        changed = False
        for a in assigns:
            if a.target in names or "." in a.target or "[" in a.target:
                continue
            direct = any(mentions(t, names) for t in (a.value, a.origin))
            through = any(_passes(c, names) for c in calls_by_line.get(a.line, ())
                          if (c.callee or "").rpartition(".")[2] not in _SCALAR)
            if direct or through:
                names.add(a.target)
                changed = True
    return names


def _passes(c: CallFact, names: set[str]) -> bool:
    """A positional or keyword argument of ``c`` mentions one of ``names``."""
    return any(mentions(a, names) for a in c.args) or any(
        mentions(v, names) for _, v in c.kwargs)


def _append_of(fn: FnView, tracked: set[str], functions: dict[str, FnView],
               analysed: Callable[[FnView, CallFact], list[str]], resumed: tuple[str, ...],
               depth: int, via: tuple[tuple[str, int], ...]
               ) -> tuple[str, int, str, tuple[tuple[str, int], ...]] | None:
    """The first append of a tracked name to a ``self`` container in ``fn``
    or in a callee given one (``depth`` calls deep); None when there is none,
    or the callee reads a resumed name."""
    for c in sorted(fn.all_containers, key=lambda c: c.line):
        if c.op in APPENDS and c.container.startswith("self.") and mentions(c.key, tracked):
            return fn.fqn, c.line, c.container, via
    if depth == 0:
        return None
    for call in sorted(fn.all_calls, key=lambda c: (c.line, c.col)):
        if not _passes(call, tracked):
            continue
        for target in analysed(fn, call):
            g = functions.get(target)
            if g is None or target == fn.fqn or _reads_any(g, resumed):
                continue
            params = {p for arg, p in bound_args(g.fact, call) if mentions(arg, tracked)}
            if not params:
                continue
            hit = _append_of(g, _tracked(g, params), functions, analysed, resumed,
                             depth - 1, (*via, (fn.fqn, call.line)))
            if hit is not None:
                return hit
    return None
