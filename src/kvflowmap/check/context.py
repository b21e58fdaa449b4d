"""What a rule kind sees: the analysis, the rule, and helpers to report."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, TypeVar

import networkx as nx

from kvflowmap.check.model import Finding, Rule, Step
from kvflowmap.facts import CallFact, FileFacts, FunctionFact
from kvflowmap.model.calls import Target
from kvflowmap.model.core import Def

if TYPE_CHECKING:
    from kvflowmap.api import Analysis
    from kvflowmap.lifecycle.model import Lifecycle

_LIFECYCLE = "_kvflowmap_lifecycle"
_GATED = "_kvflowmap_gated_off"
T = TypeVar("T")


@dataclass
class CheckContext:
    """Shared by every kind; cheap to create per rule."""

    analysis: Analysis
    rule: Rule

    @property
    def graph(self) -> nx.MultiDiGraph:
        return self.analysis.graph

    @property
    def linker(self):
        return self.analysis.linker

    @property
    def model(self):
        return self.analysis.linker.model

    @property
    def classes(self):
        return self.analysis.linker.classes

    @property
    def values(self):
        return self.analysis.linker.values

    @property
    def protocol(self):
        return self.analysis.linker.protocol

    def lifecycle(self) -> Lifecycle:
        """The lifecycle model of the analysis, built on first use and kept on
        it (it depends only on the analysis: every rule sees the same model)."""
        from kvflowmap.lifecycle.model import build_lifecycle

        return self._once(_LIFECYCLE, lambda: build_lifecycle(self.linker))

    def gated_off(self) -> dict[str, str]:
        """Subject modules that do not load on the analysed vLLM, and why
        (``check.gated_modules``); computed once per analysis."""
        from kvflowmap.check.gated_modules import gated_off

        return self._once(_GATED, lambda: gated_off(self.model, self.analysis.vllm_version,
                                                    self.protocol.aligned_plugins))

    def _once(self, key: str, build: Callable[[], T]) -> T:
        """``build()`` kept on the analysis under ``key`` for its linker."""
        found = getattr(self.analysis, key, None)
        if found is None or found[0] is not self.linker:
            found = (self.linker, build())
            setattr(self.analysis, key, found)
        return found[1]

    def other_release(self, ref: str) -> tuple[Analysis, str]:
        """Another vLLM release (``vllm==0.X.Y`` or an import root) analysed
        on its own, and its label; once per process."""
        from kvflowmap.check.releases import other_release

        return other_release(ref)

    # -- targets -------------------------------------------------------------
    def is_subject(self, module: str) -> bool:
        sf = self.model.source(module)
        return bool(sf and sf.subject)

    @cached_property
    def target_classes(self) -> list[str]:
        """Analysed classes the rule applies to, sorted."""
        at = self.rule.applies_to
        out = []
        for fqn, d in sorted(self.model.defs.items()):
            if not d.is_class or not self._module_ok(d.module):
                continue
            if at.base_class and not any(b in self.classes.mro(fqn) and b != fqn
                                         for b in at.base_class):
                continue
            if at.classes and not any(fnmatch.fnmatch(fqn, p) for p in at.classes):
                continue
            out.append(fqn)
        return out

    def _module_ok(self, module: str) -> bool:
        at = self.rule.applies_to
        if not at.include_context and not self.is_subject(module):
            return False
        return not at.modules or any(fnmatch.fnmatch(module, p) for p in at.modules)

    @cached_property
    def target_functions(self) -> list[str]:
        """Functions the rule applies to: methods defined in target classes,
        or, for a rule with only a module filter, every function there."""
        at = self.rule.applies_to
        out = []
        if at.base_class or at.classes:
            classes = set(self.target_classes)
            for fqn, d in self.model.defs.items():
                if not d.is_class and d.fact.class_qualname and \
                        f"{d.module}.{d.fact.class_qualname}" in classes:
                    out.append(fqn)
        else:
            out = [fqn for fqn, d in self.model.defs.items()
                   if not d.is_class and self._module_ok(d.module)]
        # a def whose decorator replaces it by a forwarding wrapper never runs
        return sorted(f for f in out if not self.values.body_replaced(f))

    def methods_named(self, name: str) -> list[str]:
        """Target-class methods called ``name`` (own definitions only)."""
        return [f for f in self.target_functions if f.rpartition(".")[2] == name]

    # -- facts ---------------------------------------------------------------
    def definition(self, fqn: str) -> Def:
        return self.model.defs[fqn]

    def function(self, fqn: str) -> FunctionFact:
        return self.model.defs[fqn].fact

    def facts(self, fqn: str) -> FileFacts:
        return self.model.facts[self.model.defs[fqn].module]

    def calls_in(self, fqn: str) -> list[CallFact]:
        d = self.model.defs[fqn]
        return [c for c in self.model.facts[d.module].calls if c.scope == d.fact.qualname]

    def resolve_call(self, fqn: str, call: CallFact) -> list[Target]:
        d = self.model.defs[fqn]
        return self.linker.calls.resolve((d.module, call.scope), call)

    # -- reporting -----------------------------------------------------------
    def where(self, fqn: str) -> tuple[str, str, str]:
        """(file relative to root, root label, absolute path) of a definition."""
        module = self.model.defs[fqn].module if fqn in self.model.defs else fqn
        sf = self.model.source(module)
        if sf is None:
            return "", "", ""
        return sf.rel, sf.root.label, str(sf.path)

    def step(self, fqn: str, line: int, note: str) -> Step:
        return Step(self.where(fqn)[0], line, fqn, note)

    def finding(self, fqn: str, line: int, message: str, *, column: int = 1,
                path: tuple[Step, ...] = (), anchor: str = "") -> Finding:
        """A finding of this rule inside function (or class) ``fqn``."""
        file, root, abspath = self.where(fqn)
        return Finding(rule=self.rule.id, severity=self.rule.severity, message=message,
                       file=file, line=line, column=column, function=fqn, root=root,
                       abspath=abspath, path=path, anchor=anchor)
