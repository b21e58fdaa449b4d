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
the resumed names. A module that acts on what tells a request was preempted
(``preempted_req_ids``, ``RequestStatus.PREEMPTED``: tests it, loops over it
or stores it) keeps its own account of resumed requests, or drops their
state, and is not judged; one that only hands it on is.

The same module also finds arms for a resumed request that set part of the
request's state again and keep updating the rest (``partial_resets``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kvflowmap.facts import CallFact
from kvflowmap.lifecycle.containers import self_attr
from kvflowmap.lifecycle.view import FnView, bound_args, mentions, walk

APPENDS = frozenset({"extend", "append", "appendleft", "insert"})
# calls whose result is a number or a truth value, not the blocks passed in
_SCALAR = frozenset({"len", "sum", "min", "max", "bool", "int", "float", "str", "any", "all",
                     "isinstance", "hash", "id", "print", "repr"})
DEPTH = 2
# what sets a request's entry again, or takes it out
RESETS = frozenset({"setitem", "pop", "delitem", "discard", "remove"})


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
        reads = sorted(r.line for r in fn.reads
                       if r.attr == field and _is_carrier(fn, r.base, carrier))
        if not reads or _reads_any(fn, resumed):
            continue  # told apart here
        if fn.module not in accounts:
            accounts[fn.module] = any(keeps_account(g, preempted) for g in functions.values()
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


def keeps_account(fn: FnView, preempted: tuple[str, ...]) -> bool:
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
    return any(r.attr in names for r in fn.reads) or any(
        lit in names for c in fn.all_calls for lit in c.literal_args if lit)


def _tracked(fn: FnView, seeds: set[str]) -> set[str]:
    """Names of ``fn`` holding the blocks: the seeds (parameters, or the
    field as ``.field``), and every name bound from one of them (an
    assignment, or a call given one that is not a scalar builtin), to a
    fixpoint."""
    names = set(seeds)
    assigns = fn.all_assigns + [b for bs in fn.binds.values() for b in bs]
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


@dataclass(frozen=True)
class PartialReset:
    """``fqn``'s arm for a resumed request (the ``if`` at ``line``) sets
    ``reset`` again, but not ``kept``, which ``init_fqn`` sets up with it
    (at ``init_line``) and ``fqn`` keeps updating (at ``update_line``)."""

    fqn: str
    line: int
    reset: str
    kept: tuple[str, ...]
    init_fqn: str
    init_line: int
    update_line: int


def partial_resets(functions: dict[str, FnView], resumed: tuple[str, ...]) -> list[PartialReset]:
    """Arms for a resumed request that set one piece of per-request state
    again (``self._blocks[rid] = new``) but leave others that another method
    sets up together with it (``self._blocks[rid] = []; self._tokens[rid] =
    0`` in the commit hook) and that this function keeps updating
    (``self._tokens[rid] += n``): after the preemption they keep the values
    of the request's first life."""
    out = []
    for fqn in sorted(functions):
        fn = functions[fqn]
        arms = _resumed_arms(fn, resumed)
        if not arms:
            continue
        # every arm for a resumed request counts (``if resumed:`` may come twice)
        body = tuple(x for arm in arms for x in walk(arm.body))
        inside = {x.line for x in body}
        # what the arms set again or take out, themselves or through a method
        # of the class they call on ``self`` (``self._rebase(rid)``)
        helpers = {c.callee.partition(".")[2] for x in body for c in fn.calls(x)
                   if c.callee and c.callee.startswith("self.") and c.callee.count(".") == 1}
        views = [(fn, body), *((g, g.stmts) for g in functions.values()
                               if g.cls == fn.cls and g.name in helpers)]
        reset = {_attr(c.container) for v, stmts in views for x in stmts
                 for c in v.containers(x) if c.op in RESETS and _attr(c.container)}
        # what it keeps updating outside those arms (``self._n[rid] = ...``, ``+= n``)
        updated = {_attr(c.container): c.line for c in fn.all_containers
                   if c.op == "setitem" and c.line not in inside and _attr(c.container)}
        updated |= {_attr(a.target): a.line for a in fn.all_assigns
                    if a.aug and a.line not in inside and _attr(a.target)}
        for init_fqn, init_line, group in _setups(functions, fn.cls):
            kept = tuple(sorted(a for a in group - reset if a in updated))
            hit = sorted(group & reset)
            if hit and kept:
                out.append(PartialReset(fqn, arms[0].line, hit[0], kept, init_fqn, init_line,
                                        min(updated[a] for a in kept)))
                break
    return out


def _attr(chain: str) -> str | None:
    """``self._x[]`` / ``self._x`` -> ``_x``; None for anything else (a
    field of an entry, ``self._x[].y``, is not the entry)."""
    attr = self_attr(chain)
    return attr if attr and chain.removesuffix("[]") == f"self.{attr}" else None


def _resumed_arms(fn: FnView, resumed: tuple[str, ...]) -> list:
    """The ``if`` statements of ``fn`` whose test asks whether the request
    was resumed (directly, or through a local bound to such a test)."""
    flags = {a.target for a in fn.all_assigns
             if a.target.isidentifier() and any(r in (a.test or "") for r in resumed)}
    reads = {r.line for r in fn.reads if r.attr in resumed}
    return [s for s in fn.stmts if s.kind == "if" and (
        s.line in reads or flags & set(s.names))]


def _setups(functions: dict[str, FnView], cls: str | None
            ) -> list[tuple[str, int, set[str]]]:
    """(function, line, attributes) of each statement list of a method of
    ``cls`` that sets two or more ``self`` containers keyed alike, one after
    another (a request's state set up together)."""
    if cls is None:
        return []
    out = []
    for fqn in sorted(functions):
        g = functions[fqn]
        if g.cls != cls:
            continue
        for block in g.lists:
            keyed: dict[str, set[str]] = {}
            first: dict[str, int] = {}
            for s in block:
                for c in g.containers(s):
                    a = _attr(c.container)
                    if c.op == "setitem" and a and c.key:
                        keyed.setdefault(c.key, set()).add(a)
                        first.setdefault(c.key, s.line)
            for key, attrs in keyed.items():
                if len(attrs) >= 2:
                    out.append((fqn, first[key], attrs))
    return out
