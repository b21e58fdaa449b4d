"""The ``conforms`` optional-field check: a field declared ``X | None`` is
tested before the subject reads through it.

vLLM and connectors hand requests around in records whose fields are only
sometimes set: ``Request.sampling_params`` is ``None`` for a pooling
request, a connector's ``ReqMeta.disagg_spec`` only when the request is a
disaggregated prefill. A hook that reads ``request.disagg_spec.n`` with no
test of ``disagg_spec`` raises ``AttributeError`` on the first request built
the other way, and a worker hook that raises kills the engine (LMCache
0.3.10's ``wait_for_save`` on a producer without a disaggregation spec;
LMCache 0.3.13's ``extract_request_configs`` given a pooling request's
``sampling_params``).

For each read or call ``H.f.attr`` in the subject (``H`` not ``self`` itself:
a field of one's own object is set up by its own code), ``H`` is evaluated;
when every value it may have that has the field is an instance of an
analysed class whose declaration of ``f`` (a class-body annotation, an
annotated assignment in ``__init__``, or ``self.f = p`` from an ``__init__``
parameter) admits ``None``, the read is reported unless it is ``tested``: a
truth test, ``is``/``==`` comparison or ``isinstance`` of ``H.f`` (or of a
local bound to it, or read off it with ``getattr(..., default)``, or of a
``self`` flag computed from such a test) that holds the read, exits early
before it in its own statement list, or sits in the read's own statement;
an ``assert`` of it; an assignment of it; a ``# type: ignore`` on the
statement; or every caller testing it (``conforms_fields.callers_decide``).
A field some method sets after construction, and the protocol's
``present_fields``, are left alone.

The same holds one call away: a call that passes ``H.f`` to a function of
the subject which reads through that parameter with no such test is
reported at the read (where the fix goes), with every such call in its path.
"""

from __future__ import annotations

import ast
from bisect import bisect_right
from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.conforms_fields import callers_decide, holds, member_uses
from kvflowmap.check.kinds.conforms_members import known_member
from kvflowmap.check.model import Finding
from kvflowmap.facts import FileFacts, FunctionFact, Stmt
from kvflowmap.lifecycle.view import walk

_EXITS = ("return", "raise", "continue", "break")
# comparisons that may test for None (``x.f is None``, ``x.f != None``)
_NONE_TESTS = frozenset({"Is", "IsNot", "Equal", "NotEqual"})
# calls that test what a value is (``isinstance(x.spec, Spec)``)
TYPE_TESTS: tuple[str, ...] = ("isinstance", "callable")


@dataclass(frozen=True)
class Declared:
    """Where a class declares a field that may be ``None``."""

    cls: str
    line: int
    annotation: str


def check_optional_fields(ctx: CheckContext, module: str,
                          names: frozenset[str]) -> list[Finding]:
    """Reads in ``module`` through a field that may be ``None``, untested;
    ``names`` are the field names some class so declares (``optional_names``)."""
    ff = ctx.model.facts[module]
    fns = {f.qualname: f for f in ff.functions}
    out: list[Finding] = []
    seen: set[tuple[str, str]] = set()
    for scope, base, attr, line, col in member_uses(ff):
        head, _, fname = base.rpartition(".")
        fn = fns.get(scope)
        if fn is None or not head or head in ("self", "cls", "super()") or "[" in base \
                or "(" in base or (scope, base) in seen or fname not in names:
            continue
        decl = _declared_optional(ctx, module, scope, head, fname)
        if decl is None or _present(ctx, decl, fname) or tested(ff, fn, base, line) or \
                callers_decide(ctx, f"{module}.{scope}", {fname}, depth=2, exits=_EXITS):
            continue
        seen.add((scope, base))
        where = f"{module}.{scope}"
        out.append(ctx.finding(
            where, line, f"{base}.{attr}: '{fname}' may be None ({_label(decl)}), and nothing "
            f"here tests it first: AttributeError for a request built without it",
            column=col, path=(ctx.step(decl.cls, decl.line, f"{decl.cls.rpartition('.')[2]}."
                                       f"{fname}: {decl.annotation}"),),
            anchor=f"optional-field:{base}"))
    out += _passed_optional(ctx, module, ff, names)
    return out


