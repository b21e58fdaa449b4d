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
the assignment (``if self.send_type == "GET":`` on both sides) or naming
the same mode constant in its true arm (``if cmd == "GET":``), or every
caller of the method tests the mode first (``conforms_fields.callers_decide``).
A field set under a test of the connector's role (the protocol's
``role_tests``) is left alone: vLLM calls each half only on its own side.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.conforms_fields import (callers_decide, decided_at, members_known,
                                                   mode_names)
from kvflowmap.lifecycle.view import walk
from kvflowmap.check.model import Finding
from kvflowmap.facts import AssignFact, AttrReadFact, ClassFact, FileFacts, FunctionFact, Stmt

# outcomes of a statement list for one field: assigned, returned without it,
# fell through without it (a raise has none: no object is built)
_SET, _RETURNED, _FELL = "set", "returned", "fell"


def check_mode_fields(ctx: CheckContext, module: str) -> list[Finding]:
    """Reads in ``module`` of a field the constructor sets only in some modes."""
    ff = ctx.model.facts[module]
    memo: dict[str, _SelfReads | None] = {}
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
        stops = _stopper(ctx, f"{module}.{init.qualname}", ff)
        # fields set together (same deciding tests) are one finding
        groups: dict[int, list[tuple[str, list[AssignFact], list[tuple[str, int]]]]] = {}
        for field in sorted(assigned.keys() - fixed):
            if _outcomes(init.body, field, ff, stops) <= {_SET}:
                continue
            reads = _reads(ctx, cls, init, field, assigned[field], memo)
            if reads:
                groups.setdefault(_block_of(init.body, assigned[field][0].line),
                                  []).append((field, assigned[field], reads))
        out += [_finding(ctx, cls, sorted(g, key=lambda x: x[1][0].line)) for g in groups.values()]
    return out


def _block_of(body: tuple[Stmt, ...], line: int) -> int:
    """The first line of the innermost statement list that holds the
    statement at ``line`` (fields set in one arm are set together)."""
    for st in body:
        for sub in (st.body, st.orelse, *(h.body for h in st.handlers), st.final):
            if sub and any(x.line == line for x in walk(sub)):
                return _block_of(sub, line)
    return body[0].line if body else 0


def _init_of(ff: FileFacts, cf: ClassFact) -> FunctionFact | None:
    return next((f for f in ff.functions if f.class_qualname == cf.qualname
                 and f.name == "__init__"), None)


