"""Asserted entries: an ``assert`` that a request's entry is still there,
in a container another function takes entries out of.

``meta = self._recving.pop(req_id, None); assert meta is not None`` says
the entry may be missing (the ``None`` default) and then crashes the hook
when it is: an ``AssertionError`` out of ``get_finished`` or
``request_finished`` kills the engine with every request on it. Whether it
can be missing is decided by the other ways out of the container: when
another function removes entries from it (a failure handler, a preemption
arm, an abort), the entry of a request that went that way is gone when the
asserting code runs for it (vLLM 0.13.0's NIXL worker: ``_handle_failed_transfer``
popped ``_recving_metadata`` and still reported the request, whose
``get_finished`` then asserted the entry). A container only the asserting
function empties is left alone, and so are the removals that end a
request: in what the delayed-free hook (``request_finished``) makes run, and
in a loop over the finished ids (``for req_id in finished_req_ids``): after
them no hook runs for the request. A removal its function follows with an
add to the same container replaces the entry (a tracker renewed on
preemption) and is no way out, nor is one in an except handler after the
function's own add (a rollback). A removal under a test that reads a field
set where requests end (``if status.finished_signaled and not jobs:``)
ends a request too.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.containers import ADD_OPS, REMOVE_OPS, RESET_OPS, Container, container_of
from kvflowmap.lifecycle.effects import Effects
from kvflowmap.lifecycle.locks import SETUP
from kvflowmap.lifecycle.view import FnView, walk
from kvflowmap.model.classes import ClassIndex

_FETCH = frozenset({"get", "pop"})


@dataclass(frozen=True)
class Asserted:
    """``fqn`` asserts at ``line`` that the entry of ``container`` it read at
    ``fetch_line`` is there, while ``remover`` takes entries out of it at
    ``remover_line``."""

    fqn: str
    line: int
    fetch_line: int
    container: Container
    remover: str
    remover_line: int
    # assert | del (``del c[k]``: a KeyError where it is gone) | del-unadded
    # (``del c[k]`` where the request ends, of an entry only an earlier hook
    # puts in: ``remover`` is that hook, the add at ``remover_line``)
    claim: str = "assert"


def asserted_entries(fns: dict[str, FnView], eff: Effects, keyed: Collection[Container],
                     judged: Collection[str], ending: Collection[str],
                     finished_params: Collection[str], classes: ClassIndex) -> list[Asserted]:
    """Every assert in the ``judged`` functions that an entry of a
    request-keyed container (``keyed``) is present, read with a default
    (``c.get(k)``, ``c.pop(k, None)``) or tested (``k in c``), where another
    judged function (not a constructor) removes entries from the container
    before the request ends: not in an ``ending`` function (what the
    delayed-free hook makes run), not in a loop over ``finished_params``.
    A removal in a base or a subclass of the asserting code's class (a base
    ``get_finished`` expiring what a subclass's notification handler
    deletes) works on the same instance's container; one in a sibling
    class does not."""
    flags = _end_flags(fns, judged, ending, finished_params)
    removals: dict[Container, list[tuple[str, int]]] = {}
    adds: dict[Container, list[tuple[str, int]]] = {}
    for f in sorted(judged):
        fn = fns.get(f)
        if fn is None or fn.name in SETUP or f in ending:
            continue
        ops = [_Op(s.line, op.op, c, op.key, loop, handler)
               for s, loop, handler in _alive(fn.fact.body, finished_params, flags)
               for op in fn.containers(s)
               if (c := container_of(op.container, fn, eff.values)) is not None
               and (c in keyed or _keyed_on_instance(c, keyed, classes))]
        for r in ops:
            if r.op in REMOVE_OPS | RESET_OPS and not any(_undone(r, a) for a in ops):
                removals.setdefault(r.container, []).append((f, r.line))
            elif r.op in ADD_OPS:
                adds.setdefault(r.container, []).append((f, r.line))
    out = []
    for f in sorted(judged):
        fn = fns.get(f)
        if fn is None or fn.name in SETUP:
            continue
        fetched: dict[str, tuple[Container, int]] = {}
        claims: list[tuple[int, Container, int, str]] = []
        for s in fn.stmts:
            fetched.update(_fetches(fn, eff, s, keyed))
            if s.kind == "assert":
                claims += [(s.line, c, at, "assert") for c, at in
                           _asserted(fn, eff, s.text or "", fetched, keyed, s.line)]
        # ``del c[k]`` asserts the entry too: a KeyError where it is gone
        claims += [(line, c, line, "del") for line, c in _bare_dels(fn, eff, keyed)]
        for line, c, at, how in sorted(claims, key=lambda x: (x[0], x[1].label)):
            others = [(g, ln) for c2 in _same_instance(c, removals, classes)
                      for g, ln in removals[c2] if g != f]
            if others and not _filled_by_callers(fns, eff, f, c, keyed):
                out += [Asserted(f, line, at, c, g, ln, how) for g, ln in others]
            elif how == "del" and _ends_here(fn.fact.body, line, f in ending, finished_params):
                out += _unadded(fns, eff, f, line, c, keyed, classes, adds)
    return out


def _unadded(fns: dict[str, FnView], eff: Effects, f: str, line: int, c: Container,
             keyed: Collection[Container], classes: ClassIndex,
             adds: dict[Container, list[tuple[str, int]]]) -> list[Asserted]:
    """``del c[k]`` where the request ends (``request_finished`` runs for every
    request, also one aborted before any other hook saw it) of an entry that
    only other hooks put in: the request that skipped them ends in a
    ``KeyError``."""
    adders = [(g, ln) for c2 in _same_instance(c, adds, classes) for g, ln in adds[c2]]
    if not adders or any(g == f for g, _ in adders) or _adds_before(fns, eff, f, line, c, keyed) \
            or _filled_by_callers(fns, eff, f, c, keyed):
        return []
    return [Asserted(f, line, line, c, g, ln, "del-unadded") for g, ln in sorted(adders)]


def _ends_here(body: tuple[Stmt, ...], line: int, ending: bool,
               finished: Collection[str]) -> bool:
    """``line`` runs for every request that ends: straight in the body of an
    ``ending`` function (no test decides whether it runs), or straight in a
    loop over the finished ids (``for rid in finished_req_ids: del c[rid]``)."""
    for s in body:
        if s.line == line and s.kind not in _COMPOUND:
            return ending
        if s.kind == "with" and _ends_here(s.body, line, ending, finished):
            return True
        if _finished_loop(s, finished) and s.kind == "for" and \
                _ends_here(s.body, line, True, finished):
            return True
    return False


def _keyed_on_instance(c: Container, keyed: Collection[Container], classes: ClassIndex) -> bool:
    """``c`` is a request-keyed container of a subclass, seen from a base
    method (the base only expires what the subclass keys by request)."""
    return any(k.attr == c.attr and c.owner in classes.mro(k.owner) for k in keyed)


def _same_instance(c: Container, removals: dict[Container, list[tuple[str, int]]],
                   classes: ClassIndex) -> list[Container]:
    """The containers of ``removals`` that are ``c`` on one instance: the
    same attribute of ``c``'s owner, of a base of it, or of a subclass."""
    return sorted((c2 for c2 in removals if c2.attr == c.attr and (
        c2.owner == c.owner or c2.owner in classes.mro(c.owner)
        or c.owner in classes.mro(c2.owner))), key=lambda x: x.owner)


