"""The model: definitions and module namespaces over all indexed facts.

Name lookup follows Python: a module's namespace holds its top-level
definitions, the names its imports bind, its top-level aliases (``A = B``),
its submodules, and what ``from m import *`` brings (``__all__`` when given).
``canonical`` follows re-exports to the defining FQN.
"""

from __future__ import annotations

import builtins
from collections import defaultdict
from typing import NamedTuple

from kvflowmap.facts import (AssignFact, CallFact, ClassFact, ElementFact, FileFacts, FunctionFact,
                             ImportFact, ReturnFact)
from kvflowmap.model.cycles import CycleGuard
from kvflowmap.sources.roots import ModuleTable, SourceFile

BUILTINS = frozenset(dir(builtins))
_EMPTY: dict = {}


# Container methods that put elements (``index.extract_data``) and read none
_PUTS = frozenset({"append", "appendleft", "add", "insert", "update", "extend"})


def _module_reads(ff: FileFacts | None) -> dict[str, dict[str, list[int]]]:
    """scope -> name -> sorted lines where the scope reads the name
    (``Model.read_lines``); ``name|put`` for calls that only put into it."""
    reads: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    if ff is None:
        return {}
    for c in ff.calls:
        for text in (c.callee, *c.args, *(v for _, v in c.kwargs)):
            if text:
                reads[c.scope][_head(text)].append(c.line)
        if c.callee and c.callee.rpartition(".")[2] in _PUTS:
            reads[c.scope][f"{_head(c.callee)}|put"].append(c.line)
    for a in (*ff.assigns, *ff.binds):
        for text in (a.value, a.origin):
            if text:
                reads[a.scope][_head(text)].append(a.line)
    for e in ff.elements:
        reads[e.scope][_head(e.value)].append(e.line)
    for r in ff.refs:
        reads[r.scope][_head(r.name)].append(r.line)
    for x in ff.reads:
        reads[x.scope][_head(x.base)].append(x.line)
    for cmp in ff.compares:
        for text in cmp.operands:
            reads[cmp.scope][_head(text)].append(cmp.line)
    return {scope: {n: sorted(v) for n, v in names.items()} for scope, names in reads.items()}


def _head(text: str) -> str:
    """The name a chain starts with (``d`` of ``d[].get()``)."""
    for i, ch in enumerate(text):
        if ch in ".([":
            return text[:i]
    return text


class Def(NamedTuple):
    """A function or class defined in the analysed code (a named tuple with
    ``is_class`` stored: as an ``isinstance`` property it was 1.5% of linking,
    profiled)."""

    fqn: str
    module: str
    fact: FunctionFact | ClassFact
    is_class: bool


