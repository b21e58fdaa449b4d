"""The ``conforms`` typed-member check: what the subject reads on vLLM's
objects exists in the analysed vLLM.

vLLM renames and removes the fields of the objects it hands connectors
between releases: ``CachedRequestData.resumed_from_preemption`` became
``resumed_req_ids``, and a connector still reading the old field raises
``AttributeError`` in the hook, every step (Dynamo's KVBM connector before
0.9.0). For each attribute read or method call ``x.attr`` in the subject whose
``x`` starts at a parameter the function annotates and never rebinds (or at a
local bound once from such a chain), ``x`` is evaluated; when every value it
may have is an instance of a class of the
analysed vLLM whose whole MRO is analysed and none of those classes, nor any
analysed subclass of theirs (the connector's own metadata class for vLLM's
``KVConnectorMetadata``), has ``attr`` (a method, a class attribute, an
annotated field, an attribute its methods assign) nor a ``__getattr__``, the
read is reported. Reads on
``self`` are the member check's; reads in a function that tests the name, or
asks the object, with ``hasattr``/``getattr`` are left alone, and so are the
subject's own classes (vLLM's bundled adapters when vLLM is the subject).
"""

from __future__ import annotations

import re

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.conforms_contract import fully_analysed, vllm_label
from kvflowmap.check.kinds.conforms_members import known_member
from kvflowmap.check.model import Finding
from kvflowmap.facts import AssignFact, FunctionFact, Param


def check_typed_members(ctx: CheckContext, module: str, package: str) -> list[Finding]:
    """Reads in ``module`` of members vLLM's classes do not have."""
    ff = ctx.model.facts[module]
    # names a function tests with ``hasattr``/``getattr``, and the objects it
    # asks: it knows their fields vary between releases
    guarded: dict[str, set[str]] = {}
    asked: dict[str, set[str]] = {}
    for c in ff.calls:
        if c.callee in ("hasattr", "getattr", "setattr"):
            guarded.setdefault(c.scope, set()).update(a for a in c.literal_args if a)
            asked.setdefault(c.scope, set()).update(c.args[:1] if c.args and c.args[0] else ())
    uses = [(r.scope, r.base, r.attr, r.line, r.col) for r in ff.reads]
    uses += [(c.scope, head, attr, c.line, c.col) for c in ff.calls if c.callee
             for head, _, attr in [c.callee.rpartition(".")] if head and "(" not in head]
    # per scope: the function, and the bindings of each name (once per module)
    fns = {f.qualname: f for f in ff.functions}
    binds: dict[tuple[str, str], list[AssignFact]] = {}
    for a in (*ff.assigns, *ff.binds):
        binds.setdefault((a.scope, a.target), []).append(a)
    out: list[Finding] = []
    seen: set[tuple[str, str, str]] = set()
    for scope, base, attr, line, col in sorted(set(uses), key=lambda u: (u[3], u[4], u[1])):
        first = base.split(".")[0]
        if first in ("self", "cls", "super()") and "." not in base:
            continue  # the member check's
        if (scope, base, attr) in seen or attr in guarded.get(scope, ()) or \
                base in asked.get(scope, ()) or attr.startswith("__") or "[" in base:
            continue
        fn = fns.get(scope)
        param = _anchor(fn, binds, base) if fn is not None else None
        if fn is None or param is None or not _as_written(ctx, module, fn, param):
            continue
        owners = _vllm_classes(ctx, module, scope, base, package)
        # a base class's annotation (``KVConnectorMetadata``) stands for its
        # subclasses too: the connector's own metadata class has the field
        if not owners or any(known_member(ctx, ctx.classes.mro(c), attr) or any(
                known_member(ctx, (sub,), attr) for sub in ctx.classes.all_subclasses(c))
                for c in owners):
            continue
        seen.add((scope, base, attr))
        names = ", ".join(sorted(c.rpartition(".")[2] for c in owners))
        where = f"{module}.{scope}" if scope else module
        out.append(ctx.finding(where, line, f"{base}.{attr}: {base} is a {names} of "
                               f"{vllm_label(ctx)}, which has no '{attr}': AttributeError "
                               "where this runs", column=col,
                               path=tuple(ctx.step(c, ctx.model.defs[c].fact.line,
                                                   f"{c.rpartition('.')[2]} has no '{attr}'")
                                          for c in sorted(owners)),
                               anchor=f"typed-member:{base}.{attr}"))
    return out


def _anchor(fn: FunctionFact, binds: dict[tuple[str, str], list[AssignFact]], base: str,
            depth: int = 0) -> Param | None:
    """The parameter ``base`` starts at, when ``fn`` annotates it and never
    rebinds it (``scheduler_output: SchedulerOutput``), directly or through a
    local bound once from such a chain (``cached =
    scheduler_output.scheduled_cached_reqs``): a type the author wrote down,
    not one inferred from callers or from a name bound several ways."""
    first = base.split(".")[0]
    if depth > 2:
        return None
    bound = binds.get((fn.qualname, first), [])
    param = next((p for p in fn.params if p.name == first), None)
    if param is not None:
        return param if param.annotation and not bound else None
    # one plain assignment: a loop variable may share its name with a binding
    # the facts do not record (``if (request := ...):``)
    if len(bound) != 1 or bound[0].aug or bound[0].origin == "for" or not bound[0].value \
            or "(" in bound[0].value:
        return None
    return _anchor(fn, binds, bound[0].value, depth + 1)


def _as_written(ctx: CheckContext, module: str, fn: FunctionFact, param: Param) -> bool:
    """The parameter evaluates to the classes its annotation names (an
    alias the evaluator follows elsewhere says nothing)."""
    words = set(re.findall(r"\w+", param.annotation or ""))
    values = ctx.values.eval((module, fn.qualname), param.name)
    if not values or not all(fqn.rpartition(".")[2] in words for _, fqn in values):
        return False
    # a helper's callers may pass something else (``request: Request`` given
    # the step's NewRequestData): then the annotation is not what runs
    index = next(i for i, q in enumerate(fn.params) if q.name == param.name)
    for cctx, call, offset in ctx.values.call_sites(f"{module}.{fn.qualname}"):
        arg = next((v for k, v in call.kwargs if k == param.name), None)
        if arg is None and 0 <= index - offset < len(call.args):
            arg = call.args[index - offset]
        passed = ctx.values.eval(cctx, arg) if arg else ()
        if any(fqn.rpartition(".")[2] not in words for _, fqn in passed):
            return False
    return True


def _vllm_classes(ctx: CheckContext, module: str, scope: str, base: str,
                  package: str) -> set[str]:
    """The analysed vLLM classes ``base`` is an instance of, when it can be
    nothing else (empty otherwise)."""
    values = ctx.values.eval((module, scope), base)
    if not values or any(kind != "inst" for kind, _ in values):
        return set()
    owners = {fqn for _, fqn in values}
    if not all(c.startswith(f"{package}.") and ctx.classes.is_class(c) and
               not ctx.is_subject(ctx.model.defs[c].module) and
               fully_analysed(ctx, c) and not any(
                   ctx.classes.find_member(c, n) for n in ("__getattr__", "__getattribute__"))
               for c in owners):
        return set()
    return owners
