"""The LibCST internals the index relies on are still what it expects.

``index/walker.py`` reads each node type's child order from the source of its
``_visit_and_replace_children``; ``index/text.py`` subclasses
``libcst._nodes.internal.CodegenState``. A LibCST release that changes either
must fail here, loudly, not shift every line number or drop node text."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import libcst as cst

from kvflowmap.index.walker import child_fields

SAMPLE = (Path(__file__).resolve().parents[1] / "src" / "kvflowmap" / "index" / "walker.py")


def _children_by_fields(node: cst.CSTNode) -> list[cst.CSTNode]:
    out: list[cst.CSTNode] = []
    for name in child_fields(type(node)):
        value = getattr(node, name, None)
        items = value if isinstance(value, (list, tuple)) else [value]
        out += [v for v in items if isinstance(v, cst.CSTNode)]
    return out


def test_codegen_state_is_importable() -> None:
    from libcst._nodes.internal import CodegenState  # noqa: F401  (the internal used)


def test_child_order_matches_libcst_children() -> None:
    """For every node of a real module, the fields read from LibCST's source
    give the node's children in LibCST's own order (``node.children``)."""
    module = cst.parse_module(SAMPLE.read_text(encoding="utf-8") +
                              "\nx = [a async for a in b if c]\nlambda *a, b=1, **k: (a, b)\n"
                              "match x:\n    case {'k': [1, *r]} if r:\n        pass\n")
    seen: set[type] = set()
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        seen.add(type(node))
        assert _children_by_fields(node) == list(node.children), type(node).__name__
        stack.extend(node.children)
    assert len(seen) > 60  # the sample covers most node types


def test_every_node_type_declares_its_child_fields() -> None:
    """Each concrete node type's child fields are among its dataclass fields."""
    types = [t for t in vars(cst).values() if isinstance(t, type) and issubclass(t, cst.CSTNode)
             and not t.__name__.startswith("Base") and t is not cst.CSTNode]
    assert len(types) > 150
    for t in types:
        names = {f.name for f in fields(t)}
        assert set(child_fields(t)) <= names, t.__name__