def _members_known(ctx: CheckContext, cls: str) -> bool:
    """A subject class whose members are all known (``members_known``) and
    that does not fix its fields in ``__slots__``."""
    return members_known(ctx, cls) and not ctx.classes.find_member(cls, "__slots__")


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
    subclass assigns (``self.x = ...``, the evaluator's ``self_attrs``, or
    ``setattr(self, "x", ...)``); ``*`` when one sets attributes by a
    computed name."""
    out: set[str] = set()
    for c in {*ctx.classes.mro(cls), *ctx.classes.all_subclasses(cls)}:
        d = ctx.model.defs.get(c)
        ff = ctx.model.facts.get(d.module) if d is not None else None
        if ff is None or d is None:
            continue
        qual = c[len(d.module) + 1:]
        out |= {attr for attr, sites in ctx.values.self_attrs.get(c, {}).items()
                if any(scope.rpartition(".")[0] == qual and scope != init
                       for (_, scope), _ in sites)}
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
        cf = ctx.classes.class_fact(c)
        if cf is not None:
            out |= {n for n, _ in cf.attributes} | set(cf.members)
    return out


Stops = Callable[[Stmt], bool]


def _outcomes(body: Iterable[Stmt], field: str, ff: FileFacts, stops: Stops) -> set[str]:
    """How the statements can end for ``field``: set, returned or fell
    through without it (see the module constants). ``stops``: a statement
    that never completes (it calls a function that always raises)."""
    ends = {_FELL}
    for st in body:
        if _FELL not in ends:
            break
        ends = (ends - {_FELL}) | _stmt(st, field, ff, stops)
    return ends


def _stmt(st: Stmt, field: str, ff: FileFacts, stops: Stops) -> set[str]:
    target = f"self.{field}"
    if any(kind == "assign" and ff.assigns[i].target == target for kind, i in st.events):
        return {_SET}
    if st.kind == "raise" or st.kind == "simple" and stops(st):
        return set()
    if st.kind == "return":
        return {_RETURNED}
    if st.kind == "if":
        return _outcomes(st.body, field, ff, stops) | _else(st.orelse, field, ff, stops)
    if st.kind in ("for", "while"):
        return _outcomes(st.body, field, ff, stops) | _outcomes(st.orelse, field, ff, stops)
    if st.kind == "try":
        ends = _outcomes(st.body, field, ff, stops)
        if _FELL in ends and st.orelse:  # ``else:`` runs when the body did not raise
            ends = (ends - {_FELL}) | _outcomes(st.orelse, field, ff, stops)
        for h in st.handlers:
            ends |= _outcomes(h.body, field, ff, stops)
        if st.final and _outcomes(st.final, field, ff, stops) == {_SET}:
            return {_SET}
        return ends
    if st.kind in ("with", "match"):
        return _outcomes(st.body, field, ff, stops) | ({_FELL} if st.kind == "match" else set())
    return {_FELL}


# calls that end the process
_EXITS = frozenset({"sys.exit", "os._exit", "exit", "quit"})


def _stopper(ctx: CheckContext, fqn: str, ff: FileFacts) -> Stops:
    """Whether a statement of ``fqn`` calls something that never returns: a
    process exit, or an analysed function whose every way out raises
    (``_raise_server_unreachable(url)`` in a handler)."""
    memo: dict[str, bool] = {}

    def raises(target: str, depth: int) -> bool:
        if target not in memo:
            memo[target] = False  # a cycle returns
            d = ctx.model.defs.get(target)
            fn = d.fact if d is not None else None
            tff = ctx.model.facts.get(d.module) if d is not None else None
            if isinstance(fn, FunctionFact) and tff is not None and depth < 3 and fn.body:
                inner = _stopper_at(lambda c: raises(c, depth + 1), ctx, target, tff)
                memo[target] = not _outcomes(fn.body, "\0", tff, inner)
        return memo[target]

    return _stopper_at(lambda c: raises(c, 0), ctx, fqn, ff)


def _stopper_at(raises: Callable[[str], bool], ctx: CheckContext, fqn: str,
                ff: FileFacts) -> Stops:
    def stops(st: Stmt) -> bool:
        for kind, i in st.events:
            if kind != "call":
                continue
            call = ff.calls[i]
            if call.callee in _EXITS or any(
                    raises(t.fqn) for t in ctx.resolve_call(fqn, call) if not t.external):
                return True
        return False
    return stops


def _else(orelse: tuple[Stmt, ...], field: str, ff: FileFacts, stops: Stops) -> set[str]:
    """The ``else`` side of an ``if``. An ``elif`` chain with no ``else``
    names every mode there is (``if role == SCHEDULER: ... elif role ==
    WORKER: ...``): its last test failing builds no object anyone uses."""
    if len(orelse) == 1 and orelse[0].kind == "if":
        elif_ = orelse[0]
        return _outcomes(elif_.body, field, ff, stops) | (
            _else(elif_.orelse, field, ff, stops) if elif_.orelse else set())
    return _outcomes(orelse, field, ff, stops)


def _markers(ff: FileFacts, init: FunctionFact, made: list[AssignFact],
             tests: set[str]) -> set[str]:
    """Fields of ``init`` that tell the mode too: those it assigns from a
    tested name (``self._events_on = enable_events``), and those the other
    way assigns (``self.disabled = True`` before an early ``return``, or in
    the other arm): readers test them instead."""
    def assigned(stmts: Iterable[Stmt]) -> set[str]:
        return {t[5:] for x in stmts for kind, i in x.events if kind == "assign"
                for t in [ff.assigns[i].target] if t.startswith("self.") and t[5:].isidentifier()}

    out: set[str] = set()
    lines = {a.line for a in made}
    for s in walk(init.body):
        if s.line >= min(lines):
            break
        if s.kind == "if":
            if any(x.line in lines for x in walk(s.body)):
                out |= assigned(walk(s.orelse))
            elif any(x.line in lines for x in walk(s.orelse)):
                out |= assigned(walk(s.body))
            elif any(x.kind == "return" for x in walk(s.body)):
                out |= assigned(walk(s.body))
        elif mode_names(set(s.names)) & tests:
            out |= assigned([s])
    return out


@dataclass(frozen=True)
class _SelfReads:
    """One class's own ``self.X`` reads in its methods, sorted (not in
    ``__init__``, not the target of a store on the same line), and per method
    the fields it asks about with ``hasattr``/``getattr`` (``""``: any)."""

    module: str
    reads: dict[str, list[AttrReadFact]]
    asked: dict[str, set[str]]


def _self_reads(ctx: CheckContext, cls: str, memo: dict[str, _SelfReads | None]
                ) -> _SelfReads | None:
    """``_SelfReads`` of ``cls``, built once per class and module check."""
    if cls not in memo:
        d = ctx.model.defs.get(cls)
        ff = ctx.model.facts.get(d.module) if d is not None else None
        if ff is None or d is None:
            memo[cls] = None
            return None
        qual = cls[len(d.module) + 1:]
        stores = {(a.scope, a.line, a.target) for a in ff.assigns}
        reads: dict[str, list[AttrReadFact]] = {}
        for r in sorted(ff.reads, key=lambda r: (r.line, r.col)):
            if r.base == "self" and r.scope.rpartition(".")[0] == qual and \
                    not r.scope.endswith(".__init__") and \
                    (r.scope, r.line, f"self.{r.attr}") not in stores:
                reads.setdefault(r.attr, []).append(r)
        asked: dict[str, set[str]] = {}
        for call in ff.calls:
            if call.callee in ("hasattr", "getattr") and call.args and call.args[0] == "self":
                lit = call.literal_args[1] if len(call.literal_args) > 1 else None
                asked.setdefault(call.scope, set()).add(lit or "")
        memo[cls] = _SelfReads(d.module, reads, asked)
    return memo[cls]


def _reads(ctx: CheckContext, cls: str, init: FunctionFact, field: str,
           made: list[AssignFact], memo: dict[str, _SelfReads | None]) -> list[tuple[str, int]]:
    """The first read of ``self.<field>`` per method of ``cls`` or a subclass
    that no test of the mode guards, as (function, line)."""
    home = ctx.model.defs[cls].module
    # a ``raise`` before the assignment validates (no object is built): no mode
    tests = set().union(*(decided_at(init, a.line, ("return",), asserts=False) for a in made)) - {field}
    if tests & set(ctx.protocol.lifecycle.get("role_tests") or ()):
        return []  # the connector's role: vLLM calls each half only on its own side
    modes = tests | _markers(ctx.model.facts[home], init, made, tests) - {field}
    literals = set().union(*(_arm_literals(init, a.line) for a in made))
    out: list[tuple[str, int]] = []
    for c in sorted({cls, *ctx.classes.all_subclasses(cls)}):
        own = _self_reads(ctx, c, memo)
        if own is None:
            continue
        functions = {f.qualname: f for f in ctx.model.facts[own.module].functions}
        seen: set[str] = set()
        for r in own.reads.get(field, ()):
            if r.scope in seen or own.asked.get(r.scope, set()) & {"", field}:
                continue
            fqn = f"{own.module}.{r.scope}"
            fn = functions[r.scope]
            if modes & decided_at(fn, r.line) or literals & _arm_literals(fn, r.line) or \
                    _leaves_on_input(fn, r.line) or (
                    modes and callers_decide(ctx, fqn, modes, 4)):
                continue
            seen.add(r.scope)
            out.append((fqn, r.line))
    return out


# a mode's name as a string constant in a test (``== "GET"``, ``in ("PUT",)``)
_LITERAL = re.compile(r"""(["'])([A-Za-z_][\w.-]*)\1""")


def _arm_literals(fn: FunctionFact, line: int) -> set[str]:
    """String constants of the tests whose true arm holds ``line``: a read
    under ``if data["cmd"] == "GET":`` serves the mode the constructor set
    up under ``if self.send_type == "GET":`` (a GET message comes from a
    peer in GET mode), though the tested names differ."""
    out: set[str] = set()
    for s in walk(fn.body):
        if s.line > line:
            break
        if s.kind == "if" and s.text and any(x.line == line for x in walk(s.body)):
            out |= {m.group(2) for m in _LITERAL.finditer(s.text)}
    return out


def _leaves_on_input(fn: FunctionFact, line: int) -> bool:
    """``fn`` may return before ``line`` on a test of what it was passed
    (``if not events: return``): whether the read runs depends on the
    caller's data (an empty list in the other mode), which is not followed."""
    params = {p.name for p in fn.params} - {"self", "cls"}
    for s in walk(fn.body):
        if s.line >= line:
            return False
        if s.kind == "if" and {n.partition(".")[0] for n in s.names} & params and any(
                x.kind == "return" for x in walk(s.body)) and not any(
                x.line == line for x in walk(s.body)):
            return True
    return False


def _when(body: tuple[Stmt, ...], line: int) -> str:
    """When the statement at ``line`` runs, for messages: under the innermost
    ``if`` holding it (``when `send_type == "GET"` is false (line 130)``), or
    the generic ways out."""
    test: tuple[str, bool, int] | None = None
    for s in walk(body):
        if s.kind == "if" and s.text:
            if any(x.line == line for x in walk(s.body)):
                test = (s.text, True, s.line)
            elif any(x.line == line for x in walk(s.orelse)) and not (
                    len(s.orelse) == 1 and s.orelse[0].kind == "if" and s.orelse[0].line != line):
                test = (s.text, False, s.line)
    if test is None:
        return ("on some of its ways out (in a loop, after a handler that carries on, or "
                "after an early return)")
    text, holds, at = test
    return f"when `{text}`{'' if holds else ' is false'} (line {at})"


def _finding(ctx: CheckContext, cls: str,
             fields: list[tuple[str, list[AssignFact], list[tuple[str, int]]]]) -> Finding:
    """One finding per group of fields set together, at the first one's
    assignment in ``__init__`` (where the fix usually goes), with the
    unguarded reads on its path."""
    module = ctx.model.defs[cls].module
    field, made, _ = fields[0]
    init = f"{module}.{made[0].scope}"
    path = tuple(ctx.step(init, a.line, f"self.{f} is set here, in some modes only")
                 for f, m, _ in fields for a in m)
    reads = sorted({r for _, _, rs in fields for r in rs}, key=lambda r: (r[0], r[1]))
    path += tuple(ctx.step(f, line, "read here with no test of the mode") for f, line in reads)
    name = cls.rpartition(".")[2]
    names = ", ".join(f"self.{f}" for f, _, _ in fields)
    where = ", ".join(f"{f.rpartition('.')[2]} (line {line})" for f, line in reads[:3])
    more = f" and {len(reads) - 3} more" if len(reads) > 3 else ""
    fn = ctx.function(init)
    return ctx.finding(
        init, made[0].line, f"{name}.__init__ sets {names} only {_when(fn.body, made[0].line)}, "
        f"but {where}{more} "
        f"read {'them' if len(fields) > 1 else 'it'} with no test of that mode: "
        "AttributeError on an object built the other way",
        column=made[0].col, path=path, anchor=f"mode-field:{field}")
