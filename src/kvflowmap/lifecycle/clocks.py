"""Process-local clock readings that cross the scheduler-to-worker bridge.

``time.perf_counter()`` and ``time.monotonic()`` count from an origin of
their own process's machine (boot time): two processes on two nodes read
values that have nothing to do with each other. vLLM 0.26.0's NIXL
connector stamped each delayed free's lease deadline with the scheduler's
``perf_counter()`` (``_reqs_need_send[req] = perf_counter() + ttl``), sent
it in the step's metadata (``meta.reqs_to_send``), and the worker compared
it with its own ``perf_counter()``: on a worker in another node the lease
expired on arrival, or never (fixed in 0.27.0 by rebasing on arrival,
``now + (deadline - metadata.scheduler_clock)``).

Found by structure, statement by statement (what a statement reads taints
what it writes):

- *stamped*: on the scheduler side (functions only scheduler hooks reach), a
  value computed from a clock call, through locals and ``self`` attributes,
  is written into a field of another object (``meta.F = ...``,
  ``meta.F[k] = ...``, a keyword ``F=`` of a call): field ``F`` carries the
  scheduler's clock;
- *arrived*: on the worker side (functions only worker hooks reach), a read
  of ``<x>.F`` (not ``self.F``) carries it on, through locals and ``self``
  attributes of related classes;
- *rebased*: a local assigned from both the scheduler's value and the
  worker's own clock is a conversion; it carries the worker's clock only;
- *compared*: an ordering comparison (or ``min``/``max``) on the worker side
  with the scheduler's value on one side and the worker's clock on the other.

One result per field and function that reads it on arrival.
"""

from __future__ import annotations

import os

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field

from kvflowmap.facts import AssignFact, Stmt
from kvflowmap.lifecycle.containers import ADD_OPS
from kvflowmap.lifecycle.view import FnView
from kvflowmap.model.classes import ClassIndex

_ORDERING = frozenset({"LessThan", "LessThanEqual", "GreaterThan", "GreaterThanEqual"})
_EXTREMES = ("min", "max")


@dataclass(frozen=True)
class Place:
    """A statement of a function; ``what`` names the clock read there, for a
    statement that reads one."""

    fqn: str
    line: int
    what: str = ""


@dataclass(frozen=True)
class ClockCrossing:
    """Field ``field`` carries a scheduler clock reading (``stamped``, written
    into the field at ``carried``); worker function ``fqn`` reads it at
    ``line`` and ``compared`` orders it against the worker's own clock."""

    fqn: str
    line: int
    field: str
    stamped: Place
    carried: Place
    compared: Place


@dataclass
class _Taint:
    """What carries a value on one side: locals per function, ``self``
    attributes per (attribute, writing class), and where each value began."""

    local: dict[str, dict[str, set[Place]]] = field(default_factory=dict)
    attrs: dict[str, dict[str, set[Place]]] = field(default_factory=dict)

    def mark(self, fn: FnView, chain: str, origins: set[Place]) -> bool:
        """Record that ``chain`` in ``fn`` carries values that began at
        ``origins``; True if that is new."""
        chain = _strip(chain)
        if chain.startswith("self.") and fn.self_cls:
            held = self.attrs.setdefault(chain.split(".")[1], {}).setdefault(fn.self_cls, set())
        else:
            held = self.local.setdefault(fn.fqn, {}).setdefault(_head(chain), set())
        if origins <= held:
            return False
        held |= origins
        return True

    def origins(self, fn: FnView, chain: str, classes: ClassIndex) -> set[Place]:
        """Where the values ``chain`` holds in ``fn`` began (empty: none)."""
        chain = _strip(chain)
        if chain.startswith("self.") and fn.self_cls:
            me = fn.self_cls
            return {p for cls, places in self.attrs.get(chain.split(".")[1], {}).items()
                    if cls in classes.mro(me) or me in classes.mro(cls) for p in places}
        return set(self.local.get(fn.fqn, {}).get(_head(chain), ()))

    def reads(self, fn: FnView, s: Stmt, classes: ClassIndex) -> set[Place]:
        """Where the values statement ``s`` reads began."""
        return {p for c in _reads(fn, s) for p in self.origins(fn, c, classes)}


