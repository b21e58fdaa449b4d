"""Read the class names out of an annotation's source text."""

from __future__ import annotations

import ast
from functools import lru_cache

# Wrappers whose arguments are the real types; containers are not unwrapped
# (``list[Worker]`` is not a ``Worker``).
_UNWRAP = {"Optional", "Union", "Annotated", "Final", "ClassVar", "Type", "type"}


# Annotations that say nothing about which class a value is.
_UNTYPED = {"None", "Any", "typing.Any", "object", "t.Any"}


@lru_cache(maxsize=4096)
def annotation_names(text: str | None) -> tuple[str, ...]:
    """Dotted names a value annotated ``text`` may be an instance of.

    ``"Worker | None"`` -> ``("Worker",)``; ``Optional["a.B"]`` -> ``("a.B",)``.
    """
    if not text:
        return ()
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return ()
    out: list[str] = []
    _collect(tree, out, 0)
    return tuple(dict.fromkeys(n for n in out if n not in _UNTYPED))


def _collect(node: ast.AST, out: list[str], depth: int) -> None:
    if depth > 20:
        return
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        out.extend(annotation_names(node.value))
    elif isinstance(node, (ast.Name, ast.Attribute)):
        name = dotted_name(node)
        if name:
            out.append(name)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        _collect(node.left, out, depth + 1)
        _collect(node.right, out, depth + 1)
    elif isinstance(node, ast.Subscript):
        head = (dotted_name(node.value) or "").split(".")[-1]
        if head in _UNWRAP:
            inner = node.slice
            items = inner.elts if isinstance(inner, ast.Tuple) else [inner]
            if head == "Annotated":
                items = items[:1]
            for item in items:
                _collect(item, out, depth + 1)


def dotted_name(node: ast.AST, *, calls: bool = False, subscripts: bool = False) -> str | None:
    """Dotted text of a ``Name`` / ``Attribute`` chain (``a.b.c``); None for
    anything else.

    ``calls``: a call is read as what it calls (``f().g`` -> ``f.g``), the way
    callee texts compare once their ``()`` are dropped. ``subscripts``: an
    index becomes ``[]`` (``self.socks[i].x`` -> ``self.socks[].x``), the
    chain text the facts keep.
    """
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted_name(node.value, calls=calls, subscripts=subscripts)
        return None if base is None else f"{base}.{node.attr}"
    if calls and isinstance(node, ast.Call):
        return dotted_name(node.func, calls=calls, subscripts=subscripts)
    if subscripts and isinstance(node, ast.Subscript):
        base = dotted_name(node.value, calls=calls, subscripts=subscripts)
        return None if base is None else f"{base}[]"
    return None


# Containers whose elements, as read by a subscript or a loop, are the last
# type argument (a mapping's values); the others' are the first.
_MAPPINGS = {"dict", "Dict", "defaultdict", "DefaultDict", "OrderedDict", "Mapping",
             "MutableMapping"}


@lru_cache(maxsize=4096)
def element_annotation(text: str | None) -> str | None:
    """The annotation of an element of a container annotated ``text``:
    ``dict[str, Worker]`` -> ``Worker``, ``list[Worker] | None`` ->
    ``Worker``; None when ``text`` is no subscripted container."""
    if not text:
        return None
    try:
        tree = ast.parse(text.strip().strip("'\""), mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None
    while isinstance(tree, ast.BinOp) and isinstance(tree.op, ast.BitOr):
        tree = tree.left if isinstance(tree.left, ast.Subscript) else tree.right
    if not isinstance(tree, ast.Subscript):
        return None
    head = (dotted_name(tree.value) or "").rpartition(".")[2]
    if head in _UNWRAP:
        return element_annotation(ast.unparse(tree.slice))
    args = tree.slice.elts if isinstance(tree.slice, ast.Tuple) else [tree.slice]
    if not args:
        return None
    return ast.unparse(args[-1] if head in _MAPPINGS else args[0])
