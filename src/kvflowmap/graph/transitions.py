"""Request-state transitions found in the code, with the state they start from.

A transition is an assignment ``x.status = RequestStatus.TO``. Its ``from``
states come from the tests that dominate it: an enclosing ``if x.status ==
S`` (or ``in (S1, S2)``), the ``else`` of an ``!=`` test, an ``assert``, or an
earlier ``if x.status != S: return``. ``*`` means the code does not establish
it. The guard is the source text of the conditions on the way.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import cast

from kvflowmap.facts import Stmt
from kvflowmap.graph.build import Linker
from kvflowmap.graph.dataflow import state_member
from kvflowmap.graph.paramstates import states_through_param

_EXITS = ("return", "raise", "continue", "break")


@dataclass(frozen=True)
class Transition:
    """One state write and what is known on the way to it."""

    from_states: tuple[str, ...]  # FQNs, or ("*",)
    to_state: str
    function: str
    file: str
    root: str
    line: int
    guard: str

    def short(self, state: str) -> str:
        return state if state == "*" else state.rpartition(".")[2]


def extract_transitions(lk: Linker) -> list[Transition]:
    """Every transition of a protocol state enum in the indexed code, sorted."""
    out: list[Transition] = []
    for module in sorted(lk.model.facts):
        ff = lk.model.facts[module]
        for fn in ff.functions:
            if any("." in t for t in lk.model.assigns.get((module, fn.qualname), ())):
                walker = _Walker(lk, module, fn.qualname)
                walker.walk(fn.body, [])
                out.extend(walker.found)
    return sorted(set(out), key=lambda t: (t.file, t.line, t.to_state))


def _short(fqn: str) -> str:
    """``pkg.mod.Class.method`` -> ``Class.method``."""
    return ".".join(fqn.split(".")[-2:])


class _Walker:
    def __init__(self, lk: Linker, module: str, qualname: str) -> None:
        self.lk = lk
        self.module = module
        self.scope = qualname
        self.ff = lk.model.facts[module]
        self.found: list[Transition] = []

    def walk(self, stmts: tuple[Stmt, ...], conds: list[tuple[str, bool]]) -> None:
        conds = list(conds)
        for s in stmts:
            self._events(s, conds)
            if s.kind == "if":
                self.walk(s.body, conds + [(s.text or "", True)])
                self.walk(s.orelse, conds + [(s.text or "", False)])
                if s.body and s.body[-1].kind in _EXITS and not s.orelse:
                    conds.append((s.text or "", False))  # early exit: the rest knows not-T
            elif s.kind == "while":
                self.walk(s.body, conds + [(s.text or "", True)])
                self.walk(s.orelse, conds)
            elif s.kind == "assert":
                conds.append((s.text or "", True))
            else:
                for part in (s.body, s.orelse, s.handlers, s.final):
                    self.walk(part, conds)

    def _events(self, s: Stmt, conds: list[tuple[str, bool]]) -> None:
        for kind, idx in s.events:
            if kind != "assign":
                continue
            a = self.ff.assigns[idx]
            if not a.value or "." not in a.target:
                continue
            to = state_member(self.lk, (self.module, self.scope), a.value)
            # ``request.status = finished_status``: each state a caller passes
            passed = [] if to is not None or not a.value.isidentifier() else \
                states_through_param(self.lk, self.module, self.scope, a.value)
            targets = [(to, "")] if to is not None else [
                (p.state, f"{a.value} = {p.text} ({_short(p.caller)}, line {p.line})")
                for p in passed]
            attr = a.target.rpartition(".")[2]
            froms = self._from_states(conds, attr)
            sf = self.lk.model.source(self.module)
            guard = " and ".join(t if pos else f"not ({t})" for t, pos in conds if t)
            for state, via in targets:
                self.found.append(Transition(
                    tuple(sorted(froms)) if froms else ("*",), state,
                    f"{self.module}.{self.scope}", sf.rel if sf else "",
                    sf.root.label if sf else "", a.line,
                    " and ".join(x for x in (guard, via) if x)))

    def _from_states(self, conds: list[tuple[str, bool]], attr: str) -> set[str]:
        known: set[str] | None = None
        for text, positive in conds:
            states = self._test_states(text, attr, positive)
            if states is not None:
                known = states if known is None else (known & states or states)
        return known or set()

    def _test_states(self, text: str, attr: str, positive: bool) -> set[str] | None:
        """States ``attr`` must be in when ``text`` is ``positive``; None if unknown."""
        try:
            node = ast.parse(text, mode="eval").body
        except (SyntaxError, ValueError, RecursionError):
            return None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return self._test_node(node.operand, attr, not positive)
        return self._test_node(node, attr, positive)

    def _test_node(self, node: ast.AST, attr: str, positive: bool) -> set[str] | None:
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And) and positive:
            for v in node.values:
                got = self._test_node(v, attr, True)
                if got is not None:
                    return got
            return None
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and not positive:
            for v in node.values:
                got = self._test_node(v, attr, False)
                if got is not None:
                    return got
            return None
        if not (isinstance(node, ast.Compare) and len(node.ops) == 1):
            return None
        left, op, right = node.left, node.ops[0], node.comparators[0]
        if not (isinstance(left, ast.Attribute) and left.attr == attr):
            left, right = right, left
            if not (isinstance(left, ast.Attribute) and left.attr == attr):
                return None
        elts = right.elts if isinstance(right, (ast.Tuple, ast.List, ast.Set)) else [right]
        states = {self._state(ast.unparse(e)) for e in elts}
        if None in states:
            return None
        equal = isinstance(op, (ast.Eq, ast.Is, ast.In))
        if not isinstance(op, (ast.Eq, ast.Is, ast.In, ast.NotEq, ast.IsNot, ast.NotIn)):
            return None
        return cast("set[str]", states) if equal == positive else None  # None ruled out above

    def _state(self, chain: str) -> str | None:
        return state_member(self.lk, (self.module, self.scope), chain)