def crossings(functions: dict[str, FnView], sides: dict[str, frozenset[str]],
              classes: ClassIndex, clocks: Collection[str]) -> list[ClockCrossing]:
    """Every worker function that takes a scheduler clock reading off the
    step's metadata which worker code then orders against its own clock
    (see the module docstring)."""
    sched = {f: v for f, v in functions.items() if sides.get(f) == frozenset({"scheduler"})}
    work = {f: v for f, v in functions.items() if sides.get(f) == frozenset({"worker"})}
    fields: dict[str, set[tuple[Place, Place]]] = {}  # field -> {(stamped, carried)}

    def carry(fn: FnView, s: Stmt, chain: str, origins: set[Place]) -> bool:
        f = _field_of(chain)
        if f is not None:
            fields.setdefault(f, set()).update((o, Place(fn.fqn, s.line)) for o in origins)
        return f is not None

    _spread(sched, _Taint(), classes, lambda fn, s: _clock_in(fn, s, clocks), carry)
    if not fields:
        return []
    own = _Taint()
    _spread(work, own, classes, lambda fn, s: _clock_in(fn, s, clocks))
    arrived = _Taint()
    entered: dict[Place, str] = {}  # where a field's value enters worker code -> field

    def arrival(fn: FnView, s: Stmt) -> Place | None:
        f = next((f for c in _reads(fn, s) if (f := _field_of(c)) in fields), None)
        if f is None:
            return None
        entered[Place(fn.fqn, s.line)] = f
        return Place(fn.fqn, s.line)

    _spread(work, arrived, classes, arrival,
            rebased=lambda fn, name: _rebased(fn, name, own, arrived, classes, clocks))

    def direct(fn: FnView, s: Stmt, chain: str) -> set[Place]:
        """A comparison that reads the field itself (``now > meta.F``)."""
        return {p} if (p := arrival(fn, s)) and _field_of(chain) in fields else set()

    out = set()
    for compared, entries in _mixed(work, arrived, own, classes, clocks, direct):
        for entry in entries:
            f = entered[entry]
            # of the connectors that carry a field of that name, the nearest
            stamped, carried = max(sorted(fields[f], key=_order), key=lambda sc: (
                _shared(sc[1].fqn.split("."), entry.fqn.split(".")),
                _shared(sc[0].fqn, entry.fqn)))
            out.add(ClockCrossing(entry.fqn, entry.line, f, stamped, carried, compared))
    return sorted(out, key=lambda c: (c.fqn, c.line, c.field, c.compared.fqn, c.compared.line))


def _order(sc: tuple[Place, Place]) -> tuple:
    return (sc[0].fqn, sc[0].line, sc[1].fqn, sc[1].line)


def _shared(a: Sequence[str], b: Sequence[str]) -> int:
    """How many leading items (dotted parts, characters) two names share."""
    return len(os.path.commonprefix([list(a), list(b)]))


def _spread(fns: dict[str, FnView], taint: _Taint, classes: ClassIndex,
            source: Callable[[FnView, Stmt], Place | None],
            carry: Callable[[FnView, Stmt, str, set[Place]], bool] | None = None,
            rebased: Callable[[FnView, str], bool] | None = None) -> None:
    """Taint what each statement writes when it is a ``source`` or reads a
    tainted chain, over all ``fns`` until nothing changes (``self``
    attributes carry it between functions). ``carry`` takes the writes it
    records elsewhere (a field of another object; keywords of calls are
    offered only then). A local for which ``rebased`` holds carries nothing."""
    changed = True
    while changed:
        changed = False
        for fqn in sorted(fns):
            fn = fns[fqn]
            for s in fn.stmts:
                here = source(fn, s)
                origins = {here} if here else taint.reads(fn, s, classes)
                if not origins:
                    continue
                writes = _writes(fn, s)
                if carry is not None:
                    writes += [f"={k}" for c in fn.calls(s) for k, v in c.kwargs if k and (
                        (v is None and here is not None)
                        or (v is not None and taint.origins(fn, v, classes)))]
                for chain in writes:
                    if carry is not None and carry(fn, s, chain, origins):
                        continue
                    if rebased is not None and "." not in chain and rebased(fn, _head(chain)):
                        continue
                    changed |= taint.mark(fn, chain, origins)


def _rebased(fn: FnView, name: str, own: _Taint, arrived: _Taint, classes: ClassIndex,
             clocks: Collection[str]) -> bool:
    """``name`` is assigned somewhere in ``fn`` from the worker's own clock:
    a clock read, or a value that carries only the worker's clock."""
    for s in fn.stmts:
        if name not in {a.target for a in fn.assigns(s)}:
            continue
        if _clock_in(fn, s, clocks) or any(_own_only(fn, c, own, arrived, classes)
                                           for c in _reads(fn, s)):
            return True
    return False