def _bare_dels(fn: FnView, eff: Effects, keyed: Collection[Container]
               ) -> list[tuple[int, Container]]:
    """``del c[k]`` (or ``c.pop(k)``) of a request's entry with nothing that says it is there:
    no ``k in c`` test around it, not in a loop over ``c`` itself, not in a
    ``try`` that handles the ``KeyError``."""
    out: list[tuple[int, Container]] = []

    def visit(body: tuple[Stmt, ...], context: tuple[str, ...]) -> None:
        for s in body:
            raising = _raising_pops(fn, s)
            for op in fn.containers(s) if s.kind not in _COMPOUND else ():
                if op.op != "delitem" and (op.op != "pop" or op.container not in raising):
                    continue
                c = container_of(op.container, fn, eff.values)
                chain = op.container.replace("[]", "")
                if c is None or c not in keyed or any(chain in t for t in context):
                    continue
                out.append((op.line, c))
            inner = context + ((s.text or ""),) if s.kind in ("if", "while", "for") else context
            visit(s.body, inner)
            visit(s.orelse, inner)
            visit(s.final, context)
            for h in s.handlers:
                visit(h.body, context)

    visit(fn.fact.body, ())
    sure = _present(fn, eff)
    # in a ``try`` with handlers: the KeyError is caught
    return [(ln, c) for ln, c in out
            if c not in sure and not _in_handled_try(fn.fact.body, ln)]


