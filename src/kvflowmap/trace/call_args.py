"""The arguments of logging calls as written, read from their source (parsed,
never run).

The index keeps an argument as its dotted chain, so ``sorted(finished)`` is
only ``sorted()`` there, and an f-string's parts are not kept at all. Where
that is all the index has, the data flow of request ids needs the
expressions themselves: ``sorted(finished)`` walks ``finished``, and
``f"done {req_id}"`` logs ``req_id`` in its first ``{}``."""

from __future__ import annotations

import ast
from pathlib import Path

Args = tuple[str | None, ...]


def needs_source(args: Args, message: str, strings: list[bool]) -> bool:
    """Whether the index's texts of a call's arguments lose what the data
    flow reads: a call or an expression in an argument a string
    placeholder shows (``strings``: per argument, ``ids.string_placeholders``;
    a number carries no id), or an f-string message (``{}`` parts and no
    arguments after it)."""
    return any(t and (a is None or "(" in a) for a, t in zip(args, strings, strict=False)) or (
        not args and "{}" in message)


def logging_args(path: Path, places: set[tuple[int, int]]) -> dict[tuple[int, int], Args]:
    """(line, column) of a logging call -> the source text of its arguments
    after the message, or, for an f-string message, of its parts in order
    (what fills each ``{}``). Calls not found, and a file that cannot be
    read or parsed, are left out."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return {}
    lines = {line for line, _ in places}
    out: dict[tuple[int, int], Args] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or node.lineno not in lines or not node.args:
            continue
        key = (node.lineno, node.col_offset + 1)  # the index counts columns from 1
        if key not in places:
            continue
        first = node.args[0]
        if isinstance(first, ast.JoinedStr) and len(node.args) == 1:
            out[key] = tuple(ast.unparse(v.value) for v in first.values
                             if isinstance(v, ast.FormattedValue))
        else:
            out[key] = tuple(None if isinstance(a, ast.Starred) else ast.unparse(a)
                             for a in node.args[1:])
    return out
