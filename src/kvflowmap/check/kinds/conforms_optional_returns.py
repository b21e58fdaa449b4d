"""The ``conforms`` optional-return check: what a function declares it may
return as ``None`` is tested before the caller reads through it.

``handle = self._lookup(req_id)`` where ``_lookup`` is annotated ``->
Handle | None`` (it returns ``None`` for a request it no longer tracks), then
``handle.release()``: the first request that took the ``None`` way raises
``AttributeError`` in the hook, and a hook that raises takes the engine
down. The function's own annotation says the caller must test.

For each local of the subject bound once from a call (``x = f(...)``)
whose every resolved target is a function (of the subject or the analysed
vLLM) whose return annotation admits ``None``, a read or call ``x.attr``
after it is reported unless it is tested first
(``conforms_optional.tested``: a condition, comparison, ``isinstance``,
early exit, ``assert``, or ``# type: ignore`` on the line), or rebound.
One finding per binding, at its first untested read. A parameter the
function itself declares ``X | None`` and never rebinds is read the same way.
"""

from __future__ import annotations

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.conforms_fields import member_uses
from kvflowmap.check.kinds.conforms_optional import admits_none, tested
from kvflowmap.check.model import Finding
from kvflowmap.facts import AssignFact, FunctionFact
from kvflowmap.lifecycle.view import walk


def check_optional_returns(ctx: CheckContext, module: str) -> list[Finding]:
    """Reads in ``module`` through a local bound to a call whose targets
    declare they may return ``None``, untested."""
    ff = ctx.model.facts[module]
    fns = {f.qualname: f for f in ff.functions}
    bound: dict[tuple[str, str], list[AssignFact]] = {}
    for a in (*ff.assigns, *ff.binds):
        bound.setdefault((a.scope, a.target), []).append(a)
    reads: dict[tuple[str, str], list[tuple[int, int, str]]] = {}
    for scope, base, attr, line, col in member_uses(ff):
        if "." not in base and base not in ("self", "cls"):
            reads.setdefault((scope, base), []).append((line, col, attr))
    out: list[Finding] = []
    for (scope, name), uses in sorted(reads.items()):
        binds = bound.get((scope, name), [])
        fn = fns.get(scope)
        param = next((p for p in fn.params if p.name == name), None) if fn else None
        if fn is not None and param is not None and not binds and \
                admits_none(param.annotation or ""):
            read = next(((ln, col, attr) for ln, col, attr in uses
                         if not tested(ff, fn, name, ln)), None)
            if read is not None:
                out.append(ctx.finding(
                    f"{module}.{scope}", read[0], f"{name}.{read[2]}: parameter {name} is "
                    f"declared {param.annotation}, and nothing here tests it for None first",
                    column=read[1], anchor=f"optional-param:{name}"))
            continue
        if fn is None or len(binds) != 1 or binds[0].aug or binds[0].origin == "for" or \
                binds[0].position is not None or not (binds[0].value or "").endswith(")") or \
                any(p.name == name for p in fn.params):
            continue
        a = binds[0]
        if _rebound(fn, name):
            continue
        targets = _optional_targets(ctx, f"{module}.{scope}", a.line)
        if not targets:
            continue
        read = next(((ln, col, attr) for ln, col, attr in uses
                     if ln > a.line and not tested(ff, fn, name, ln, since=a.line)), None)
        if read is None:
            continue
        ln, col, attr = read
        first = targets[0]
        short = first.rpartition(".")[2]
        returns = ctx.model.defs[first].fact
        assert isinstance(returns, FunctionFact)
        out.append(ctx.finding(
            f"{module}.{scope}", ln, f"{name}.{attr}: {name} is what {short}() returns (line "
            f"{a.line}), declared {returns.returns}, and nothing here tests it for None first: "
            "AttributeError on the way it returns None", column=col,
            path=(ctx.step(f"{module}.{scope}", a.line, f"{name} = {a.value}"),
                  *(ctx.step(t, ctx.model.defs[t].fact.line, f"{t.rpartition('.')[2]} returns "
                             f"{_returns(ctx, t)}") for t in targets)),
            anchor=f"optional-return:{name}"))
    return out


def _rebound(fn: FunctionFact, name: str) -> bool:
    """A ``for``, ``with`` or ``except`` header of ``fn`` names ``name``:
    it may bind it too (tuple targets are no binding the facts keep)."""
    return any(s.kind in ("for", "with", "except") and name in s.names for s in walk(fn.body))


def _optional_targets(ctx: CheckContext, caller: str, line: int) -> list[str]:
    """The functions the call at ``line`` of ``caller`` resolves to, when
    there are some and every one declares a return that admits ``None``."""
    if caller not in ctx.graph:
        return []
    targets = sorted({v for _, v, d in ctx.graph.out_edges(caller, data=True)
                      if d.get("kind") == "call" and not d.get("ref")
                      and int(d.get("line") or 0) == line})
    if not targets:
        return []
    for t in targets:
        d = ctx.model.defs.get(t)
        # ``-> None`` is a procedure (and ``C()`` runs ``__init__``), not a
        # value that is sometimes missing
        if d is None or not isinstance(d.fact, FunctionFact) or \
                d.fact.name in ("__init__", "__new__") or \
                (d.fact.returns or "").strip() in ("None", "'None'", '"None"') or \
                not admits_none(d.fact.returns or ""):
            return []
    return targets


def _returns(ctx: CheckContext, fqn: str) -> str:
    fact = ctx.model.defs[fqn].fact
    return (fact.returns or "") if isinstance(fact, FunctionFact) else ""
