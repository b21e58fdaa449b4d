"""The checks of one connector class against one release's surface. Each
returns findings; ``matrix`` runs them for every class and release.

- overrides: each override stays callable the way the release calls its base
  (the ``conforms`` comparison, shared), with version-guarded parameters
  accepted, and unannotated parameters used as a collection where the
  release passes an object;
- hooks the release does not have or never calls (dead code that looks alive);
- abstract methods of the release left unimplemented;
- ``self.X`` / ``super().X`` members another release's base has and this one lacks;
- ``vllm.envs`` names the release does not define;
- names imported from the base modules that the release does not define;
- carriers of the release the connector never fills (``failed_recving``)."""

from __future__ import annotations

from kvflowmap.check.kinds.conforms_compare import compare
from kvflowmap.check.kinds.conforms_contract import method_kind
from kvflowmap.check.kinds.conforms_signatures import Sig, annotation_heads
from kvflowmap.compat.branches import Problem
from kvflowmap.compat.context import Run
from kvflowmap.compat.findings import Finding
from kvflowmap.compat.guarded import oracle, settle
from kvflowmap.compat.guards import Guards, collection_uses, find_guards
from kvflowmap.compat.model import Method
from kvflowmap.compat.related import Related
from kvflowmap.compat.returns import check_return as _returns
from kvflowmap.facts import FunctionFact
from kvflowmap.protocol import version_key

_COLLECTIONS = {"set", "frozenset", "list", "tuple", "dict"}


def base_sig(m: Method) -> Sig:
    """The ``conforms`` signature model of a surface method."""
    heads = tuple(None if h is None else frozenset(h) for h in m.heads)
    return Sig(m.kind, m.is_async, m.params, heads, None, m.returns, m.signature)


def _override_sig(run: Run, module: str, fn: FunctionFact) -> Sig:
    names, kind = run.code.names[module], method_kind(fn)
    params = fn.params if kind == "static" else fn.params[1:]
    resolve = lambda n: names.annotation(n)  # noqa: E731
    heads = tuple(annotation_heads(p.annotation, resolve) for p in params)
    return Sig(kind, fn.is_async, params, heads, None, fn.returns, f"def {fn.name}(…)")


def _override_name(base: Method, over: Sig, name: str) -> str:
    """The override's name for base parameter ``name`` (same position, or keyword)."""
    pos = [p.name for p in base.params if p.kind in ("posonly", "pos")]
    mine = [p.name for p in over.params if p.kind in ("posonly", "pos")]
    if name in pos and pos.index(name) < len(mine):
        return mine[pos.index(name)]
    return name


def check_overrides(run: Run) -> list[Finding]:
    """Overrides that break how the release calls the base, or accepted by a guard."""
    out: list[Finding] = []
    related = Related(run.surface, run.code, run.canon)
    for name, (module, fn) in sorted(run.reported.items()):
        base = run.base_of(name)
        if base is None or name.startswith("__") and name != "__init__":
            continue
        sites = run.surface.calls_of(name)
        passed = None if not sites else {"*pos": max(c.positional for c in sites),
                                         **{k: 1 for c in sites for k in c.keywords}}
        guards = find_guards(fn, run.code.facts[module])
        over = _override_sig(run, module, fn)
        for key, issue in compare(base_sig(base), over, passed, related, returns=False):
            param = key.partition(":")[2]
            why = guards.param_guard(_override_name(base, over, param)) or \
                guards.param_guard(param) if key.startswith("ann:") else None
            if why:
                out.append(run.finding("guarded", "guarded", f"{name}: {issue}; accepted: "
                                       f"{why}", module, fn.line, base.where))
            else:
                out.append(run.finding("error", key.partition(":")[0] or "signature",
                                       f"{name} {issue} (vLLM {run.surface.version}: "
                                       f"{base.signature})", module, fn.line, base.where))
        out += _returns(run, module, fn, base, related)
        out += _collection_use(run, module, fn, base)
        out += _guarded_change(run, module, fn, base, guards)
    return out


def _guarded_change(run: Run, module: str, fn: FunctionFact, base: Method,
                    guards: Guards) -> list[Finding]:
    """A parameter whose base annotation differs across the run's releases and
    that the override tests with isinstance: which branch this release takes."""
    out: list[Finding] = []
    kind = method_kind(fn)
    params = fn.params if kind == "static" else fn.params[1:]
    for i, p in enumerate(params[:len(base.params)]):
        history = run.param_history(fn.name, i)
        if len(set(history.values())) < 2 or p.name not in guards.isinstance_params:
            continue
        tested = tuple(t.strip() for x in guards.isinstance_types.get(p.name, ())
                       for t in x.strip("()").split(",") if t.strip())
        taken = oracle(run, run.surface, module, fn).isinstance_of(p.name, tested)
        branch = {True: "the isinstance branch runs", False: "the other branch runs",
                  None: "either branch may run (a subclass of what it passes)"}[taken]
        out.append(run.finding("guarded", "guarded", f"{fn.name}: vLLM {run.surface.version} "
                               f"passes {p.name} as {base.params[i].annotation} (other releases: "
                               f"{_others(history, run.surface.version)}); "
                               f"{guards.isinstance_params[p.name]}: {branch}",
                               module, fn.line, base.where))
    return out