class Model:
    """Indexes over the facts of every analysed module."""

    def __init__(self, facts: dict[str, FileFacts], table: ModuleTable) -> None:
        self.facts = facts
        self.table = table
        self.defs: dict[str, Def] = {}
        self.imports: dict[tuple[str, str], list[ImportFact]] = defaultdict(list)
        self.assigns: dict[tuple[str, str], dict[str, list[AssignFact]]] = defaultdict(
            lambda: defaultdict(list))
        # what the value evaluator reads besides ``assigns``: loop and
        # unpacking bindings, and what is put into containers, by scope
        self.binds: dict[tuple[str, str], dict[str, list[AssignFact]]] = defaultdict(
            lambda: defaultdict(list))
        self.elements: dict[tuple[str, str], dict[str, list[ElementFact]]] = defaultdict(
            lambda: defaultdict(list))
        self._merged: dict[tuple[str, str], dict[str, list[AssignFact]]] | None = None
        self._by_scope: tuple[dict[tuple[str, str], list[CallFact]],
                              dict[tuple[str, str], list[ReturnFact]]] | None = None
        self._reads: dict[str, dict[str, dict[str, list[int]]]] = {}
        self._lookup_memo: dict[tuple[str, str], str | None] = {}
        self._cycles = CycleGuard()  # lookups and star imports ask each other
        self._star_memo: dict[str, frozenset[str]] = {}
        self._bindings: dict[tuple[str, str], dict[str, str]] = {}
        for module in sorted(facts):
            self._index_module(module, facts[module])

    def _index_module(self, module: str, ff: FileFacts) -> None:
        for fn in ff.functions:
            self.defs[f"{module}.{fn.qualname}"] = Def(f"{module}.{fn.qualname}", module, fn, False)
        for cls in ff.classes:
            self.defs[f"{module}.{cls.qualname}"] = Def(f"{module}.{cls.qualname}", module, cls, True)
        for imp in ff.imports:
            self.imports[(module, imp.scope)].append(imp)
        for a in ff.assigns:
            self.assigns[(module, a.scope)][a.target].append(a)
        for a in ff.binds:
            self.binds[(module, a.scope)][a.target].append(a)
        for e in ff.elements:
            self.elements[(module, e.scope)][e.group].append(e)

    def value_assigns(self, module: str, scope: str, name: str) -> list[AssignFact] | tuple[()]:
        """Assignments and bindings of ``name`` in a scope (the evaluator's view)."""
        if self._merged is None:  # scopes with bindings, merged once
            self._merged = {}
            for key, names in self.binds.items():
                own = self.assigns.get(key, _EMPTY)
                merged = dict(own)
                for n, v in names.items():
                    merged[n] = [*own.get(n, ()), *v]
                self._merged[key] = merged
        key = (module, scope)
        return (self._merged.get(key) or self.assigns.get(key, _EMPTY)).get(name, ())

    def read_lines(self, module: str, scope: str, name: str, *, elements: bool = False
                   ) -> list[int]:
        """Sorted lines where the scope's own code reads ``name`` (as the head
        of a chain: called, passed, assigned from, compared, an attribute
        read): what keeps an earlier value of a rebound name alive. With
        ``elements``, calls that only put into it (``name.append(f)``,
        ``name.update(...)``) are no reads of its elements."""
        by_scope = self._reads.get(module)
        if by_scope is None:  # built on first use, per module (most are never asked)
            by_scope = self._reads[module] = _module_reads(self.facts.get(module))
        names = by_scope.get(scope, _EMPTY)
        found = names.get(name, [])
        if elements and f"{name}|put" in names:
            puts = set(names[f"{name}|put"])
            found = [line for line in found if line not in puts]
        return found

    def scope_calls(self, module: str, scope: str) -> list[CallFact]:
        """The call sites of one scope (a function's own, not its nested defs')."""
        return self._scopes()[0].get((module, scope), [])

    def scope_returns(self, module: str, scope: str) -> list[ReturnFact]:
        """The returns of one scope."""
        return self._scopes()[1].get((module, scope), [])

    def _scopes(self) -> tuple[dict[tuple[str, str], list[CallFact]],
                               dict[tuple[str, str], list[ReturnFact]]]:
        # built on first use: only the passes that follow values ask
        if self._by_scope is None:
            calls: dict[tuple[str, str], list[CallFact]] = defaultdict(list)
            returns: dict[tuple[str, str], list[ReturnFact]] = defaultdict(list)
            for module, ff in self.facts.items():
                for c in ff.calls:
                    calls[(module, c.scope)].append(c)
                for r in ff.returns:
                    returns[(module, r.scope)].append(r)
            self._by_scope = (dict(calls), dict(returns))
        return self._by_scope

    # -- modules -------------------------------------------------------------
    def source(self, module: str) -> SourceFile | None:
        """The file of a module known to the roots (indexed or not)."""
        return self.table.files.get(module)

    def is_package(self, module: str) -> bool:
        sf = self.table.files.get(module)
        return bool(sf and sf.is_package)

    def absolute(self, module: str, imp: ImportFact) -> str:
        """Absolute module name of an import written in ``module``."""
        if imp.level == 0:
            return imp.module
        parts = module.split(".")
        base = parts if self.is_package(module) else parts[:-1]
        base = base[: len(base) - (imp.level - 1)] if imp.level > 1 else base
        return ".".join([*base, imp.module] if imp.module else base)

    def import_binding(self, module: str, imp: ImportFact) -> tuple[str, str] | None:
        """(bound name, target) for one import; None for ``*``."""
        if imp.name == "*":
            return None
        if imp.name is None:
            if imp.asname:
                return imp.asname, imp.module
            head = imp.module.split(".")[0]
            return head, head
        target = f"{self.absolute(module, imp)}.{imp.name}"
        return imp.asname or imp.name, target

    # -- namespaces ----------------------------------------------------------
    def lookup(self, module: str, name: str) -> str | None:
        """What top-level ``name`` of ``module`` refers to (before canonicalising)."""
        return self._cycles.memoised(self._lookup_memo, (module, name),
                                     lambda: self._lookup(module, name), None)

    def _lookup(self, module: str, name: str) -> str | None:
        own = f"{module}.{name}"
        d = self.defs.get(own)
        if d is not None and "." not in d.fact.qualname:
            return own
        bound = self._import_target(module, "", name)
        if bound is not None:
            return bound
        alias = self._alias(module, name)
        if alias is not None:
            return alias
        if own in self.table.files:
            return own
        for imp in self.imports.get((module, ""), ()):
            if imp.name == "*":
                src = self.absolute(module, imp)
                if name in self.star_names(src):
                    return self.lookup(src, name) or f"{src}.{name}"
        return None

    def _import_target(self, module: str, scope: str, name: str) -> str | None:
        """What an import in ``scope`` binds ``name`` to: the first runtime
        import of it whose module is in the analysed roots (``try: from
        lmcache... import X / except ImportError: from vllm... import X``
        binds vLLM's copy when lmcache is not analysed), else the first
        runtime one, else the last ``TYPE_CHECKING`` one."""
        key = (module, scope)
        bound = self._bindings.get(key)
        if bound is None:  # built once per scope: lookups are per name use
            runtime: dict[str, str] = {}
            typing_only: dict[str, str] = {}
            for imp in self.imports.get(key, ()):
                binding = self.import_binding(module, imp)
                if binding:
                    if imp.type_checking:
                        typing_only[binding[0]] = binding[1]
                    elif binding[0] not in runtime or (
                            not self._listed(runtime[binding[0]]) and
                            self._listed(binding[1])):
                        runtime[binding[0]] = binding[1]
            bound = self._bindings[key] = {**typing_only, **runtime}
        return bound.get(name)

    def _listed(self, target: str) -> bool:
        """``target`` (``pkg.mod`` or ``pkg.mod.Name``) is a module of the roots or in one."""
        return target in self.table.files or target.rpartition(".")[0] in self.table.files

    def _alias(self, module: str, name: str) -> str | None:
        """``A = B`` at module level, where B is a plain name chain and the
        name's only binding (a name bound twice is a variable: the evaluator
        unions its values, the first no longer wins)."""
        found = self.value_assigns(module, "", name)
        if len(found) != 1:
            return None
        for a in found:
            if a.value and "(" not in a.value and "[" not in a.value and a.value != name:
                head, _, rest = a.value.partition(".")
                target = self.lookup(module, head) if head != name else None
                if target:
                    return f"{target}.{rest}" if rest else target
        return None

    def star_names(self, module: str) -> frozenset[str]:
        """Names ``from module import *`` binds."""
        return self._cycles.memoised(self._star_memo, module, lambda: self._star_names(module),
                                     frozenset(), tag="star")

    def _star_names(self, module: str) -> frozenset[str]:
        ff = self.facts.get(module)
        names: set[str] = set()
        if ff is not None:
            if ff.dunder_all is not None:
                names = set(ff.dunder_all)
            else:
                names = {f.name for f in ff.functions if "." not in f.qualname}
                names |= {c.name for c in ff.classes if "." not in c.qualname}
                names |= {a.target for a in ff.assigns if a.scope == "" and "." not in a.target}
                for imp in self.imports.get((module, ""), ()):
                    b = self.import_binding(module, imp)
                    if b:
                        names.add(b[0])
                names = {n for n in names if not n.startswith("_")}
        return frozenset(names)

    def canonical(self, target: str, depth: int = 0) -> str:
        """Follow re-exports and aliases to the defining FQN (or leave as is)."""
        if depth > 30 or target in self.defs or target in self.table.files:
            return target
        parts = target.split(".")
        for i in range(len(parts) - 1, 0, -1):
            prefix = ".".join(parts[:i])
            if prefix in self.defs and self.defs[prefix].is_class:
                return target  # class members are resolved by the class layer
            if prefix in self.table.files:
                if prefix not in self.facts:
                    return target  # known module, not indexed
                nxt = self.lookup(prefix, parts[i])
                if nxt is None or nxt == ".".join(parts[: i + 1]):
                    return target
                rest = parts[i + 1:]
                return self.canonical(".".join([nxt, *rest]), depth + 1)
        return target

    def resolve_global(self, module: str, name: str) -> str | None:
        """Canonical target of a top-level name seen in ``module``."""
        t = self.lookup(module, name)
        if t is not None:
            return self.canonical(t)
        if name in BUILTINS:
            return f"<builtin>.{name}"
        return None
