"""One analysed function seen through its facts: its own calls, container
operations, assignments and returns, and the statements they happen in."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

from kvflowmap.facts import (AssignFact, AttrReadFact, CallFact, CompareFact, ContainerOpFact,
                             FileFacts,
                             FunctionFact, ReturnFact, Stmt)
from kvflowmap.model.core import Model

_F = TypeVar("_F", CompareFact, AssignFact)


def walk(stmts: tuple[Stmt, ...]) -> Iterator[Stmt]:
    """Every statement of a body, nested ones included, in source order."""
    for s in stmts:
        yield s
        for part in (s.body, s.handlers, s.orelse, s.final):
            yield from walk(part)


def siblings(body: tuple[Stmt, ...], target: Stmt) -> tuple[Stmt, ...]:
    """The statement list that holds ``target`` (by identity, it included);
    empty when ``body`` does not."""
    for s in body:
        if s is target:
            return body
        for part in (s.body, s.orelse, s.final, *(h.body for h in s.handlers)):
            found = siblings(part, target)
            if found:
                return found
    return ()


@dataclass(frozen=True)
class FnView:
    """An analysed function and the facts of its own scope."""

    fqn: str
    module: str
    fact: FunctionFact
    facts: FileFacts

    @property
    def ctx(self) -> tuple[str, str]:
        """The (module, scope) context calls and chains are resolved in."""
        return (self.module, self.fact.qualname)

    @property
    def cls(self) -> str | None:
        """The FQN of the enclosing class for a method."""
        if not self.fact.class_qualname:
            return None
        return f"{self.module}.{self.fact.class_qualname}"

    @cached_property
    def self_cls(self) -> str | None:
        """The class ``self`` means here: the enclosing class of a method, or,
        in a def nested in a method that reads the method's ``self`` freely
        (a done-callback), that method's class."""
        if self.fact.class_qualname:
            return self.cls
        if "self" in self.param_names:
            return None
        outer = self.fact.qualname.rpartition(".")[0]
        while outer:
            f = next((g for g in self.facts.functions if g.qualname == outer), None)
            if f is None:
                return None
            if f.class_qualname:
                return f"{self.module}.{f.class_qualname}"
            outer = outer.rpartition(".")[0]
        return None

    @property
    def name(self) -> str:
        return self.fact.name

    @cached_property
    def stmts(self) -> tuple[Stmt, ...]:
        return tuple(walk(self.fact.body))

    def calls(self, s: Stmt) -> list[CallFact]:
        return [self.facts.calls[i] for k, i in s.events if k == "call"]

    def containers(self, s: Stmt) -> list[ContainerOpFact]:
        return [self.facts.containers[i] for k, i in s.events if k == "container"]

    def assigns(self, s: Stmt) -> list[AssignFact]:
        return [self.facts.assigns[i] for k, i in s.events if k == "assign"]

    def returns(self, s: Stmt) -> list[ReturnFact]:
        return [self.facts.returns[i] for k, i in s.events if k == "return"]

    @cached_property
    def all_calls(self) -> list[CallFact]:
        return [c for s in self.stmts for c in self.calls(s)]

    @cached_property
    def all_containers(self) -> list[ContainerOpFact]:
        return [c for s in self.stmts for c in self.containers(s)]

    @cached_property
    def all_assigns(self) -> list[AssignFact]:
        return [a for s in self.stmts for a in self.assigns(s)]

    @cached_property
    def all_returns(self) -> list[ReturnFact]:
        return [r for s in self.stmts for r in self.returns(s)]

    @cached_property
    def in_handlers(self) -> frozenset[int]:
        """``id()`` of every statement inside an ``except`` handler's body:
        code that runs once something has already failed."""
        return frozenset(id(x) for s in self.stmts if s.kind == "except" for x in walk(s.body))

    @cached_property
    def compares(self) -> dict[int, list[CompareFact]]:
        """This function's comparisons by line (the facts keep them per file)."""
        return _by_line(self.facts.compares, self.fact.qualname)

    @cached_property
    def reads(self) -> list[AttrReadFact]:
        """This function's attribute reads (the facts keep them per file)."""
        return [r for r in self.facts.reads if r.scope == self.fact.qualname]

    @cached_property
    def binds(self) -> dict[int, list[AssignFact]]:
        """This function's loop, comprehension and tuple-unpacking bindings
        by line (``FileFacts.binds``, kept per file)."""
        return _by_line(self.facts.binds, self.fact.qualname)

    @cached_property
    def lists(self) -> list[tuple[Stmt, ...]]:
        """Every statement list: the body and each nested body."""
        out = [self.fact.body]
        out += [body for s in self.stmts
                for body in (s.body, s.orelse, s.final, *(h.body for h in s.handlers)) if body]
        return out

    @property
    def param_names(self) -> list[str]:
        return [p.name for p in self.fact.params]


def _by_line(facts: Iterable[_F], scope: str) -> dict[int, list[_F]]:
    """The facts of one scope, by line (the facts keep them per file)."""
    out: dict[int, list[_F]] = {}
    for f in facts:
        if f.scope == scope:
            out.setdefault(f.line, []).append(f)
    return out


def view(model: Model, fqn: str) -> FnView | None:
    """The view of an analysed function, None for classes and unknown names."""
    d = model.defs.get(fqn)
    if d is None or d.is_class:
        return None
    return FnView(fqn, d.module, d.fact, model.facts[d.module])  # type: ignore[arg-type]


def bound_args(callee: FunctionFact, c: CallFact, *, constructor: bool = False
               ) -> list[tuple[str | None, str]]:
    """(argument text, parameter name) pairs of a call to ``callee``: the
    positional arguments to its positional parameters, the keywords by name.
    A method called through an attribute (``self._fail(...)``), or ``__init__``
    run by ``C(...)`` (``constructor``), does not get ``self`` from the call."""
    params = list(callee.params)
    if params and params[0].name in ("self", "cls") and ("." in (c.callee or "") or constructor):
        params = params[1:]
    out: list[tuple[str | None, str]] = [
        (a, p.name) for a, p in zip(c.args, params, strict=False) if p.kind in ("pos", "posonly")]
    names = {p.name for p in params}
    out += [(v, k) for k, v in c.kwargs if k in names]
    return out


def mentions(text: str | None, names: Collection[str]) -> bool:
    """``text`` uses one of ``names`` as a whole name: a plain name (not an
    attribute of something else), or an attribute when the entry starts
    with a dot (``.new_block_ids``)."""
    if not text:
        return False
    return any(re.search(rf"{re.escape(n)}\b" if n.startswith(".")
                         else rf"(?<![\w.]){re.escape(n)}\b", text) for n in names)