def _passed_optional(ctx: CheckContext, module: str, ff: FileFacts,
                     names: frozenset[str]) -> list[Finding]:
    """Reads in ``module`` through a parameter that some call gives an
    optional field, untested: one finding per read (at the read, where the
    fix goes), every such call in its path. Callers anywhere in the
    analysis count; the finding belongs to the module of the read."""
    by_scope: dict[str, list[tuple[str, str, int, int]]] = {}
    for sc, b, a, ln, c in member_uses(ff):
        if "." not in b:
            by_scope.setdefault(sc, []).append((b, a, ln, c))
    out: list[Finding] = []
    for tfn in ff.functions:
        target = f"{module}.{tfn.qualname}"
        if target not in ctx.graph or tfn.qualname not in by_scope:
            continue
        # a method's own object is no argument (``staticmethod`` has none)
        offset = 1 if tfn.class_qualname and tfn.params and \
            tfn.params[0].name in ("self", "cls") and "staticmethod" not in tfn.decorators else 0
        positional = [p.name for p in tfn.params if p.kind in ("posonly", "pos")]
        read_params = {b for b, _, _, _ in by_scope[tfn.qualname]} & set(positional[offset:])
        if not read_params:
            continue
        calls: dict[str, list[tuple[str, int, str, Declared]]] = {}
        for caller, line in sorted({(u, int(d.get("line") or 0)) for u, _, d in
                                    ctx.graph.in_edges(target, data=True)
                                    if d.get("kind") in ("call", "dispatch") and not d.get("ref")}):
            cd = ctx.model.defs.get(caller)
            if cd is None or not isinstance(cd.fact, FunctionFact):
                continue
            cff, cfn = ctx.model.facts[cd.module], cd.fact
            for call in cff.calls:
                if call.scope != cfn.qualname or call.line != line:
                    continue
                for i, arg in enumerate(call.args):
                    if not arg or "." not in arg or "(" in arg or "[" in arg or \
                            i + offset >= len(positional) or \
                            positional[i + offset] not in read_params:
                        continue
                    head, _, fname = arg.rpartition(".")
                    if fname not in names or head in ("self", "cls") or \
                            tested(cff, cfn, arg, line):
                        continue
                    decl = _declared_optional(ctx, cd.module, cfn.qualname, head, fname)
                    if decl is not None and not _present(ctx, decl, fname):
                        calls.setdefault(positional[i + offset], []).append(
                            (caller, line, arg, decl))
        for param, given in sorted(calls.items()):
            read = next(((ln, c, a) for b, a, ln, c in by_scope[tfn.qualname]
                         if b == param and not tested(ff, tfn, b, ln)), None)
            if read is None:
                continue
            ln, col, attr = read
            caller0, line0, arg0, decl = given[0]
            more = f" and {len(given) - 1} more call(s)" if len(given) > 1 else ""
            path = tuple(ctx.step(caller, cl, f"passes {arg} as {param}")
                         for caller, cl, arg, _ in given)
            out.append(ctx.finding(
                target, ln, f"{param}.{attr}: '{param}' is given {arg0} (line {line0}{more}), "
                f"which may be None ({_label(decl)}), and nothing here tests it first: "
                "AttributeError for a request built without it", column=col,
                path=path + (ctx.step(decl.cls, decl.line, f"{decl.cls.rpartition('.')[2]}."
                                      f"{arg0.rpartition('.')[2]}: {decl.annotation}"),),
                anchor=f"optional-field:{param}"))
    return out


def _declared_optional(ctx: CheckContext, module: str, scope: str, head: str,
                       fname: str) -> Declared | None:
    """The declaration of ``fname`` that admits ``None`` on the class ``head``
    is an instance of, when every value ``head`` may have is an instance of
    an analysed class and each that has the field declares it so (else
    None). A class with no such field at all is left out: the evaluator
    does not narrow (``assert isinstance(meta, MyMeta)``), and the base's
    other subclasses it keeps cannot be what the read runs on."""
    values = ctx.values.eval((module, scope), head)
    if not values or any(kind != "inst" for kind, _ in values):
        return None
    found: list[Declared] = []
    for _, cls in sorted(values):
        if not ctx.classes.is_class(cls) or any(
                ctx.classes.find_member(cls, n) for n in ("__getattr__", "__getattribute__")):
            return None
        decl = _declaration(ctx, cls, fname)
        if decl is None and not known_member(ctx, ctx.classes.mro(cls), fname):
            continue
        if decl is None or _set_later(ctx, cls, fname):
            return None
        found.append(decl)
    return found[0] if found else None


