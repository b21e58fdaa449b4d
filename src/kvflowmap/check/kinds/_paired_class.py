"""``paired`` with ``scope: class``: containers that some method fills are
emptied by some method of the same class.

For each target class, every ``self.<attr>`` container matching ``containers``
that a method of the class (or of a base class in the analysed code) adds to
(``add_ops``) must also be emptied somewhere: a removal (``remove_ops``), a
reset or swap (``self.<attr> = {}``, ``x = self.<attr>; self.<attr> = {}``), an
augmented assignment (``self.<attr> -= done``; the operator is not recorded,
so any augmented assignment counts) outside ``__init__``. With
``removal_from`` the emptying must happen in one of those methods or in a
function they call (transitively, along the graph's call and dispatch edges,
callbacks included). Nothing is path-sensitive here: per-path questions for
cross-method resources belong to the ``reach`` kind.
"""

from __future__ import annotations

from collections import deque

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds._paired_match import chain_matches
from kvflowmap.check.kinds._paired_spec import Spec
from kvflowmap.check.model import Finding
from kvflowmap.facts import CONTAINER_METHODS

Site = tuple[str, int, str]  # (function fqn, line, what happens)
RESET_EXEMPT = ("__init__", "__post_init__")


def check_class(ctx: CheckContext, spec: Spec) -> list[Finding]:
    """One finding per (class, container) that is filled but never emptied."""
    out: list[Finding] = []
    for cls in _classes(ctx):
        methods = _methods(ctx, cls)
        adds, removals = _sites(ctx, spec, methods)
        allowed = _reachable(ctx, cls, spec.removal_from) if spec.removal_from else None
        for chain in sorted(adds):
            done = [s for s in removals.get(chain, []) if allowed is None or s[0] in allowed]
            if done:
                continue
            fqn, line, what = adds[chain][0]
            out.append(ctx.finding(fqn, line, _message(spec, cls, chain, removals.get(chain)),
                                   path=_steps(ctx, adds[chain], removals.get(chain, [])),
                                   anchor=f"{chain}:{cls}"))
    return out


def _classes(ctx: CheckContext) -> list[str]:
    """Target classes, or the classes of the target functions."""
    if ctx.target_classes:
        return ctx.target_classes
    found = {f"{ctx.definition(f).module}.{ctx.function(f).class_qualname}"
             for f in ctx.target_functions if ctx.function(f).class_qualname}
    return sorted(c for c in found if c in ctx.model.defs)


def _methods(ctx: CheckContext, cls: str) -> list[str]:
    """Methods of ``cls`` and of its analysed bases, with nested functions."""
    by_class = _functions_by_class(ctx)
    return sorted(f for c in ctx.classes.mro(cls) for f in by_class.get(c, ()))


def _functions_by_class(ctx: CheckContext) -> dict[str, list[str]]:
    """Class FQN -> its methods and the functions nested in them (memoised on
    the context, which lives for one rule)."""
    cached = getattr(ctx, "_paired_by_class", None)
    if cached is not None:
        return cached
    out: dict[str, list[str]] = {}
    for fqn, d in ctx.model.defs.items():
        if d.is_class:
            continue
        qual = d.fact.qualname.split(".")
        for i in range(len(qual) - 1, 0, -1):  # the innermost enclosing class
            owner = f"{d.module}.{'.'.join(qual[:i])}"
            od = ctx.model.defs.get(owner)
            if od is not None and od.is_class:
                out.setdefault(owner, []).append(fqn)
                break
    setattr(ctx, "_paired_by_class", out)  # noqa: B010 - a memo, not a declared field
    return out


