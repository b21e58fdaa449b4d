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

from dataclasses import dataclass

from kvflowmap.check.kinds.conforms_compare import compare
from kvflowmap.check.kinds.conforms_contract import method_kind
from kvflowmap.check.kinds.conforms_signatures import Sig, annotation_heads
from kvflowmap.compat.connector import ConnectorCode
from kvflowmap.compat.findings import Finding
from kvflowmap.compat.guards import Guards, collection_uses, find_guards, isinstance_branches
from kvflowmap.compat.model import Method, Surface
from kvflowmap.compat.related import Canon, Related
from kvflowmap.facts import FunctionFact
from kvflowmap.protocol import Protocol, version_key

_COLLECTIONS = {"set", "frozenset", "list", "tuple", "dict"}


@dataclass
class Run:
    """One class on one release, with what every check needs."""

    code: ConnectorCode
    cls: str
    surface: Surface
    others: list[Surface]  # the other releases of the run
    canon: Canon
    protocol: Protocol
    rows: frozenset[str] = frozenset()  # the classes of the matrix

    def __post_init__(self) -> None:
        self.bases = [self.canon(b) for b in self.code.external_bases(self.cls)]
        self.contract = [k for b in self.bases for k in self.surface.mro(b)]
        self.methods = self.code.methods(self.cls)
        # A method inherited from another row of the matrix is reported on that row.
        inherited = {m for k in self.code.ancestors(self.cls)[1:] if k in self.rows
                     for m in self.code.methods(k)}
        self.reported = {n: mf for n, mf in self.methods.items()
                         if n not in inherited or n in self._own()}

    def _own(self) -> set[str]:
        c = self.code.classes[self.cls]
        return {f.name for f in self.code.facts[c.module].functions
                if f.class_qualname == c.fact.qualname}

    def param_history(self, name: str, index: int) -> dict[str, str | None]:
        """Release -> annotation of parameter ``index`` of base method ``name``
        over the releases of the run that have it."""
        out: dict[str, str | None] = {}
        for s in [self.surface, *self.others]:
            for b in self.bases:
                m = next((s.method(k, name) for k in s.mro(b) if s.method(k, name)), None)
                if m is not None and index < len(m.params):
                    out[s.version] = m.params[index].annotation
                    break
        return out

    def finding(self, severity: str, kind: str, message: str, module: str, line: int,
                base_where: object = None) -> Finding:
        where = f"{self.code.display(module)}:{line}"
        return Finding(self.cls, self.surface.version, severity, kind, message, where,
                       str(base_where) if base_where else None)

    def base_of(self, name: str) -> Method | None:
        """The release's base method ``name`` nearest along the contract MRO."""
        for k in self.contract:
            m = self.surface.method(k, name)
            if m is not None:
                return m
        return None

    def elsewhere(self, name: str) -> list[str]:
        """The other releases whose contract classes have method ``name``."""
        return [s.version for s in self.others
                if any(s.method(self.canon(k), name) for b in self.bases for k in s.mro(b))]


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
            why = guards.param_guard(param) if key.startswith("ann:") else None
            if why:
                out.append(run.finding("guarded", "guarded", f"{name}: {issue}; accepted: "
                                       f"{why}", module, fn.line, base.where))
            else:
                out.append(run.finding("error", key.partition(":")[0] or "signature",
                                       f"{name} {issue} (vLLM {run.surface.version}: "
                                       f"{base.signature})", module, fn.line, base.where))
        out += _collection_use(run, module, fn, base, guards.param_guard)
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
        tested = set(guards.isinstance_types.get(p.name, ()))
        heads = set(base.heads[i] or ())
        branch = "the isinstance branch" if tested & heads else "the other branch"
        out.append(run.finding("guarded", "guarded", f"{fn.name}: vLLM {run.surface.version} "
                               f"passes {p.name} as {base.params[i].annotation} (other releases: "
                               f"{_others(history, run.surface.version)}); "
                               f"{guards.isinstance_params[p.name]}: {branch} runs",
                               module, fn.line, base.where))
    return out


def _others(history: dict[str, str | None], version: str) -> str:
    by: dict[str, list[str]] = {}
    for v, a in sorted(history.items(), key=lambda va: version_key(va[0])):
        if a != history[version]:
            by.setdefault(str(a), []).append(v)
    return "; ".join(f"{a} in {', '.join(vs)}" for a, vs in by.items())


def _collection_use(run: Run, module: str, fn: FunctionFact, base: Method,
                    guard) -> list[Finding]:
    """An unannotated parameter used as a collection where this release passes
    an object (``handle_preemptions``: a set of ids became ``KVConnectorMetadata``).
    Behind ``if isinstance(param, T)`` only the branch this release takes counts."""
    out: list[Finding] = []
    kind = method_kind(fn)
    params = fn.params if kind == "static" else fn.params[1:]
    facts = run.code.facts[module]
    for i, (p, heads) in enumerate(zip(params, base.heads, strict=False)):
        if p.annotation or i >= len(base.params) or not heads or set(heads) & _COLLECTIONS:
            continue
        uses = collection_uses(fn, facts, p.name)
        if not uses:
            continue
        branches = isinstance_branches(fn, p.name)
        if branches is not None:
            taken_if = bool(set(branches.types) & {h.rpartition(".")[2] for h in heads} |
                            set(branches.types) & set(heads))
            skipped = branches.when_false if taken_if else branches.when_true
            uses = [ln for ln in uses if not skipped[0] <= ln <= skipped[1]]
            why = guard(p.name)
            if not uses:
                out.append(run.finding("guarded", "guarded", f"{fn.name}: uses '{p.name}' as a "
                                       f"collection only where it is not a "
                                       f"{base.params[i].annotation} ({why})", module,
                                       fn.line, base.where))
                continue
        elif guard(p.name):
            out.append(run.finding("guarded", "guarded", f"{fn.name}: uses '{p.name}' as a "
                                   f"collection, vLLM {run.surface.version} passes "
                                   f"{base.params[i].annotation}; accepted: {guard(p.name)}",
                                   module, uses[0], base.where))
            continue
        where = "on the branch that runs for it" if branches is not None else ""
        out.append(run.finding("error", "collection", f"{fn.name} uses '{p.name}' as a "
                               f"collection{' ' + where if where else ''}, but vLLM "
                               f"{run.surface.version} passes {base.params[i].annotation} "
                               f"({base.signature})", module, uses[0], base.where))
    return out


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
    """A hook the release calls only from base methods this class overrides."""
    sites = run.surface.calls_of(name)
    if not sites or any(c.where.file != base.where.file for c in sites):
        return []
    callers = {c.caller.rpartition(".")[2] for c in sites}
    if not callers or not all(c in run.methods for c in callers) or _self_called(run, name):
        return []
    return [run.finding("warning", "not-called", f"{name}: vLLM {run.surface.version} calls it "
                        f"only from the base's {', '.join(sorted(callers))}, which this class "
                        "overrides: never called", module, fn.line, base.where)]


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