def _others(history: dict[str, str | None], version: str) -> str:
    by: dict[str, list[str]] = {}
    for v, a in sorted(history.items(), key=lambda va: version_key(va[0])):
        if a != history[version]:
            by.setdefault(str(a), []).append(v)
    return "; ".join(f"{a} in {', '.join(vs)}" for a, vs in by.items())


def _collection_use(run: Run, module: str, fn: FunctionFact, base: Method) -> list[Finding]:
    """An unannotated parameter used as a collection where this release passes
    an object (``handle_preemptions``: a set of ids became ``KVConnectorMetadata``):
    iterating it raises TypeError. Behind a guard (``isinstance``, ``hasattr``,
    a version test, ``try/except TypeError``) only the branch that runs counts."""
    problems: list[Problem] = []
    kind = method_kind(fn)
    params = fn.params if kind == "static" else fn.params[1:]
    facts = run.code.facts[module]
    for i, (p, heads) in enumerate(zip(params, base.heads, strict=False)):
        if p.annotation or i >= len(base.params) or not heads or set(heads) & _COLLECTIONS:
            continue
        for line in collection_uses(fn, facts, p.name):
            problems.append(Problem(line, "TypeError", "error", "collection",
                                    f"{fn.name} uses '{p.name}' as a collection, but vLLM "
                                    f"{run.surface.version} passes {base.params[i].annotation} "
                                    f"({base.signature})", base.where))
    return settle(run, module, fn, problems)


def check_hooks(run: Run) -> list[Finding]:
    """Overrides of hooks the release does not have, or never calls."""
    out: list[Finding] = []
    for name, (module, fn) in sorted(run.reported.items()):
        if name.startswith("_"):
            continue
        base = run.base_of(name)
        if base is None:
            seen = run.elsewhere(name)
            older = [v for v in seen if version_key(v) < version_key(run.surface.version)]
            if older:
                out.append(run.finding("warning", "not-called", f"{name} overrides a hook "
                                       f"removed after vLLM {max(older, key=version_key)}: "
                                       "dead code, never called", module, fn.line))
            elif seen:
                out.append(run.finding("note", "not-yet", f"{name}: a hook added in vLLM "
                                       f"{min(seen, key=version_key)}: not called before",
                                       module, fn.line))
            continue
        out += _never_called(run, name, module, fn, base)
    return out


def _never_called(run: Run, name: str, module: str, fn: FunctionFact,
                  base: Method) -> list[Finding]:
    """A hook the release calls only from base methods this class overrides,
    or no longer calls at all (``no-caller``)."""
    sites = run.surface.calls_of(name)
    if not sites:
        return _no_caller(run, name, module, fn, base)
    if any(c.where.file != base.where.file for c in sites):
        return []
    callers = {c.caller.rpartition(".")[2] for c in sites}
    if not callers or not all(c in run.methods for c in callers) or _self_called(run, name):
        return []
    return [run.finding("warning", "not-called", f"{name}: vLLM {run.surface.version} calls it "
                        f"only from the base's {', '.join(sorted(callers))}, which this class "
                        "overrides: never called", module, fn.line, base.where)]


def _no_caller(run: Run, name: str, module: str, fn: FunctionFact,
               base: Method) -> list[Finding]:
    """A hook the release's base still declares but nothing in the release
    calls, where an older release of the run did: the override looks alive and
    never runs. Only against a release that called it, so a caller the surface
    cannot see (never found in any release) reports nothing."""
    version = version_key(run.surface.version)
    older = sorted((s for s in run.others if version_key(s.version) < version
                    and s.calls_of(name)), key=lambda s: version_key(s.version))
    if not older or _self_called(run, name):
        return []
    last = older[-1]
    site = last.calls_of(name)[0]
    return [run.finding("warning", "no-caller", f"{name}: vLLM {run.surface.version}'s base "
                        f"still declares it, but nothing in vLLM {run.surface.version} calls it "
                        f"(vLLM {last.version} did, from {site.caller.rpartition('.')[2]} at "
                        f"{site.where}): dead code that looks alive", module, fn.line,
                        base.where)]


def _self_called(run: Run, name: str) -> bool:
    """Whether a method of the class calls ``self.name(...)`` (its own
    ``get_transfer_results`` building on its ``get_finished``)."""
    for module, fn in run.methods.values():
        me = fn.params[0].name if fn.params else "self"
        if any(c.scope == fn.qualname and c.callee == f"{me}.{name}"
               for c in run.code.facts[module].calls):
            return True
    return False


def check_abstract(run: Run) -> list[Finding]:
    """Abstract methods of the release that a leaf class leaves unimplemented."""
    fact = run.code.classes[run.cls].fact
    module = run.code.classes[run.cls].module
    if run.code.subclasses(run.cls) or any(f.abstract for _, f in run.methods.values()):
        return []
    out: list[Finding] = []
    for k in run.contract:
        for name, m in sorted(run.surface.classes[k].methods.items()):
            if m.abstract and name not in run.methods and not _concrete(run, name, k):
                out.append(run.finding("error", "abstract", f"does not implement {name}, "
                                       f"abstract in {k.rpartition('.')[2]} (vLLM "
                                       f"{run.surface.version}): creating it raises TypeError",
                                       module, fact.line, m.where))
    return out


def _concrete(run: Run, name: str, owner: str) -> bool:
    """Whether a contract class before ``owner`` in the MRO defines ``name`` concretely."""
    for k in run.contract[:run.contract.index(owner)]:
        m = run.surface.method(k, name)
        if m is not None and not m.abstract:
            return True
    return False