def _own_only(fn: FnView, chain: str, own: _Taint, arrived: _Taint,
              classes: ClassIndex) -> bool:
    """``chain`` carries the worker's clock and nothing that arrived."""
    return bool(own.origins(fn, chain, classes)) and not arrived.origins(fn, chain, classes)


# methods that read a container's entries: ``m.items()`` reads ``m``
_VIEWS = frozenset({"items", "values", "keys", "get", "copy", "pop", "setdefault"})


def _strip(chain: str) -> str:
    """``metadata.reqs_to_send.items()[]`` -> ``metadata.reqs_to_send``."""
    parts = chain.replace("()", "").replace("[]", "").split(".")
    while len(parts) > 1 and parts[-1] in _VIEWS:
        parts.pop()
    return ".".join(parts)


def _field_of(chain: str) -> str | None:
    """``meta.reqs_to_send`` -> ``reqs_to_send``, a keyword write ``=F`` ->
    ``F``; None for ``self.x``, plain names and calls."""
    if chain.startswith("="):
        return chain[1:]
    parts = _strip(chain).split(".")
    if len(parts) < 2 or parts[0] == "self" or not all(p.isidentifier() for p in parts):
        return None
    return parts[-1]


def _head(chain: str) -> str:
    return chain.split(".")[0].split("[")[0]


def _clock_in(fn: FnView, s: Stmt, clocks: Collection[str]) -> Place | None:
    """This statement itself reads a clock: where, and which."""
    c = next((c.callee for c in fn.calls(s) if _is_clock(c.callee, clocks)), None)
    return Place(fn.fqn, s.line, c) if c else None


def _is_clock(callee: str | None, clocks: Collection[str]) -> bool:
    return bool(callee) and (callee in clocks or f"time.{callee}" in clocks)


def _writes(fn: FnView, s: Stmt) -> list[str]:
    """The chains a statement writes: assignment targets (loop targets bound
    from what it iterates) and containers it adds to."""
    if s.kind == "for":
        return [b.target for b in _loop_binds(fn, s)]
    return [a.target for a in fn.assigns(s)] + \
        [c.container for c in fn.containers(s) if c.op in ADD_OPS]


def _reads(fn: FnView, s: Stmt) -> list[str]:
    """The chains a statement reads (its names less what it only assigns; a
    loop's targets read what they are bound from)."""
    if s.kind == "for":
        return [b.value for b in _loop_binds(fn, s) if b.value] or list(s.names)
    targets = {a.target for a in fn.assigns(s) if not a.aug}
    return [n for n in s.names if n not in targets and n != "self"]


def _loop_binds(fn: FnView, s: Stmt) -> list[AssignFact]:
    """The targets a ``for`` statement binds, each with what it is bound from
    (the facts key them by the line the statement's node starts on, which a
    comment above it moves, so they are matched by name)."""
    heads = {_strip(n) for n in s.names}
    return [b for line, bs in fn.binds.items() if line <= s.line for b in bs
            if b.target in s.names and b.value and _strip(b.value) in heads]


def _mixed(fns: dict[str, FnView], arrived: _Taint, own: _Taint, classes: ClassIndex,
           clocks: Collection[str], direct: Callable[[FnView, Stmt, str], set[Place]]
           ) -> Iterable[tuple[Place, set[Place]]]:
    """Ordering comparisons (and ``min``/``max`` calls) of worker code with an
    arrived value on one side and the worker's own clock on the other:
    ``(where, with the clock read, where the arrived values entered)``."""
    for fqn in sorted(fns):
        fn = fns[fqn]
        for s in fn.stmts:
            ops = [c for c in fn.compares.get(s.line, ()) if set(c.ops) & _ORDERING]
            operands = [o for c in ops for o in c.operands]
            operands += [a for c in fn.calls(s) if c.callee in _EXTREMES for a in c.args if a]
            theirs = {p for x in operands
                      for p in arrived.origins(fn, x, classes) | direct(fn, s, x)}
            if not theirs:
                continue
            mine = _clock_in(fn, s, clocks)
            if mine is None:
                mine = next((p for x in operands if _own_only(fn, x, own, arrived, classes)
                             for p in sorted(own.origins(fn, x, classes), key=_key)), None)
            if mine is not None:
                yield Place(fqn, s.line, mine.what), theirs


def _key(p: Place) -> tuple[str, int]:
    return (p.fqn, p.line)
