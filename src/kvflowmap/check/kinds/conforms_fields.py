"""The ``conforms`` field-member check: what the subject reads through one of
its fields exists on every class the field may hold.

Connectors pick their helpers by mode: ``self.kv_send_thread =
LayerSendingThread(...)`` in one branch of ``__init__``,
``SendingThread(...)`` in the other. A method that then reads
``self.kv_send_thread.stored_requests``, which only one of the two has,
raises ``AttributeError`` in the other mode, in a hook, every step
(vllm-ascend 0.18.0's pool worker in layerwise mode; the fix gave the
layerwise thread the member).

For each read or call ``self.F.attr`` in the subject, ``self.F`` is
evaluated; when every value it may have is an instance of an analysed class
of the subject (whole MRO analysed, or from the standard library, no
``__getattr__``), at least two
classes remain once bases of the others are left out (an annotation naming
the common base adds nothing), and some of them have ``attr`` while others
do not, the read is reported. Left alone: a function that asks the field
with ``hasattr``/``getattr``/``isinstance``, and a read under a test that
shares a name with a test deciding which class is assigned (``if
self.use_layerwise:`` on both sides: the mode is known where it is read).
"""

from __future__ import annotations

import re
import sys

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.conforms_contract import fully_analysed
from kvflowmap.check.kinds.conforms_members import known_member
from kvflowmap.check.model import Finding
from kvflowmap.facts import AssignFact, FileFacts, FunctionFact, Stmt
from kvflowmap.lifecycle.view import walk

_FIELD = re.compile(r"^self\.\w+$")
_ASKS = ("hasattr", "getattr", "isinstance")


def subject_modules(ctx: CheckContext) -> list[str]:
    """Every analysed module of the subject."""
    return sorted(m for m, sf in ctx.model.table.files.items()
                  if sf.subject and m in ctx.model.facts)


def check_field_members(ctx: CheckContext, module: str) -> list[Finding]:
    """Reads in ``module`` of a member some class a field may hold lacks."""
    ff = ctx.model.facts[module]
    asked = asked_objects(ff, _ASKS)
    tests = _enclosing_tests(ff)
    out: list[Finding] = []
    seen: set[tuple[str, str]] = set()
    for scope, base, attr, line, col in member_uses(ff):
        if not _FIELD.match(base) or attr.startswith("__") or (scope, base) in seen \
                or (scope, base) in asked:
            continue
        owners = _field_classes(ctx, module, scope, base)
        has = sorted(c for c in owners if known_member(ctx, ctx.classes.mro(c), attr))
        lacking = sorted(c for c in owners if c not in has)
        if not has or not lacking:
            continue
        made = _assignments(ff, scope, base, lacking)
        if not made:
            continue
        modes = set().union(*(mode_names(_tests_around(tests, a.scope, a.line)) for a in made))
        if modes & mode_names(_tests_around(tests, scope, line)) or \
                callers_decide(ctx, f"{module}.{scope}", modes):
            continue
        seen.add((scope, base))  # one finding per field and function: the first read
        names = ", ".join(c.rpartition(".")[2] for c in lacking)
        others = ", ".join(c.rpartition(".")[2] for c in has)
        where = f"{module}.{scope}" if scope else module
        path = tuple(ctx.step(f"{module}.{a.scope}" if a.scope else module, a.line,
                              f"{base} is given a {names} here") for a in made)
        path += tuple(ctx.step(c, ctx.model.defs[c].fact.line, f"{c.rpartition('.')[2]} has "
                               f"no '{attr}'") for c in lacking)
        out.append(ctx.finding(
            where, line, f"{base}.{attr}: {base} may hold a {names} (line {made[0].line}), "
            f"which has no '{attr}' (only {others} has it): AttributeError where this runs "
            "in the mode that builds it", column=col, path=path,
            anchor=f"field-member:{base}.{attr}"))
    return out


def member_uses(ff: FileFacts) -> list[tuple[str, str, str, int, int]]:
    """(scope, base, attr, line, col) of every attribute read and method call
    on a dotted chain (``base.attr``), in source order."""
    uses = [(r.scope, r.base, r.attr, r.line, r.col) for r in ff.reads]
    uses += [(c.scope, head, attr, c.line, c.col) for c in ff.calls if c.callee
             for head, _, attr in [c.callee.rpartition(".")] if head]
    return sorted(set(uses), key=lambda u: (u[3], u[4], u[1], u[2]))


def asked_objects(ff: FileFacts, asks: tuple[str, ...]) -> set[tuple[str, str]]:
    """(scope, object) of each ``hasattr(obj, ...)``-like call in ``asks``: a
    function that asks an object what it has knows its members vary."""
    return {(c.scope, c.args[0]) for c in ff.calls if c.callee in asks and c.args and c.args[0]}


def _field_classes(ctx: CheckContext, module: str, scope: str, base: str) -> set[str]:
    """The subject classes ``base`` may hold, bases of the others left out,
    when it can hold nothing else and there are at least two (else empty)."""
    values = ctx.values.eval((module, scope), base)
    if not values or any(kind != "inst" for kind, _ in values):
        return set()
    owners = {fqn for _, fqn in values}
    if not all(members_known(ctx, c) for c in owners):
        return set()
    leaves = {c for c in owners if not any(c in ctx.classes.mro(o)[1:] for o in owners)}
    return leaves if len(leaves) >= 2 else set()


def members_known(ctx: CheckContext, cls: str) -> bool:
    """A class of the subject (not a vLLM module hosting it) whose members
    are all known: its whole MRO analysed (or from the standard library), no
    ``__getattr__``."""
    sf = ctx.model.source(ctx.model.defs[cls].module) if cls in ctx.model.defs else None
    return ctx.classes.is_class(cls) and sf is not None and sf.subject and not sf.host and \
        analysed_or_stdlib(ctx, cls) and not any(
            ctx.classes.find_member(cls, n) for n in ("__getattr__", "__getattribute__"))