def _raising_pops(fn: FnView, s: Stmt) -> set[str]:
    """Chains statement ``s`` pops one key from with no default
    (``c.pop(k)``): like ``del c[k]``, a ``KeyError`` where it is gone. An
    integer argument is a list's index, no key."""
    return {c.callee[:-len(".pop")] for c in fn.calls(s)
            if c.callee and c.callee.endswith(".pop") and len(c.args) == 1 and not c.kwargs
            and not (c.args[0] or "").lstrip("-").isdigit()}


def _present(fn: FnView, eff: Effects) -> set[Container]:
    """Containers whose deleted keys ``fn`` knows are there: it walks the
    container (``[k for k, v in c.items() if ...]``, then ``del c[k]``), or,
    with no ``await`` to let other code in, it touches the entry before (a
    ``c[k]`` read would have raised first, a ``c.get(k)`` was tested, it put
    the entry in itself)."""
    out: set[Container] = set()
    for s in fn.stmts:
        for n in s.names:
            chain, _, last = n.rpartition(".")
            if last in ("items", "keys", "values") and chain:
                c = container_of(chain, fn, eff.values)
                if c is not None:
                    out.add(c)
        if s.kind == "for":
            c = container_of((s.text or "").partition(" in ")[2].strip(), fn, eff.values)
            if c is not None:
                out.add(c)
    if not fn.fact.is_async:
        for s in fn.stmts:
            if _compound_test(s):
                # ``if k not in A and k not in B: continue`` leaves k in A *or* B
                continue
            ops = fn.containers(s)
            raising = _raising_pops(fn, s)
            dels = {op.container for op in ops if op.op == "delitem"} | raising
            for n in s.names:
                if n in dels or n.removesuffix(".pop") in raising:
                    continue
                c = container_of(n, fn, eff.values)
                if c is not None:
                    out.add(c)
            for op in ops:
                c = container_of(op.container, fn, eff.values)
                if c is not None and op.container not in dels:
                    out.add(c)
    return out


def _compound_test(s: Stmt) -> bool:
    """A test that joins conditions (``and``/``or``): naming a container in
    it says nothing about which one holds the key afterwards."""
    return s.kind in ("if", "while") and \
        re.search(r"\s(and|or)\s", s.text or "") is not None


_COMPOUND = frozenset({"if", "for", "while", "try", "with", "match", "case", "def", "class"})


def _in_handled_try(body: tuple[Stmt, ...], line: int) -> bool:
    for s in body:
        if s.kind == "try" and s.handlers and any(x.line == line for x in walk(s.body)):
            return True
        for part in (s.body, s.orelse, s.final, *(h.body for h in s.handlers)):
            if _in_handled_try(part, line):
                return True
    return False


@dataclass(frozen=True)
class _Op:
    """A change of a request-keyed container, with the innermost loop around
    it (its line; 0: none) and whether an except handler holds it."""

    line: int
    op: str
    container: Container
    key: str | None
    loop: int
    handler: bool


