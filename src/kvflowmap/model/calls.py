"""Resolve call sites, property reads and function references to targets."""

from __future__ import annotations

import re
from typing import NamedTuple, cast

from kvflowmap.facts import CallFact, FunctionFact, Stmt
from kvflowmap.model.classes import ClassIndex
from kvflowmap.model.core import Model
from kvflowmap.model.values import Ctx, Evaluator


class Target(NamedTuple):
    """One resolved callee: an analysed def, a class, or an external name.

    A named tuple, not a frozen dataclass: linking builds hundreds of
    thousands, and the frozen ``__init__`` was a tenth of the link time."""

    fqn: str
    external: bool = False


# ``assert isinstance(self.worker, PullWorker)`` (or a tuple of types)
_LITERAL_METHOD = re.compile(r"^<(\w+)>\.(\w+)$")  # ``<str>.join``: see index.extract
_ISINSTANCE = re.compile(r"isinstance\(\s*([A-Za-z_][\w.]*)\s*,\s*\(?\s*([\w.\s,]+?)\s*,?\s*\)?\s*\)")


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
        self._asserts: dict[Ctx, dict[str, list[tuple[int, int, tuple[str, ...]]]]] = {}

    def resolve(self, ctx: Ctx, call: CallFact) -> list[Target]:
        """Targets of one call site; empty when it cannot be resolved."""
        callee = call.callee
        if not callee:
            return []
        narrowed = self._narrowed(ctx, callee, call.line)
        if narrowed is not None:
            return narrowed
        keyed = call.keyed or callee  # ``d[s:a]()``: the element put under "a"
        key = (ctx, keyed)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = tuple(self._resolve(ctx, keyed))
        return list(found)

    def _narrowed(self, ctx: Ctx, callee: str, line: int) -> list[Target] | None:
        """Targets of ``recv.m()`` where ``recv`` is narrowed at ``line``: after
        an ``assert isinstance(recv, T)`` in the same block, or inside ``if
        isinstance(recv, T):``. Methods of ``T`` (and, by dispatch, its
        overrides); None when no narrowing applies."""
        asserts = self._asserts.get(ctx)
        if asserts is None:
            asserts = self._asserts[ctx] = self._isinstance_guards(ctx)
        recv, _, method = callee.rpartition(".")
        ranges = asserts.get(recv) if recv and "(" not in method else None
        types = next((t for start, end, t in ranges or () if start < line <= end), None)
        if types is None:
            return None
        out: list[Target] = []
        for name in types:
            for kind, fqn in self.values.eval(ctx, name):
                if kind == "class":
                    for k2, f2 in self.values.member(("inst", fqn), method.rstrip("()"), 0):
                        out.extend(self._targets_of(k2, f2))
        return _dedupe(out) or None

    def _isinstance_guards(self, ctx: Ctx) -> dict[str, list[tuple[int, int, tuple[str, ...]]]]:
        """recv -> (first line, last line, types) of each ``isinstance`` narrowing."""
        d = self.model.defs.get(f"{ctx[0]}.{ctx[1]}") if ctx[1] else None
        if d is None or d.is_class:
            return {}
        fn = cast(FunctionFact, d.fact)
        out: dict[str, list[tuple[int, int, tuple[str, ...]]]] = {}

        def walk(stmts: tuple[Stmt, ...], end: int) -> None:
            for i, s in enumerate(stmts):
                after = stmts[i + 1].line - 1 if i + 1 < len(stmts) else end
                m = _ISINSTANCE.fullmatch((s.text or "").strip()) \
                    if s.kind in ("assert", "if") else None
                if m is not None:
                    types = tuple(n.strip() for n in m.group(2).split(",") if n.strip())
                    last = end if s.kind == "assert" else (
                        s.orelse[0].line - 1 if s.orelse else after)
                    out.setdefault(m.group(1), []).append((s.line, last, types))
                for block in (s.body, s.orelse, s.handlers, s.final):
                    if block:
                        walk(block, after)

        walk(fn.body, fn.end_line)
        return out

    def _resolve(self, ctx: Ctx, callee: str) -> list[Target]:
        if callee.startswith("super()."):
            return self._super(ctx, callee[len("super()."):])
        if callee == "super":
            return [Target("<builtin>.super", external=True)]
        if callee.startswith("<") and (m := _LITERAL_METHOD.match(callee)):
            return [Target(f"<builtin>.{m.group(1)}.{m.group(2)}", external=True)]
        out: list[Target] = []
        for kind, fqn in self.values.eval(ctx, callee):
            out.extend(self._targets_of(kind, fqn))
        return _dedupe(out)

    def _targets_of(self, kind: str, fqn: str) -> list[Target]:
        if kind == "func":
            return [Target(fqn)]
        if kind == "class":
            return [Target(self.constructor(fqn))]
        if kind in ("ext", "extattr"):
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
        """A name used as a value: analysed functions only (callbacks). A
        parameter passed on is not a reference of this scope: the function
        was named by the caller that passed it."""
        fn = self.values.function(ctx)
        head = name.partition(".")[0]
        if fn is not None and any(p.name == head for p in fn.params) and \
                not self.values.is_self(ctx, head):
            return []
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
