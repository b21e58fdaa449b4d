"""vLLM's own methods that run on the subject's objects.

A connector that subclasses one of vLLM's connector classes (a vendor's NIXL
worker deriving from vLLM's) runs vLLM's methods on its objects: the
inherited ``start_load_kv`` hands each id to the subject's override of
``_read_blocks_for_req``, and the inherited ``get_transfer_results`` (reached
through the override's ``super()``) takes them out of the subject's
containers and reports them. The lifecycle model lets ids flow through these
methods and starts the subject's overrides from them; rules still judge the
subject's own functions only.
"""

from __future__ import annotations

from kvflowmap.facts import CallFact
from kvflowmap.lifecycle.view import FnView, view


def inherited_methods(model, classes, fns: dict[str, FnView], values
                      ) -> tuple[dict[str, FnView], dict[str, frozenset[str]]]:
    """The methods of context classes (the analysed vLLM) in the MRO of a
    subject class that its objects run: the first definition of a name
    along the MRO, and each one after it that the one before reaches by
    ``super().m()``; with, per method, the subject classes whose objects
    run it."""
    subject_classes = sorted({fn.self_cls for fn in fns.values() if fn.self_cls})
    views: dict[str, FnView | None] = {}

    def fn_view(fqn: str) -> FnView | None:
        if fqn not in views:
            views[fqn] = fns.get(fqn) or view(model, fqn)
        return views[fqn]

    out: dict[str, FnView] = {}
    runs_on: dict[str, set[str]] = {}
    for cls in subject_classes:
        names = {f.qualname.rpartition(".")[2] for k in classes.mro(cls)
                 if (d := model.defs.get(k)) is not None and d.is_class
                 for f in model.facts[d.module].functions
                 if f.qualname.rpartition(".")[0] == k[len(d.module) + 1:]}
        for name in sorted(names):
            fqn = classes.find_member(cls, name)
            while fqn is not None and (v := fn_view(fqn)) is not None:
                if fqn not in fns and not values.body_replaced(fqn):
                    out[fqn] = v
                    runs_on.setdefault(fqn, set()).add(cls)
                if not v.cls or not any((c.callee or "") == f"super().{name}"
                                        for c in v.all_calls):
                    break
                fqn = classes.find_member(cls, name, after=v.cls)
    return out, {k: frozenset(v) for k, v in runs_on.items()}


def _self_targets(fn: FnView, runners: frozenset[str], classes) -> set[str]:
    """What ``self.m()`` and ``super().m()`` in ``fn`` run on the objects of
    the classes ``runners``: the definition of ``m`` along each one's MRO."""
    out = set()
    for c in fn.all_calls:
        head, _, m = (c.callee or "").partition(".")
        if head not in ("self", "super()") or not m.isidentifier():
            continue
        for cls in runners:
            t = classes.find_member(cls, m) if head == "self" else \
                classes.find_member(cls, m, after=fn.cls) if fn.cls else None
            if t is not None:
                out.add(t)
    return out


def _walk(inherited: dict[str, FnView], runs_on: dict[str, frozenset[str]], classes,
          starts: list[str]) -> tuple[set[str], set[str]]:
    """From the inherited methods ``starts``, following their ``self`` calls:
    (the inherited methods reached, everything else they call on ``self``)."""
    seen, beyond, todo = set(starts), set(), list(starts)
    while todo:
        f = todo.pop()
        for t in _self_targets(inherited[f], runs_on.get(f, frozenset()), classes):
            if t not in inherited:
                beyond.add(t)
            elif t not in seen:
                seen.add(t)
                todo.append(t)
    return seen, beyond


def reached(inherited: dict[str, FnView], runs_on: dict[str, frozenset[str]],
            fns: dict[str, FnView], classes, hooks: set[str]
            ) -> tuple[dict[str, FnView], dict[str, frozenset[str]]]:
    """Of the inherited methods, those that run: vLLM calls one (a hook by
    name), a subject function calls one (``self.m()``, ``super().m()``), or
    one that runs calls it on ``self``."""
    starts = {f for f, v in inherited.items() if v.name in hooks}
    for fn in fns.values():
        if fn.self_cls is not None:
            starts |= _self_targets(fn, frozenset({fn.self_cls}), classes) & set(inherited)
    seen, _ = _walk(inherited, runs_on, classes, sorted(starts))
    return ({f: v for f, v in inherited.items() if f in seen},
            {f: r for f, r in runs_on.items() if f in seen})


def override_calls(inherited: dict[str, FnView], fns: dict[str, FnView], classes
                   ) -> dict[str, list[tuple[CallFact, str]]]:
    """Per inherited method, its ``self.m(...)`` calls that run a subject
    override of ``m`` on the subject's objects (the call graph resolves them
    to the context class's own ``m``)."""
    subject_classes = sorted({fn.self_cls for fn in fns.values() if fn.self_cls})
    out: dict[str, list[tuple[CallFact, str]]] = {}
    for fqn, fn in inherited.items():
        owner = fn.self_cls
        if owner is None:
            continue
        for c in fn.all_calls:
            head, _, name = (c.callee or "").partition(".")
            if head != "self" or not name.isidentifier() or not (c.args or c.kwargs):
                continue
            for cls in subject_classes:
                if owner in classes.mro(cls):
                    t = classes.find_member(cls, name)
                    if t in fns:
                        out.setdefault(fqn, []).append((c, t))
    return out


def inherited_starts(inherited: dict[str, FnView], runs_on: dict[str, frozenset[str]],
                     fns: dict[str, FnView], classes, names: set[str] | frozenset[str]
                     ) -> list[str]:
    """The subject functions vLLM's own methods run on the subject's objects,
    starting from those named in ``names`` (hooks): ``self.m()`` in an
    inherited method runs the ``m`` of the object's class, a subject override
    (an entry) or another inherited method (followed)."""
    _, beyond = _walk(inherited, runs_on, classes, [f for f in inherited
                                                    if inherited[f].name in names])
    return sorted(beyond & set(fns))


def packages_of(model, fns: dict[str, FnView]) -> list[str]:
    """The modules of the packages holding ``fns`` (their metadata classes
    declare the id fields the inherited methods read)."""
    pkgs = {fn.module.rpartition(".")[0] for fn in fns.values()}
    return [m for m in sorted(model.facts) if m.rpartition(".")[0] in pkgs]
