"""A finalizer after a failed ``__init__``: Python finalizes an object whose
``__init__`` raised, so ``__del__`` (and the teardown it calls) runs on an
object that has only the attributes set before the failure.

vLLM 0.16.0's NIXL worker raised in ``__init__`` when NIXL was missing,
before it created its handshake executor; ``__del__`` called ``shutdown()``,
which read the executor first, raised ``AttributeError`` and left the rest of
the cleanup undone (fixed in 0.17.0 with ``if not hasattr(self, ...):
return``). The same shape is anywhere a teardown reads what set-up assigns
after a ``raise`` or ``assert``.

Found by structure only: the class (or an analysed base) defines one of the
finalizer names; its ``__init__`` (its own or the nearest analysed base's)
has a ``raise`` or ``assert`` outside any ``try``; the attributes known at
that point are those assigned on ``self`` before it, those a base
``__init__`` called before it assigns, class-level values and members
(methods, properties); the teardown is the finalizer and the methods of the
same object it calls (``self.m()``, three levels). A read under a test of
``hasattr(self, ...)``/``getattr(self, ...)``, after such a test that exits,
or inside a ``try`` with a handler is guarded.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.view import FnView
from kvflowmap.model.classes import ClassIndex

_GUARDS = ("hasattr", "getattr")


@dataclass(frozen=True)
class EarlyRead:
    """``fqn`` (run by ``finalizer`` of ``cls``) reads ``self.<attr>`` at
    ``line``, an attribute ``init`` sets only after what can raise at
    ``fails_at``; ``late`` holds every such attribute the teardown reads."""

    fqn: str
    cls: str
    finalizer: str
    init: str
    fails_at: int
    attr: str
    line: int
    late: tuple[str, ...]


def early_reads(functions: dict[str, FnView], classes: ClassIndex,
                finalizers: Collection[str], depth: int = 3) -> list[EarlyRead]:
    """Per subject class whose finalizer reads attributes its ``__init__``
    may not have set when it raised: the first such read (see the module
    docstring)."""
    out: list[EarlyRead] = []
    for cls in sorted({f.cls for f in functions.values() if f.cls}):
        fin = next((m for name in finalizers
                    if (m := classes.find_member(cls, name)) in functions), None)
        init = classes.find_member(cls, "__init__")
        if fin is None or init not in functions:
            continue
        failing = _known_before_failure(functions, classes, cls, functions[init])
        if failing is None:
            continue
        fails_at, late_set = failing
        reads = _teardown_reads(functions, classes, cls, functions[fin], depth, set())
        late = [(attr, fqn, line) for attr, fqn, line in reads if attr in late_set]
        # subclasses sharing the base's __init__ and teardown: one finding
        if late and not any((r.fqn, r.line, r.init) == (late[0][1], late[0][2], init)
                            for r in out):
            attr, fqn, line = late[0]
            out.append(EarlyRead(fqn, cls, fin, init, fails_at, attr, line,
                                 tuple(dict.fromkeys(a for a, _, _ in late))))
    return out


def _known_before_failure(functions: dict[str, FnView], classes: ClassIndex, cls: str,
                          init: FnView) -> tuple[int, set[str]] | None:
    """(line of the first ``raise``/``assert`` outside a ``try``, the
    attributes ``init`` sets only after it) for ``init``; None when it has
    no such statement. An attribute a class body or a base ``__init__``
    called before the failure also sets is not late."""
    fails_at = _first_failure(init.fact.body)
    if fails_at is None:
        return None
    known = _class_level(classes, cls)
    for s in init.stmts:
        if s.line >= fails_at:
            continue
        known |= _sets(init, s)
        for c in init.calls(s):
            if (c.callee or "").startswith("super().") or (c.callee or "").endswith(".__init__"):
                base = classes.find_member(cls, "__init__", after=init.cls)
                if base in functions:
                    known |= {a for st in functions[base].stmts for a in _sets(functions[base], st)}
    late = {a for s in init.stmts if s.line > fails_at for a in _sets(init, s)}
    return fails_at, late - known


def _sets(fn: FnView, s: Stmt) -> set[str]:
    """Attributes of ``self`` the statement assigns (``self.x = ...``)."""
    return {a.target[5:] for a in fn.assigns(s)
            if a.target.startswith("self.") and "." not in a.target[5:] and "[" not in a.target}


def _first_failure(body: tuple[Stmt, ...]) -> int | None:
    """Line of the first ``raise`` or ``assert`` of a body, outside any
    ``try`` and nested def."""
    for s in body:
        if s.kind in ("def", "class", "try"):
            continue
        if s.kind in ("raise", "assert"):
            return s.line
        for part in (s.body, s.orelse):
            found = _first_failure(part)
            if found is not None:
                return found
    return None


def _class_level(classes: ClassIndex, cls: str) -> set[str]:
    """Names the class and its analysed bases give a value in their bodies."""
    out: set[str] = set()
    for c in classes.mro(cls):
        fact = classes.class_fact(c)
        if fact is not None:
            out.update(fact.members)
    return out


def _teardown_reads(functions: dict[str, FnView], classes: ClassIndex, cls: str, fn: FnView,
                    depth: int, seen: set[str]) -> list[tuple[str, str, int]]:
    """(attribute, function, line) per unguarded read of ``self.<attr>`` in
    ``fn`` and the methods of the same object it calls, in order."""
    seen.add(fn.fqn)
    out: list[tuple[str, str, int]] = []
    for s in _unguarded(fn, fn.fact.body):
        stored = {a.target for a in fn.assigns(s) if not a.aug}  # ``self._x = None``: no read
        for n in s.names:
            if not n.startswith("self.") or n in stored:
                continue
            attr = n[5:].split(".")[0].split("[")[0]
            member = classes.find_member(cls, attr)
            if member is None:
                out.append((attr, fn.fqn, s.line))
            elif member in functions and member not in seen and depth > 1 and \
                    any(c.callee == f"self.{attr}" for c in fn.calls(s)):
                out += _teardown_reads(functions, classes, cls, functions[member],
                                       depth - 1, seen)
    return out


def _unguarded(fn: FnView, body: tuple[Stmt, ...]) -> list[Stmt]:
    """The statements of ``body`` (nested ones included) no guard protects:
    none inside a ``try`` that has handlers, under a ``hasattr``/``getattr``
    test of ``self``, or after such a test whose body exits."""
    out: list[Stmt] = []
    for s in body:
        if s.kind in ("def", "class"):
            continue
        if s.kind == "try" and s.handlers:
            out += _unguarded(fn, s.final)
            continue
        if _tests_self_attr(fn, s):
            if s.kind == "if" and any(b.kind in ("return", "raise") for b in s.body):
                break  # ``if not hasattr(self, "x"): return``: the rest is guarded
            continue
        out.append(s)
        for part in (s.body, s.orelse, s.final, *(h.body for h in s.handlers)):
            out += _unguarded(fn, part)
    return out


def _tests_self_attr(fn: FnView, s: Stmt) -> bool:
    """``s`` asks ``hasattr(self, ...)`` or ``getattr(self, ...)`` itself (an
    ``if`` test, a conditional expression, an ``and``)."""
    return any(c.callee in _GUARDS and c.args[:1] == ("self",) for c in fn.calls(s))