def optional_names(ctx: CheckContext) -> frozenset[str]:
    """Every field name some analysed class declares as admitting ``None``:
    a cheap filter before the evaluator is asked (the kind computes it once
    per analysis)."""
    found: set[str] = set()
    for ff in ctx.model.facts.values():
        found.update(n for cf in ff.classes for n, ann in cf.attributes if admits_none(ann))
        params = {(f.qualname, p.name) for f in ff.functions if f.name == "__init__"
                  for p in f.params if admits_none(p.annotation or "")}
        found.update(a.target[5:] for a in ff.assigns
                     if a.target.startswith("self.") and a.target.count(".") == 1 and (
                         admits_none(a.annotation or "") or (a.scope, a.value) in params))
    return frozenset(found)


def _set_later(ctx: CheckContext, cls: str, fname: str) -> bool:
    """A method of ``cls``, its bases or subclasses other than ``__init__``
    sets the field (``self.rdma = build_port(...)`` once the caches are
    registered): ``None`` then means "not yet", a state of the object's
    life its methods know, not a kind of request built without it."""
    for k in {*ctx.classes.mro(cls), *ctx.classes.all_subclasses(cls)}:
        cf = ctx.classes.class_fact(k)
        if cf is None:
            continue
        prefix = f"{cf.qualname}."
        for a in ctx.model.facts[ctx.model.defs[k].module].assigns:
            if a.target == f"self.{fname}" and a.scope.startswith(prefix) and \
                    a.scope.rpartition(".")[2] not in ("__init__", "__post_init__") and \
                    a.value != "None":
                return True
    return False


def _declaration(ctx: CheckContext, cls: str, fname: str) -> Declared | None:
    """The first declaration of ``fname`` along the MRO of ``cls``, when it
    admits ``None``; None when it does not, or when no class declares it."""
    for k in ctx.classes.mro(cls):
        cf = ctx.classes.class_fact(k)
        if cf is None:
            return None
        ann = dict(cf.attributes).get(fname)
        if ann is not None:
            return Declared(k, cf.line, ann) if admits_none(ann) else None
        module = ctx.model.defs[k].module
        init = ctx.model.defs.get(f"{k}.__init__")
        if init is None or not isinstance(init.fact, FunctionFact):
            continue
        params = {p.name: p.annotation for p in init.fact.params}
        for a in ctx.model.facts[module].assigns:
            if a.scope != init.fact.qualname or a.target != f"self.{fname}":
                continue
            ann = a.annotation or (params.get(a.value or "") if a.value in params else None)
            if ann:
                return Declared(k, a.line, ann) if admits_none(ann) else None
    return None


def admits_none(annotation: str) -> bool:
    """The annotation's outermost type admits ``None``: ``X | None``,
    ``Optional[X]``, ``Union[X, None]`` (written as a string too); a
    ``None`` inside another type's arguments (``dict[str, Future[None]]``)
    does not."""
    if "None" not in annotation and "Optional" not in annotation:
        return False  # most annotations: no parse needed
    try:
        node = ast.parse(annotation.strip(), mode="eval").body
    except SyntaxError:
        return False
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return admits_none(node.value)
    if isinstance(node, ast.Constant) and node.value is None:
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return admits_none(ast.unparse(node.left)) or admits_none(ast.unparse(node.right))
    if isinstance(node, ast.Subscript):
        name = ast.unparse(node.value).rpartition(".")[2]
        if name == "Optional":
            return True
        if name == "Union":
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return any(admits_none(ast.unparse(i)) for i in items)
    return False


def tested(ff: FileFacts, fn: FunctionFact, chain: str, line: int, since: int = 0) -> bool:
    """``fn`` tests ``chain`` for the read at ``line``: a test that uses it
    as a condition or compares it holds the read or exits early before it,
    an ``assert`` of it comes before it, the read's own statement tests it
    (``a.f.n if a.f else 0``, ``if a.f and a.f.n:``), or it is assigned
    before the read (after line ``since``: the binding a rule starts from is
    no test). A local bound to the chain before the read stands for it
    (``spec = req.spec; if spec is None: continue``), and so does a flag
    computed from a test of it (``flags``)."""
    if _ignored(ff, fn, line):
        return True
    if any(a.scope == fn.qualname and a.target == chain and since < a.line < line
           for a in ff.assigns):
        return True
    names = {chain} | _aliases(ff, fn, chain, line)
    first, end = _statement_span(fn, line)
    guards = _guards(fn.body, first)
    if since:
        guards += [s for s in _after_binding(fn.body, since) if s.line < first]
    spans = [(first, end)] + [(s.line, _header_end(fn, s)) for s in guards]
    if any(_tests_in(ff, fn.qualname, names, a, b) for a, b in spans):
        return True
    more = flags(ff, chain)  # last: it looks at every assignment of the module
    return bool(more) and any(_tests_in(ff, fn.qualname, more, a, b) for a, b in spans)


