"""Resolve call sites, property reads and function references to targets."""

from __future__ import annotations

from typing import NamedTuple

from kvflowmap.facts import CallFact
from kvflowmap.model.classes import ClassIndex
from kvflowmap.model.core import Model
from kvflowmap.model.values import Ctx, Evaluator


class Target(NamedTuple):
    """One resolved callee: an analysed def, a class, or an external name.

    A named tuple, not a frozen dataclass: linking builds hundreds of
    thousands, and the frozen ``__init__`` was a tenth of the link time."""

    fqn: str
    external: bool = False


class CallResolver:
    """Turns callee chains into targets using the evaluator."""

    def __init__(self, model: Model, classes: ClassIndex, values: Evaluator) -> None:
        self.model = model
        self.classes = classes
        self.values = values
        # Linking resolves every call once; rules ask again for the calls of
        # the functions they check (on PegaFlow + vLLM: 46,304 look-ups of
        # 15,573 distinct (scope, callee) pairs, profiled).
        self._memo: dict[tuple[Ctx, str], tuple[Target, ...]] = {}

    def resolve(self, ctx: Ctx, call: CallFact) -> list[Target]:
        """Targets of one call site; empty when it cannot be resolved."""
        callee = call.callee
        if not callee:
            return []
        key = (ctx, callee)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = tuple(self._resolve(ctx, callee))
        return list(found)

    def _resolve(self, ctx: Ctx, callee: str) -> list[Target]:
        if callee.startswith("super()."):
            return self._super(ctx, callee[len("super()."):])
        if callee == "super":
            return []
        out: list[Target] = []
        for kind, fqn in self.values.eval(ctx, callee):
            out.extend(self._targets_of(kind, fqn))
        return _dedupe(out)

    def _targets_of(self, kind: str, fqn: str) -> list[Target]:
        if kind == "func":
            return [Target(fqn)]
        if kind == "class":
            return [Target(self.constructor(fqn))]
        if kind == "ext":
            return [Target(fqn, external=True)]
        if kind == "inst" and self.classes.is_class(fqn):
            call = self.classes.find_member(fqn, "__call__")
            return [Target(call)] if call else []
        if kind == "inst":
            return [Target(f"{fqn}.__call__", external=True)]
        return []

    def constructor(self, cls: str) -> str:
        """``C()`` runs the first ``__init__`` along C's MRO, else the class."""
        return self.classes.find_member(cls, "__init__") or cls

    def _super(self, ctx: Ctx, rest: str) -> list[Target]:
        fn = self.values.function(ctx)
        if fn is None or fn.class_qualname is None:
            return []
        cls = f"{ctx[0]}.{fn.class_qualname}"
        name = rest.split(".")[0].rstrip("()")
        found = self.classes.find_member(cls, name, after=cls)
        if found is not None:
            return [Target(found)]
        ext = [k for k in self.classes.mro(cls)[1:] if not self.classes.is_class(k)]
        return [Target(f"{ext[0]}.{name}", external=True)] if ext else []

    def reference(self, ctx: Ctx, name: str) -> list[Target]:
        """A name used as a value: analysed functions only (callbacks)."""
        out = []
        for kind, fqn in self.values.eval(ctx, name):
            if kind == "func":
                out.append(Target(fqn))
        return _dedupe(out)

    def property_read(self, ctx: Ctx, base: str, attr: str) -> list[Target]:
        """``obj.attr`` where ``attr`` is a property of obj's class."""
        out = []
        for kind, fqn in self.values.eval(ctx, base):
            if kind == "inst" and self.classes.is_class(fqn):
                found = self.classes.find_member(fqn, attr)
                d = self.model.defs.get(found) if found else None
                if d is not None and not d.is_class and any(
                    x.split(".")[-1] in ("property", "cached_property") for x in d.fact.decorators
                ):
                    assert found is not None  # ``d`` was looked up by it
                    out.append(Target(found))
        return out


def _dedupe(targets: list[Target]) -> list[Target]:
    return list(dict.fromkeys(targets))