def _undone(removal: _Op, add: _Op) -> bool:
    """``add`` makes ``removal`` no way out: it puts the same key back later
    in the same loop turn (a tracker renewed), or ``removal`` is an except
    handler's rollback of the function's own earlier add."""
    if add.op not in ADD_OPS or add.container != removal.container:
        return False
    if removal.handler and add.line < removal.line:
        return True
    return add.line > removal.line and add.key == removal.key and add.loop == removal.loop


def _alive(body: tuple[Stmt, ...], finished: Collection[str], flags: Collection[str],
           loop: int = 0, handler: bool = False) -> Iterator[tuple[Stmt, int, bool]]:
    """Statements of ``body`` (nested too) outside loops over finished ids
    and outside the arms of tests that read an end flag (``flags``), each
    with its innermost loop and whether it is in an except handler."""
    for s in body:
        if _finished_loop(s, finished):
            continue
        yield s, loop, handler
        inner = s.line if s.kind in ("for", "while") else loop
        ended = s.kind == "if" and any(
            re.search(rf"\.{re.escape(fl)}\b", s.text or "") for fl in flags)
        for part in ((s.orelse,) if ended else (s.body, s.orelse)) + (s.final,):
            yield from _alive(part, finished, flags, inner, handler)
        for h in s.handlers:
            yield from _alive(h.body, finished, flags, inner, True)


def _finished_loop(s: Stmt, finished: Collection[str]) -> bool:
    return s.kind in ("for", "while") and any(
        p in (s.text or "").partition(" in ")[2] for p in finished)


def _end_flags(fns: dict[str, FnView], judged: Collection[str], ending: Collection[str],
               finished: Collection[str]) -> set[str]:
    """Attribute names set where a request ends (in an ``ending`` function or
    a loop over finished ids: ``status.finished_signaled = True``): a test
    reading one picks requests that have ended."""
    out: set[str] = set()

    def visit(fn: FnView, body: tuple[Stmt, ...], ended: bool) -> None:
        for s in body:
            inner = ended or _finished_loop(s, finished)
            if inner:
                out.update(a.target.rpartition(".")[2] for a in fn.assigns(s)
                           if "." in a.target and "[" not in a.target)
            for part in (s.body, s.orelse, s.final, s.handlers):
                visit(fn, part, inner)

    for f in judged:
        if (fn := fns.get(f)) is not None and fn.name not in SETUP:
            visit(fn, fn.fact.body, f in ending)
    return out


def _filled_by_callers(fns: dict[str, FnView], eff: Effects, target: str, c: Container,
                       keyed: Collection[Container]) -> bool:
    """Every analysed call of ``target`` follows, in its caller, an add to
    ``c`` (made there or by a function called before): ``submit(rid);
    check(rid)``, where ``check`` asserts what ``submit`` just put in; or
    is in the arm of a test that the key is in ``c``."""
    sites = [(g, call.line) for g, fn in fns.items() for call in fn.all_calls
             if any(t.fqn == target for t in eff.calls.resolve(fn.ctx, call))]
    return bool(sites) and all(_adds_before(fns, eff, g, line, c, keyed)
                               or _tested_around(fns[g], eff, fns[g].fact.body, line, c)
                               for g, line in sites)


def _tested_around(fn: FnView, eff: Effects, body: tuple[Stmt, ...], line: int,
                   c: Container) -> bool:
    """``line`` is in the arm of a test that the key is in ``c``
    (``if rid in self.c: self._remove(rid)``), or after a guard in the same
    block that leaves when it is not (``if rid not in self.c: continue``),
    so the entry is there."""
    for i, s in enumerate(body):
        if s.kind == "if" and any(x.line == line for x in walk(s.body)) and \
                _tests_in(fn, eff, s.text or "", c):
            return True
        if any(x.line == line for x in walk((s,))) and any(
                _exits_unless_in(fn, eff, g, c) for g in body[:i]):
            return True
        for part in (s.body, s.orelse, s.final, *(h.body for h in s.handlers)):
            if _tested_around(fn, eff, part, line, c):
                return True
    return False


_EXITS = ("continue", "return", "break", "raise")