def flags(ff: FileFacts, chain: str) -> set[str]:
    """``self`` fields of the module assigned in a statement that tests a
    chain with the same last name (``self.enable_quant = cfg.quant.on if
    cfg.quant is not None else False``): testing the flag tests the chain."""
    last = chain.rpartition(".")[2]
    key = (id(ff), last)
    hit = _FLAGS.get(key)
    if hit is None or hit[0] is not ff:
        if len(_FLAGS) > 4096:
            _FLAGS.clear()
        hit = _FLAGS[key] = (ff, _flags(ff, last))
    return hit[1]


_FLAGS: dict[tuple[int, str], tuple[FileFacts, set[str]]] = {}


def _flags(ff: FileFacts, last: str) -> set[str]:
    tests = {(c.scope, c.line) for c in (*ff.truths, *ff.compares)
             if any(op.rpartition(".")[2] == last for op in c.operands)}
    if not tests:
        return set()
    fns = {f.qualname: f for f in ff.functions}
    out: set[str] = set()
    for a in ff.assigns:
        fn = fns.get(a.scope)
        if fn is None or not a.target.startswith("self.") or a.target.count(".") != 1:
            continue
        first, end = _statement_span(fn, a.line)
        if any((a.scope, ln) in tests for ln in range(first, end)):
            out.add(a.target)
    return out


def _after_binding(body: tuple[Stmt, ...], line: int) -> list[Stmt]:
    """The ``assert``s and early-exit ``if``s after the statement at
    ``line`` in its own statement list: whatever reads the name it binds
    later has passed them (``x = alloc(); assert x is not None`` in an
    ``if self.use_gpu:`` block, the reads in another such block)."""
    for i, s in enumerate(body):
        if s.line == line:
            return [x for x in body[i + 1:] if x.kind == "assert" or x.kind == "if" and
                    any(y.kind in ("return", "raise") for y in walk(x.body))]
        for block in (s.body, s.orelse, s.handlers, s.final):
            if any(x.line == line for x in walk(block)):
                return _after_binding(block, line)
    return []


def _guards(body: tuple[Stmt, ...], line: int) -> list[Stmt]:
    """The tests that guard the statement starting at ``line``: an ``if``
    or ``while`` that holds it, and an ``if`` that exits early (``return``,
    ``raise``, ``continue``, ``break``) or an ``assert`` earlier in a
    statement list that holds it (a test in an earlier loop guards nothing)."""
    out: list[Stmt] = []
    inside = [line in _lines(s) for s in body]
    for i, s in enumerate(body):
        if any(inside[i + 1:]) and (s.kind == "assert" or s.kind == "if" and
                                    any(x.kind in _EXITS for x in walk(s.body))):
            out.append(s)
        if not inside[i]:
            continue
        if s.kind in ("if", "while") and holds(s, line):
            out.append(s)
        for block in (s.body, s.orelse, s.handlers, s.final):
            if any(line in _lines(x) for x in block):
                out += _guards(block, line)
    return out


def _lines(s: Stmt) -> frozenset[int]:
    """The first lines of ``s`` and every statement nested in it (kept per
    statement object: the guard search asks for them again and again)."""
    hit = _LINES.get(id(s))
    if hit is None or hit[0] is not s:
        if len(_LINES) > 200_000:
            _LINES.clear()
        hit = _LINES[id(s)] = (s, frozenset(x.line for x in walk((s,))))
    return hit[1]


_LINES: dict[int, tuple[Stmt, frozenset[int]]] = {}


def _aliases(ff: FileFacts, fn: FunctionFact, chain: str, line: int) -> set[str]:
    """Locals of ``fn`` bound to ``chain`` before ``line``, or to a member
    of it read with a default (``owned = getattr(blocks, "_owned", None)``:
    when ``blocks`` is None, so is ``owned``)."""
    asked = {c.line for c in ff.calls if c.scope == fn.qualname and c.callee == "getattr"
             and len(c.args) > 2 and c.args[0] == chain}
    return {a.target for a in ff.assigns if a.scope == fn.qualname and a.line < line
            and "." not in a.target and (a.value == chain or
                                         a.value == "getattr()" and a.line in asked)}


