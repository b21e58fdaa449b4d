"""Statement trees of function bodies, built during the same LibCST walk.

Control-flow rules (acquire/release on every path, the state a transition
starts from) need the shape of a function body: branches, loops, try blocks,
early returns. The fact visitor mixes this in; the walker
(``kvflowmap.index.walker``) opens statements in ``_stmt_open``, closes them
in ``_stmt_close`` and, before each field of a statement, calls
``_stmt_route`` to say which branch (body, orelse, handlers, finally) the
next statements belong to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from kvflowmap.facts import Stmt

_SMALL = {
    cst.Return: "return", cst.Raise: "raise", cst.Assert: "assert",
    cst.Break: "break", cst.Continue: "continue",
}
_COMPOUND = {
    cst.If: "if", cst.For: "for", cst.While: "while", cst.Try: "try", cst.TryStar: "try",
    cst.With: "with", cst.Match: "match", cst.FunctionDef: "def", cst.ClassDef: "class",
}
_PSEUDO = {cst.ExceptHandler: "except", cst.ExceptStarHandler: "except", cst.MatchCase: "case"}
_FIELDS = {"body": "body", "orelse": "orelse", "handlers": "handlers",
           "finalbody": "final", "cases": "body"}


class StmtTreeMixin:
    """Builds one statement tree per function; mixed into the fact visitor."""

    if TYPE_CHECKING:  # provided by the fact visitor (``extract._FactVisitor``)
        def _code(self, node: cst.CSTNode | None) -> str | None: ...
        def node_line(self, node: cst.CSTNode) -> int: ...

    def _init_stmts(self) -> None:
        # One frame per function (and a throw-away one per class body / module).
        self._frames: list[dict] = [{"stack": [], "root": []}]

    def _push_frame(self) -> None:
        self._frames.append({"stack": [], "root": []})

    def _pop_frame(self) -> tuple[Stmt, ...]:
        return tuple(_freeze(n) for n in self._frames.pop()["root"])

    def _event(self, kind: str, index: int) -> None:
        stack = self._frames[-1]["stack"]
        if stack:
            stack[-1]["events"].append((kind, index))

    @staticmethod
    def stmt_kind(t: type) -> str | None:
        """Statement kind of a node type (None: not a statement)."""
        if t in _SMALL:
            return _SMALL[t]
        if t in _COMPOUND:
            return _COMPOUND[t]
        if t in _PSEUDO:
            return _PSEUDO[t]
        if issubclass(t, cst.BaseSmallStatement):
            return "simple"
        return None

    def _stmt_text(self, node: cst.CSTNode) -> str | None:
        if isinstance(node, (cst.If, cst.While, cst.Assert)):
            return self._code(node.test)
        if isinstance(node, cst.Return):
            return self._code(node.value)
        if isinstance(node, cst.Raise):
            return self._code(node.exc)
        if isinstance(node, (cst.ExceptHandler, cst.ExceptStarHandler)):
            return self._code(node.type)
        if isinstance(node, cst.For):
            return f"{self._code(node.target)} in {self._code(node.iter)}"
        if isinstance(node, cst.With):
            return ", ".join(self._code(i) or "" for i in node.items)
        if isinstance(node, cst.MatchCase):
            return self._code(node.pattern)
        if isinstance(node, cst.Match):
            return self._code(node.subject)
        return None

    def _gates(self) -> tuple[str, ...]:
        """The tests that decide whether the current statement runs, innermost
        last, each as a Python expression (``not (t)`` for an ``else`` arm,
        ``(subject) == (pattern)`` for a ``case``); used for version-gated imports."""
        out: list[str] = []
        stack = self._frames[-1]["stack"]
        for n, entry in enumerate(stack):
            text = entry["text"]
            if entry["kind"] == "if" and text and entry["field"] in ("body", "orelse"):
                out.append(f"({text})" if entry["field"] == "body" else f"not ({text})")
            elif entry["kind"] == "case" and n and stack[n - 1]["kind"] == "match":
                subject = stack[n - 1]["text"]
                if not subject or not text:
                    continue
                if text.strip() != "_":
                    out.append(_case_test(subject, text))
                    continue
                for earlier in stack[n - 1]["body"]:  # ``case _``: no earlier case matched
                    if earlier is not entry and earlier["text"] and earlier["text"].strip() != "_":
                        out.append(f"not {_case_test(subject, earlier['text'])}")
        return tuple(out)

    def _straight(self) -> bool:
        """The walk is in a simple statement directly in its scope's body (no
        branch, loop, try or with around it)."""
        stack = self._frames[-1]["stack"]
        return len(stack) == 1 and stack[0]["kind"] == "simple"

    def _stmt_name(self, name: str) -> None:
        """``name`` occurs in the innermost open statement."""
        stack = self._frames[-1]["stack"]
        if stack:
            stack[-1]["names"][name] = None

    def _stmt_open(self, node: cst.CSTNode, kind: str) -> None:
        frame = self._frames[-1]
        entry = {"kind": kind, "line": self.node_line(node), "text": self._stmt_text(node),
                 "events": [], "names": {}, "node": node, "field": None,
                 "body": [], "orelse": [], "handlers": [], "final": []}
        stack = frame["stack"]
        if not stack:
            frame["root"].append(entry)
        elif stack[-1]["field"] is not None:
            stack[-1][stack[-1]["field"]].append(entry)
        else:  # a statement inside an expression position: keep it ordered
            stack[-1]["body"].append(entry)
        stack.append(entry)

    def _stmt_close(self, node: cst.CSTNode) -> None:
        stack = self._frames[-1]["stack"]
        if stack and stack[-1]["node"] is node:
            stack.pop()

    def _stmt_route(self, node: cst.CSTNode, attribute: str) -> None:
        """The next statements go to this branch of the open compound statement."""
        stack = self._frames[-1]["stack"]
        if stack and stack[-1]["node"] is node:
            stack[-1]["field"] = _FIELDS.get(attribute)


def _case_test(subject: str, pattern: str) -> str:
    """``case "a" | "b":`` of ``match s:`` as the test ``((s) == ("a") or (s) == ("b"))``."""
    alternatives = [p.strip() for p in pattern.split("|")] if pattern.count('"') + \
        pattern.count("'") >= 2 * (pattern.count("|") + 1) else [pattern]
    return "(" + " or ".join(f"({subject}) == ({a})" for a in alternatives) + ")"


def _freeze(entry: dict) -> Stmt:
    return Stmt(
        kind=entry["kind"], line=entry["line"], text=entry["text"],
        events=tuple(entry["events"]),
        body=tuple(_freeze(e) for e in entry["body"]),
        orelse=tuple(_freeze(e) for e in entry["orelse"]),
        handlers=tuple(_freeze(e) for e in entry["handlers"]),
        final=tuple(_freeze(e) for e in entry["final"]),
        names=tuple(entry["names"]),
    )
