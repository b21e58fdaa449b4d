"""Small helpers turning LibCST expressions into plain text."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import libcst as cst

try:  # LibCST-internal (1.x); without it, node text takes the public way
    from libcst._nodes.internal import CodegenState
except ImportError:  # pragma: no cover - a future LibCST
    _HAS_CODEGEN_STATE = False
else:
    _HAS_CODEGEN_STATE = True


def chain(node: cst.CSTNode | None) -> str | None:
    """Dotted text of a name/attribute chain: ``self.a.b``, ``super().m``,
    ``f().g``, ``x[].y``. ``None`` for anything else."""
    # ``type(node) is`` rather than ``isinstance``: these node classes have no
    # subclasses, and isinstance on LibCST's ABC-based classes is slow in the
    # walk's hottest helper. ``type(node)`` is repeated per test (no local
    # alias) so that mypy narrows ``node``; measured: within noise.
    if type(node) is cst.Name:
        return node.value
    if type(node) is cst.Attribute:
        base = chain(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    if type(node) is cst.Call:
        base = chain(node.func)
        return None if base is None else f"{base}()"
    if type(node) is cst.Subscript:
        base = chain(node.value)
        return None if base is None else f"{base}[]"
    if type(node) is cst.Await:
        return chain(node.expression)
    if type(node) is cst.Lambda and _lambda_namer is not None:
        return _lambda_namer(node)
    return None


def literal_key(node: cst.CSTNode | None) -> str | None:
    """A subscript's or a display's literal key as the evaluator names it:
    ``s:a`` for the string ``"a"``, ``i:1`` for the integer ``1``; None for
    anything else (a negative index, a key with other characters than
    letters, digits and ``_``, a name)."""
    if type(node) is cst.Integer:
        try:
            return f"i:{int(node.value.replace('_', ''), 0)}"
        except ValueError:
            return None
    text = literal_string(node) if isinstance(node, (cst.SimpleString,
                                                      cst.ConcatenatedString)) else None
    if text is not None and (text.isascii() and (text.replace("_", "").isalnum() or not text)):
        return f"s:{text}"
    return None


def keyed_chain(node: cst.CSTNode | None) -> str | None:
    """``chain`` with the literal keys of subscripts (``d[s:a][i:0]()`` for
    ``d["a"][0]()``) and the names used as keys (``d[n:KEY]``); None when no
    subscript of the chain has one."""
    text = _keyed(node)
    return text if text is not None and text != chain(node) else None


def _keyed(node: cst.CSTNode | None) -> str | None:
    if type(node) is cst.Attribute:
        base = _keyed(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    if type(node) is cst.Call:
        base = _keyed(node.func)
        return None if base is None else f"{base}()"
    if type(node) is cst.Subscript:
        base = _keyed(node.value)
        if base is None:
            return None
        index = node.slice[0].slice if len(node.slice) == 1 else None
        key = None
        if isinstance(index, cst.Index):
            # a name may be a constant (``steps[LAST]``): the evaluator looks
            key = f"n:{index.value.value}" if type(index.value) is cst.Name else \
                literal_key(index.value)
        return f"{base}[{key or ''}]"
    if type(node) is cst.Await:
        return _keyed(node.expression)
    return chain(node)


# While a file is extracted, a lambda's chain is its node name (``<lambda1>``,
# numbered per enclosing scope in the order the walk meets them), so that
# ``x = lambda: ...``, ``f(lambda: ...)`` and ``return lambda: ...`` name it.
_lambda_namer: Callable[[cst.Lambda], str] | None = None


@contextmanager
def naming_lambdas(namer: Callable[[cst.Lambda], str]) -> Iterator[None]:
    """Within the block, ``chain`` names lambdas with ``namer``."""
    global _lambda_namer
    previous, _lambda_namer = _lambda_namer, namer
    try:
        yield
    finally:
        _lambda_namer = previous


def literal_string(node: cst.CSTNode | None) -> str | None:
    """The value of a plain string literal (implicit concatenation included)."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    if isinstance(node, cst.ConcatenatedString):
        left, right = literal_string(node.left), literal_string(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, cst.FormattedString):
        return "".join(
            p.value if isinstance(p, cst.FormattedStringText) else "{}" for p in node.parts
        )
    return None


def docstring(body: cst.BaseSuite) -> str | None:
    """First line of a docstring, if the suite starts with one."""
    stmts = body.body if isinstance(body, cst.IndentedBlock) else ()
    if not stmts or not isinstance(stmts[0], cst.SimpleStatementLine):
        return None
    first = stmts[0].body[0] if stmts[0].body else None
    if isinstance(first, cst.Expr):
        text = literal_string(first.value)
        if text:
            lines = [ln.strip() for ln in text.strip().splitlines()]
            return lines[0] if lines else None
    return None


class _Unrecorded:
    """A no-op context manager, reused: LibCST's default builds a
    generator-based one per node (dropping it measured 3% off extraction)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        return None


_UNRECORDED = _Unrecorded()


if _HAS_CODEGEN_STATE:
    class _TextState(CodegenState):
        """``CodegenState`` that records no positions (nobody asks for them)."""

        def record_syntactic_position(self, node, *, start_node=None, end_node=None):
            return _UNRECORDED


def node_code(module: cst.Module, node: cst.CSTNode) -> str:
    """Source text of a node, whitespace collapsed to single spaces."""
    if not _HAS_CODEGEN_STATE:
        return " ".join(module.code_for_node(node).split())
    state = _TextState(default_indent=module.default_indent,
                       default_newline=module.default_newline)
    node._codegen(state)
    return " ".join("".join(state.tokens).split())


def split_commas(text: str) -> list[str]:
    """The comma-separated parts of ``text`` at bracket depth 0, stripped
    (``"a, f(b, c), [d]"`` -> ``["a", "f(b, c)", "[d]"]``)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts
