"""The ``conforms`` mode-field check: a field a method reads is set in every
mode the constructor can build.

Connectors set up per mode: ``if send_type == "PUT": self.sent_ids = {}`` in
``__init__``, nothing in the other arm. A method that reads
``self.sent_ids`` with no test of that mode raises ``AttributeError`` when
the object was built in the other one; in a listener thread's loop that
kills the thread, and the peer that waits for its answer waits for good
(vLLM 0.10.2's P2P NCCL engine in GET mode; 0.11.0 sets the field in every
mode).

For each class of the subject whose whole MRO is analysed (or from the
standard library) and has no ``__getattr__``: a field its ``__init__``
assigns, not on every way out of it (an ``if`` arm, a loop body, a ``try``
whose handler carries on, or before an early ``return``), that no other
method of the class, its bases or its subclasses assigns and no class body
declares, is a *mode field*. A read of it in a method of the class or a
subclass is reported unless the method asks for it (``hasattr``/``getattr``
of ``self``), the read sits under a test sharing a name with a test around
the assignment (``if self.send_type == "GET":`` on both sides), or every
caller of the method tests the mode first (``conforms_fields.callers_decide``).
"""

from __future__ import annotations

from collections.abc import Iterable

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.conforms_fields import (analysed_or_stdlib, callers_decide,
                                                   decided_at, enclosing_tests, mode_names, tests_around)
from kvflowmap.check.model import Finding
from kvflowmap.facts import AssignFact, ClassFact, FileFacts, FunctionFact, Stmt

# outcomes of a statement list for one field: assigned, returned without it,
# fell through without it (a raise has none: no object is built)
_SET, _RETURNED, _FELL = "set", "returned", "fell"


def check_mode_fields(ctx: CheckContext, module: str) -> list[Finding]:
    """Reads in ``module`` of a field the constructor sets only in some modes."""
    ff = ctx.model.facts[module]
    tests: dict[str, dict[tuple[str, int], set[str]]] = {}
    out: list[Finding] = []
    for cf in ff.classes:
        cls = f"{module}.{cf.qualname}"
        init = _init_of(ff, cf)
        if init is None or not _members_known(ctx, cls):
            continue
        assigned = _assigned_in(ff, init)
        if not assigned:
            continue
        fixed = _set_elsewhere(ctx, cls, init.qualname) | _declared(ctx, cls)
        if "*" in fixed:
            continue
        for field in sorted(assigned.keys() - fixed):
            if _outcomes(init.body, field, ff) <= {_SET}:
                continue
            out += _reads(ctx, cls, field, assigned[field], tests)
    return out


def _init_of(ff: FileFacts, cf: ClassFact) -> FunctionFact | None:
    return next((f for f in ff.functions if f.class_qualname == cf.qualname
                 and f.name == "__init__"), None)


def _members_known(ctx: CheckContext, cls: str) -> bool:
    """Every class along the MRO is known, none answers unknown names, and
    none sets attributes by name (``setattr(self, name, v)``)."""
    return ctx.classes.is_class(cls) and analysed_or_stdlib(ctx, cls) and not any(
        ctx.classes.find_member(cls, n) for n in ("__getattr__", "__getattribute__",
                                                  "__slots__"))


def _assigned_in(ff: FileFacts, fn: FunctionFact) -> dict[str, list[AssignFact]]:
    """Per ``self`` field, the assignments of ``fn`` itself."""
    out: dict[str, list[AssignFact]] = {}
    for a in ff.assigns:
        if a.scope == fn.qualname and a.target.startswith("self.") and \
                a.target[5:].isidentifier():
            out.setdefault(a.target[5:], []).append(a)
    return out


def _set_elsewhere(ctx: CheckContext, cls: str, init: str) -> set[str]:
    """Fields some other method of the class, of a class on its MRO, or of a
    subclass assigns (``self.x = ...``, ``setattr(self, "x", ...)``); ``*``
    when one sets attributes by a computed name."""
    out: set[str] = set()
    for c in {*ctx.classes.mro(cls), *ctx.classes.all_subclasses(cls)}:
        d = ctx.model.defs.get(c)
        ff = ctx.model.facts.get(d.module) if d is not None else None
        if ff is None or d is None:
            continue
        qual = c[len(d.module) + 1:]
        out |= {a.target[5:] for a in ff.assigns if a.target.startswith("self.")
                and a.scope.rpartition(".")[0] == qual and a.scope != init}
        for call in ff.calls:
            if call.callee == "setattr" and call.scope.rpartition(".")[0] == qual and \
                    call.args and call.args[0] == "self":
                lit = call.literal_args[1] if len(call.literal_args) > 1 else None
                out.add(lit or "*")
    return out


def _declared(ctx: CheckContext, cls: str) -> set[str]:
    """Fields a class body along the MRO declares or gives a value."""
    out: set[str] = set()
    for c in ctx.classes.mro(cls):
        d = ctx.model.defs.get(c)
        ff = ctx.model.facts.get(d.module) if d is not None else None
        cf = next((k for k in ff.classes if f"{d.module}.{k.qualname}" == c), None) \
            if ff is not None and d is not None else None
        if cf is not None:
            out |= {n for n, _ in cf.attributes} | set(cf.members)
    return out


def _outcomes(body: Iterable[Stmt], field: str, ff: FileFacts) -> set[str]:
    """How the statements can end for ``field``: set, returned or fell
    through without it (see the module constants)."""
    ends = {_FELL}
    for st in body:
        if _FELL not in ends:
            break
        ends = (ends - {_FELL}) | _stmt(st, field, ff)
    return ends


def _stmt(st: Stmt, field: str, ff: FileFacts) -> set[str]:
    target = f"self.{field}"
    if any(kind == "assign" and ff.assigns[i].target == target for kind, i in st.events):
        return {_SET}
    if st.kind == "raise":
        return set()
    if st.kind == "return":
        return {_RETURNED}
    if st.kind == "if":
        return _outcomes(st.body, field, ff) | _else(st.orelse, field, ff)
    if st.kind in ("for", "while"):
        return _outcomes(st.body, field, ff) | _outcomes(st.orelse, field, ff)
    if st.kind == "try":
        ends = _outcomes(st.body, field, ff)
        for h in st.handlers:
            ends |= _outcomes(h.body, field, ff)
        if st.final and _outcomes(st.final, field, ff) == {_SET}:
            return {_SET}
        return ends
    if st.kind in ("with", "match"):
        return _outcomes(st.body, field, ff) | ({_FELL} if st.kind == "match" else set())
    return {_FELL}


def _else(orelse: tuple[Stmt, ...], field: str, ff: FileFacts) -> set[str]:
    """The ``else`` side of an ``if``. An ``elif`` chain with no ``else``
    names every mode there is (``if role == SCHEDULER: ... elif role ==
    WORKER: ...``): its last test failing builds no object anyone uses."""
    if len(orelse) == 1 and orelse[0].kind == "if":
        elif_ = orelse[0]
        return _outcomes(elif_.body, field, ff) | (
            _else(elif_.orelse, field, ff) if elif_.orelse else set())
    return _outcomes(orelse, field, ff)


def _reads(ctx: CheckContext, cls: str, field: str, made: list[AssignFact],
           tests: dict[str, dict[tuple[str, int], set[str]]]) -> list[Finding]:
    """The first read of ``self.<field>`` per method of ``cls`` or a subclass
    that no test of the mode guards (``tests``: ``enclosing_tests`` per
    module, filled as needed)."""
    def around(module: str, scope: str, line: int) -> set[str]:
        if module not in tests:
            tests[module] = enclosing_tests(ctx.model.facts[module])
        return mode_names(tests_around(tests[module], scope, line))

    home = ctx.model.defs[cls].module
    modes = set().union(*(around(home, a.scope, a.line) for a in made)) - {field}
    out: list[Finding] = []
    for c in sorted({cls, *ctx.classes.all_subclasses(cls)}):
        d = ctx.model.defs.get(c)
        ff = ctx.model.facts.get(d.module) if d is not None else None
        if ff is None or d is None:
            continue
        qual = c[len(d.module) + 1:]
        asked = {call.scope for call in ff.calls if call.callee in ("hasattr", "getattr")
                 and call.args and call.args[0] == "self"
                 and (len(call.literal_args) < 2 or call.literal_args[1] in (None, field))}
        stores = {(a.scope, a.line) for a in ff.assigns if a.target == f"self.{field}"}
        seen: set[str] = set()
        for r in sorted(ff.reads, key=lambda r: (r.line, r.col)):
            if r.base != "self" or r.attr != field or r.scope.rpartition(".")[0] != qual or \
                    r.scope.endswith(".__init__") or r.scope in seen or r.scope in asked or \
                    (r.scope, r.line) in stores:
                continue
            fqn = f"{d.module}.{r.scope}"
            fn = next(f for f in ff.functions if f.qualname == r.scope)
            if modes & (around(d.module, r.scope, r.line) | decided_at(fn, r.line)) or (
                    modes and callers_decide(ctx, fqn, modes)):
                continue
            seen.add(r.scope)
            out.append(_finding(ctx, cls, field, made, fqn, r.line, r.col))
    return out


def _finding(ctx: CheckContext, cls: str, field: str, made: list[AssignFact], fqn: str,
             line: int, col: int) -> Finding:
    module = ctx.model.defs[cls].module
    init = f"{module}.{made[0].scope}"
    path = tuple(ctx.step(init, a.line, f"self.{field} is set here, in some modes only")
                 for a in made)
    name = cls.rpartition(".")[2]
    return ctx.finding(
        fqn, line, f"self.{field} is set by {name}.__init__ (line {made[0].line}) only on "
        f"some of its ways out (under a test, in a loop, or after a handler that carries "
        f"on), and read here with no test of that mode: AttributeError on an object built "
        f"the other way", column=col, path=path, anchor=f"mode-field:{field}")