def _exits_unless_in(fn: FnView, eff: Effects, s: Stmt, c: Container) -> bool:
    """``if k not in c or ...: continue`` (no ``else``): past it the key is in ``c``."""
    if s.kind != "if" or s.orelse or not s.body or s.body[-1].kind not in _EXITS:
        return False
    try:
        node = ast.parse(s.text or "", mode="eval").body
    except SyntaxError:
        return False
    parts = node.values if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) \
        else [node]
    return any(isinstance(p, ast.Compare) and len(p.ops) == 1 and isinstance(p.ops[0], ast.NotIn)
               and container_of(ast.unparse(p.comparators[0]), fn, eff.values) == c
               for p in parts)


def _tests_in(fn: FnView, eff: Effects, text: str, c: Container) -> bool:
    """The test ``text`` holds only where some key is in ``c``: ``k in c``,
    alone or as a part of an ``and``."""
    return any(_in_container(fn, eff, p) == c for p in _conjuncts(text))


def _conjuncts(text: str) -> list[ast.expr]:
    """The parts of a test that all hold when it does: the test itself, or
    the operands of its ``and`` (of an assert's test, not its message)."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return []
    if isinstance(node, ast.Tuple) and node.elts:  # ``assert test, message``
        node = node.elts[0]
    return list(node.values) if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And) \
        else [node]


def _in_container(fn: FnView, eff: Effects, p: ast.expr) -> Container | None:
    """The container of a ``k in c`` part; None for any other part."""
    if isinstance(p, ast.Compare) and len(p.ops) == 1 and isinstance(p.ops[0], ast.In):
        return container_of(ast.unparse(p.comparators[0]), fn, eff.values)
    return None


def _adds_before(fns: dict[str, FnView], eff: Effects, g: str, line: int, c: Container,
                 keyed: Collection[Container]) -> bool:
    fn = fns[g]
    for s in fn.stmts:
        if s.line >= line:
            continue
        if any(op.op in ADD_OPS and container_of(op.container, fn, eff.values) == c
               for op in fn.containers(s)):
            return True
        for call in fn.calls(s):
            for t in eff.calls.resolve(fn.ctx, call):
                h = fns.get(t.fqn)
                if h is not None and any(
                        op.op in ADD_OPS and container_of(op.container, h, eff.values) == c
                        for op in h.all_containers):
                    return True
    return False


def _fetches(fn: FnView, eff: Effects, s, keyed: Collection[Container]
             ) -> dict[str, tuple[Container, int]]:
    """Locals statement ``s`` binds to an entry read with a default:
    ``v = c.get(k)``, ``v = c.pop(k, None)``."""
    out = {}
    calls = {c.callee: c for c in fn.calls(s) if c.callee}
    for a in fn.assigns(s):
        if "." in a.target or not a.value or not a.value.endswith("()"):
            continue
        chain, _, meth = a.value[:-2].rpartition(".")
        call = calls.get(a.value[:-2])
        if meth not in _FETCH or call is None or not call.args:
            continue
        if meth == "pop" and len(call.args) < 2:
            continue  # ``pop(k)`` raises on a missing key: no default asked for
        c = container_of(chain, fn, eff.values)
        if c is not None and c in keyed:
            out[a.target] = (c, s.line)
    return out


def _asserted(fn: FnView, eff: Effects, text: str, fetched: dict[str, tuple[Container, int]],
              keyed: Collection[Container], line: int) -> list[tuple[Container, int]]:
    """Containers whose entry the assert's test claims: ``v``, ``v is not
    None`` for a fetched local (``and`` parts too), ``k in c``."""
    out = []
    for p in _conjuncts(text):
        if isinstance(p, ast.Compare) and len(p.ops) == 1 and isinstance(p.ops[0], ast.IsNot) \
                and isinstance(p.comparators[0], ast.Constant) and p.comparators[0].value is None:
            p = p.left
        c = _in_container(fn, eff, p)
        if isinstance(p, ast.Name) and p.id in fetched:
            out.append(fetched[p.id])
        elif c is not None and c in keyed:
            out.append((c, line))
    return out
