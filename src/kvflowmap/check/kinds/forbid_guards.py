"""Whether a ``forbid`` call is guarded: on the way to it, its receiver was
asked whether it is ready (``if fut.done(): fut.result()``, or
``if not fut.done(): return`` before the call). The tests are read from the
statement texts of the facts; receivers are chain texts (``self.socks[].x``)."""

from __future__ import annotations

import ast
import fnmatch

from kvflowmap.facts import Stmt
from kvflowmap.model.annotations import dotted_name

EXITS = {"return", "raise", "continue", "break"}


class Guard:
    """Tests that prove ``receiver`` is ready: ``r.done()`` (positive) or
    ``not r.done()`` followed by an exit (negative); method names are globs
    (``*``: any question put to the receiver itself, ``fut.query()``). Other conjuncts may only
    check that a prefix of the receiver exists (``pending is not None``)."""

    def __init__(self, receiver: str, methods: set[str]) -> None:
        # ``*.poll``: asking any receiver counts (a ``zmq.Poller`` that holds the socket)
        self.receiver = receiver
        self.methods = {m for m in methods if not m.startswith("*.")}
        self.any_methods = {m[2:] for m in methods if m.startswith("*.")}

    def _is_ask(self, node: ast.expr) -> bool:
        if self.any_methods and any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and
                n.func.attr in self.any_methods for n in ast.walk(node)):
            return True
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            any(fnmatch.fnmatchcase(node.func.attr, m) for m in self.methods) and \
            dotted_name(node.func.value, subscripts=True) == self.receiver

    def _exists(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and \
                isinstance(node.ops[0], ast.IsNot):
            node = node.left
        text = dotted_name(node, subscripts=True)
        if not text:
            return False
        return self.receiver == text or self.receiver.startswith(text + ".")

    def test(self, text: str | None, negative: bool) -> bool:
        """True when condition ``text`` proves the receiver ready (``negative``:
        when its failing, before an exit, does)."""
        try:
            node = ast.parse(text or "", mode="eval").body
        except SyntaxError:
            return False
        want = (lambda n: isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not)
                and self._is_ask(n.operand)) if negative else self._is_ask
        if want(node):
            return True
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            return any(want(v) for v in node.values) and all(
                want(v) or self._exists(v) for v in node.values)
        return negative and isinstance(node, ast.BoolOp) and any(want(v) for v in node.values)


def last_line(stmt: Stmt) -> int:
    kids = (*stmt.body, *stmt.orelse, *stmt.handlers, *stmt.final)
    return max([stmt.line, *(last_line(k) for k in kids)])


def guarded(block: tuple[Stmt, ...], line: int, guard: Guard) -> bool:
    """True when, on the way to ``line`` through ``block``, a guard holds."""
    held = False
    for stmt in block:
        if stmt.line > line:
            break
        if stmt.line < line <= last_line(stmt) or (stmt.line == line and stmt.body):
            if stmt.kind == "if" and any(b.line <= line for b in stmt.body[:1]) and \
                    line <= max(last_line(b) for b in stmt.body) and guard.test(stmt.text, False):
                return True
            return held or any(guarded(sub, line, guard) for sub in
                               (stmt.body, stmt.orelse, stmt.handlers, stmt.final))
        if stmt.kind == "if" and stmt.body and stmt.body[-1].kind in EXITS and \
                guard.test(stmt.text, True):
            held = True
        if stmt.kind == "assert" and guard.test(stmt.text, False):
            held = True  # ``assert fut.done()``: ready from here on
    return held