def analysed_or_stdlib(ctx: CheckContext, cls: str) -> bool:
    """Every class along the MRO is analysed, or comes from the standard
    library (a ``threading.Thread`` subclass: the thread's own members are
    not what connectors add)."""
    return fully_analysed(ctx, cls) or all(
        ctx.classes.is_class(k) or k.split(".")[0] in sys.stdlib_module_names
        for k in ctx.classes.mro(cls))


def _assignments(ff: FileFacts, scope: str, base: str, lacking: list[str]) -> list[AssignFact]:
    """The assignments of ``base`` in the reading method's class that build
    one of the ``lacking`` classes (``self.t = LayerThread(...)``)."""
    cls = scope.split(".")[0]
    names = {c.rpartition(".")[2] for c in lacking}
    return sorted((a for a in ff.assigns if a.target == base and a.scope.split(".")[0] == cls
                   and (a.value or "").split("(")[0].rpartition(".")[2] in names),
                  key=lambda a: a.line)


def _enclosing_tests(ff: FileFacts) -> dict[tuple[str, int], set[str]]:
    """Per (function, line), the names the ``if``/``while`` tests around the
    statement on that line read."""
    out: dict[tuple[str, int], set[str]] = {}

    def visit(scope: str, body: tuple[Stmt, ...], around: frozenset[str]) -> None:
        for s in body:
            out.setdefault((scope, s.line), set()).update(around)
            inner = around | frozenset(s.names) if s.kind in ("if", "while") else around
            visit(scope, s.body, inner)
            visit(scope, s.orelse, inner)
            visit(scope, s.handlers, around)
            visit(scope, s.final, around)

    for fn in ff.functions:
        visit(fn.qualname, fn.body, frozenset())
    return out


def callers_decide(ctx: CheckContext, fqn: str, modes: set[str], depth: int = 1,
                   exits: tuple[str, ...] = ("return", "raise")) -> bool:
    """Every call of ``fqn`` sits under, or after an early exit on, a test
    that reads one of the ``modes`` (``if self.use_layerwise: return`` before
    ``self.worker.wait_for_save(...)``): the mode is known where it is called.
    Calls are the call graph's (a method handed on as a value,
    ``Thread(target=self.send_async)``, counts). With ``depth`` above 1, a
    call in a function whose own callers all decide counts too (that many
    levels up). ``exits`` are the statements that end a test early
    (``decided_at``)."""
    if not modes or fqn not in ctx.graph:
        return False
    sites = sorted({(u, int(d.get("line") or 0)) for u, _, d in ctx.graph.in_edges(fqn, data=True)
                    if d.get("kind") in ("call", "dispatch")})
    if not sites:
        return False
    for caller, line in sites:
        d = ctx.model.defs.get(caller)
        if d is None or not isinstance(d.fact, FunctionFact):
            return False
        if not decided_at(d.fact, line, exits) & modes and not (
                depth > 1 and callers_decide(ctx, caller, modes, depth - 1, exits)):
            return False
    return True


def decided_at(fn: FunctionFact, line: int,
               exits: tuple[str, ...] = ("return", "raise"), asserts: bool = True) -> set[str]:
    """The names of the tests of ``fn`` that ``line`` sits under, or that
    end in an early exit (one of ``exits``) before it (``if self.send_type
    == "PUT": return``), and with ``asserts`` of the ``assert`` statements
    on the way to it (``_asserts_before``)."""
    # the statement the line belongs to (a call's argument may sit on a
    # continuation line)
    line = max((s.line for s in walk(fn.body) if s.line <= line), default=line)
    seen: set[str] = set()
    for s in walk(fn.body):
        if s.line > line:
            break
        if s.kind in ("if", "while") and (
                holds(s, line) or any(x.kind in exits for x in walk(s.body))):
            seen |= mode_names(set(s.names))
    # an ``assert`` on the way to the line ends every other mode there
    for a in _asserts_before(fn.body, line) if asserts else ():
        seen |= mode_names(set(a.names))
    return seen


def _asserts_before(body: tuple[Stmt, ...], line: int) -> list[Stmt]:
    """The ``assert`` statements that run before ``line``: earlier in its
    statement list or in a list around it, or first in the body of an ``if``
    before it (``if reqs: assert self.is_producer`` and then ``for r in
    reqs: ...``: the loop runs only where the test held)."""
    out: list[Stmt] = []
    for s in body:
        if s.line > line:
            break
        if s.line == line:
            return out
        if s.kind == "assert":
            out.append(s)
            continue
        for part in (s.body, s.orelse, s.final, *(h.body for h in s.handlers)):
            if any(x.line == line for x in walk(part)):
                return out + _asserts_before(part, line)
        if s.kind == "if":
            out += [x for x in s.body if x.kind == "assert"]
    return out


def holds(s: Stmt, line: int) -> bool:
    """``line`` is inside the body or ``else`` of ``s``."""
    return any(x.line == line for x in walk((*s.body, *s.orelse)))


def _tests_around(tests: dict[tuple[str, int], set[str]], scope: str, line: int) -> set[str]:
    """The tests around the statement of ``scope`` that starts last at or
    before ``line`` (a read may sit on a continuation line)."""
    starts = [ln for (sc, ln) in tests if sc == scope and ln <= line]
    return tests[(scope, max(starts))] if starts else set()


def mode_names(found: set[str]) -> set[str]:
    # ``self.use_layerwise`` and ``use_layerwise`` (a parameter copied to
    # the field) are one mode; ``self`` alone says nothing
    return {n.rpartition(".")[2] for n in found if n != "self"}