def _tests_in(ff: FileFacts, scope: str, names: set[str], first: int, end: int) -> bool:
    """Lines ``first`` to before ``end`` of ``scope`` test one of ``names``:
    as a condition, in a comparison, with ``isinstance``, or by
    ``hasattr``/``getattr`` of its object with its field's name."""
    asked = {tuple(n.rsplit(".", 1)) for n in names if "." in n}
    for line, operands, callee, args, literals in _scope_tests(ff).get(scope, ()):
        if not first <= line < end:
            continue
        if callee is None and names & set(operands):
            return True
        if callee in ("hasattr", "getattr") and len(args) > 1 and \
                (args[0], literals[1]) in asked:
            return True
        if callee in TYPE_TESTS and args and args[0] in names:
            return True
    return False


# per scope: (line, operands, callee, args, literal args) of each truth test,
# comparison, and call that may test a value (by module: asked again and again)
_Test = tuple[int, tuple[str, ...], "str | None", tuple["str | None", ...],
              tuple["str | None", ...]]
_TESTS: dict[tuple[str, str], tuple[FileFacts, dict[str, list[_Test]]]] = {}


def _scope_tests(ff: FileFacts) -> dict[str, list[_Test]]:
    key = (ff.path, ff.sha)
    hit = _TESTS.get(key)
    if hit is None or hit[0] is not ff:
        if len(_TESTS) > 512:
            _TESTS.clear()
        out: dict[str, list[_Test]] = {}
        # ``x in d.f`` reads ``d.f`` as a container (a TypeError on None),
        # it tests nothing about it; identity and equality do
        for c in (*ff.truths, *(c for c in ff.compares if set(c.ops) & _NONE_TESTS)):
            out.setdefault(c.scope, []).append((c.line, c.operands, None, (), ()))
        for call in ff.calls:
            if call.callee in ("hasattr", "getattr", *TYPE_TESTS):
                out.setdefault(call.scope, []).append(
                    (call.line, (), call.callee, call.args, call.literal_args))
        hit = _TESTS[key] = (ff, out)
    return hit[1]


def _header_end(fn: FunctionFact, s: Stmt) -> int:
    """The line after a statement's test: its body's first line for an
    ``if``/``while``, the next statement's for an ``assert``."""
    inner = [x.line for x in walk((*s.body, *s.orelse)) if x.line > s.line]
    return min(inner) if inner else _statement_span(fn, s.line)[1]


def _ignored(ff: FileFacts, fn: FunctionFact, line: int) -> bool:
    """The statement that holds ``line`` carries a ``# type: ignore``: the
    author asserts the value is set there."""
    if not ff.type_ignores:
        return False
    first, end = _statement_span(fn, line)
    return any(first <= n < end for n in ff.type_ignores)


def _statement_span(fn: FunctionFact, line: int) -> tuple[int, int]:
    """First line of the statement that holds ``line`` and the first line
    of the next statement (or past the function)."""
    starts = _starts(fn)
    at = bisect_right(starts, line)
    first = starts[at - 1] if at else line
    after = bisect_right(starts, first)
    return first, starts[after] if after < len(starts) else fn.end_line + 1


def _starts(fn: FunctionFact) -> tuple[int, ...]:
    """The sorted first lines of ``fn``'s statements (kept per function:
    every read, guard and assignment asks for its statement)."""
    hit = _STARTS.get(id(fn))
    if hit is None or hit[0] is not fn:
        if len(_STARTS) > 50_000:
            _STARTS.clear()
        hit = _STARTS[id(fn)] = (fn, tuple(sorted({s.line for s in walk(fn.body)})))
    return hit[1]


_STARTS: dict[int, tuple[FunctionFact, tuple[int, ...]]] = {}


def _present(ctx: CheckContext, decl: Declared, fname: str) -> bool:
    """The protocol's ``present_fields`` names the field (``Class.field``):
    vLLM sets it wherever the subject runs."""
    return f"{decl.cls.rpartition('.')[2]}.{fname}" in (
        ctx.protocol.lifecycle.get("present_fields") or ())


def _label(decl: Declared) -> str:
    return f"{decl.cls.rpartition('.')[2]} declares it {decl.annotation}"