def _sites(ctx: CheckContext, spec: Spec, methods: list[str]
           ) -> tuple[dict[str, list[Site]], dict[str, list[Site]]]:
    adds: dict[str, list[Site]] = {}
    removals: dict[str, list[Site]] = {}
    for fqn in methods:
        d = ctx.definition(fqn)
        scope = d.fact.qualname
        ff = ctx.facts(fqn)
        for co in (c for c in ff.containers if c.scope == scope):
            if not co.container.startswith("self.") or \
                    not chain_matches(spec.containers, co.container):
                continue
            if co.op in spec.add_ops:
                adds.setdefault(co.container, []).append((fqn, co.line, f"adds ({co.op})"))
            elif co.op in spec.remove_ops:
                removals.setdefault(co.container, []).append((fqn, co.line, f"removes ({co.op})"))
        for call in (c for c in ff.calls if c.scope == scope):
            for chain, what in _call_removals(ctx, spec, fqn, call):
                removals.setdefault(chain, []).append((fqn, call.line, what))
        for ref in (r for r in ff.refs if r.scope == scope):
            chain, _, op = ref.name.rpartition(".")
            if op in spec.remove_ops and chain.startswith("self."):
                removals.setdefault(chain, []).append((fqn, ref.line, f"removes ({op}, callback)"))
        if d.fact.name in RESET_EXEMPT:
            continue
        for a in (a for a in ff.assigns if a.scope == scope and a.target.startswith("self.")):
            if chain_matches(spec.containers, a.target):
                what = "updates (augmented assignment)" if a.aug else "resets"
                removals.setdefault(a.target, []).append((fqn, a.line, what))
    for sites in (*adds.values(), *removals.values()):
        sites.sort(key=lambda s: (s[0], s[1]))
    return adds, removals


def _call_removals(ctx: CheckContext, spec: Spec, fqn: str, call) -> list[tuple[str, str]]:
    """Removals a call makes: ``self._c.difference_update(done)`` (no container
    fact is kept for it), or a helper that removes from the parameter it
    receives ``self._c`` in (``self._pop_and_record(event, self._pending)``)."""
    callee = call.callee or ""
    chain, _, op = callee.rpartition(".")
    if chain.startswith("self.") and op in spec.remove_ops and op not in CONTAINER_METHODS:
        return [(chain, f"removes ({op})")]
    passed = [(i, a) for i, a in enumerate(call.args) if a and a.startswith("self.")]
    passed += [(k, a) for k, a in call.kwargs if a and a.startswith("self.")]
    if not passed:
        return []
    out = []
    for target in ctx.resolve_call(fqn, call):
        d = ctx.model.defs.get(target.fqn)
        if target.external or d is None or d.is_class:
            continue
        params = [p.name for p in d.fact.params]
        if d.fact.class_qualname and callee.split(".")[0] in ("self", "cls") and params:
            params = params[1:]  # bound call: the first parameter is self
        helper_ops = {(c.container, c.op) for c in ctx.model.facts[d.module].containers
                      if c.scope == d.fact.qualname}
        for where, chain in passed:
            name = where if isinstance(where, str) else (params[where] if where < len(params) else "")
            if any(c == name and o in spec.remove_ops for c, o in helper_ops):
                out.append((chain, f"removes (in {target.fqn.rpartition('.')[2]}())"))
    return out


def _reachable(ctx: CheckContext, cls: str, names: tuple[str, ...]) -> set[str]:
    """Functions reachable from the named methods of ``cls`` (found along the
    MRO) through call and dispatch edges."""
    starts = [m for n in names if (m := ctx.classes.find_member(cls, n)) is not None]
    seen = set(starts)
    queue = deque(starts)
    while queue:
        f = queue.popleft()
        if f not in ctx.graph:
            continue
        for _, g, data in ctx.graph.out_edges(f, data=True):
            if data.get("kind") in ("call", "dispatch") and g not in seen:
                seen.add(g)
                queue.append(g)
    # Nested functions (callbacks, closures) run on behalf of their parent.
    return seen | {f for f in ctx.model.defs if any(f.startswith(f"{s}.") for s in seen)}


def _message(spec: Spec, cls: str, chain: str, removals: list[Site] | None) -> str:
    name = cls.rpartition(".")[2]
    if not removals:
        return (f"{spec.resource} entries are added to `{chain}` but no method of {name} "
                f"ever removes them")
    where = ", ".join(sorted({f"{f.rpartition('.')[2]}()" for f, _, _ in removals}))
    named = ", ".join(f"{n}()" for n in spec.removal_from)
    return (f"{spec.resource} entries are added to `{chain}` but only {where} removes them, "
            f"which is not reached from {named}")


def _steps(ctx: CheckContext, adds: list[Site], removals: list[Site]):
    steps = [ctx.step(f, line, f"{what} in `{_short(f)}`") for f, line, what in adds]
    steps += [ctx.step(f, line, f"{what} in `{_short(f)}`, off the removal paths")
              for f, line, what in removals]
    return tuple(steps)


def _short(fqn: str) -> str:
    return fqn.rpartition(".")[2] + "()"
