"""A read-only walk over a LibCST tree, about 5x faster than ``node.visit``.

``CSTNode.visit`` rebuilds every node it passes (its own source says "TODO:
provide traversal where children are not replaced"), and looks up the hook
methods by name at every node. For a visitor that only reads, that is most of
the cost: measured on vLLM's scheduler.py, 0.30 s for ``visit`` against
0.06 s here, beside 0.37 s to parse. Children are visited in source order, the
order each node type's ``_visit_and_replace_children`` visits them (read once
per type from LibCST's own source), so line counting stays exact.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, fields

from libcst import CSTNode

_FIELD = re.compile(r'visit_\w+\(\s*self,\s*"(\w+)"')
_ORDER: dict[type, tuple[str, ...]] = {}
# ``isinstance(x, CSTNode)`` goes through ABCMeta (measured: a quarter of the
# walk); a per-type memo answers the same question with one dict look-up.
_IS_NODE: dict[type, bool] = {}


def _is_node(t: type) -> bool:
    known = _IS_NODE.get(t)
    if known is None:
        known = _IS_NODE[t] = issubclass(t, CSTNode)
    return known


def child_fields(t: type) -> tuple[str, ...]:
    """Fields of node type ``t`` that hold children, in source order."""
    order = _ORDER.get(t)
    if order is None:
        try:
            src = inspect.getsource(t._visit_and_replace_children)
            order = tuple(dict.fromkeys(_FIELD.findall(src)))
        except (OSError, TypeError):  # no source shipped: declaration order
            order = tuple(f.name for f in fields(t))
        _ORDER[t] = order
    return order


@dataclass(frozen=True)
class _Hooks:
    visit: object
    leave: object
    fields: tuple[str, ...]
    attr: dict
    stmt: str | None


class Walker:
    """Calls ``visit_<Type>`` / ``leave_<Type>`` / ``visit_<Type>_<field>`` /
    ``leave_<Type>_<field>`` of ``visitor`` like LibCST does, plus the
    statement-tree hooks ``_stmt_open``, ``_stmt_route`` and ``_stmt_close``
    for the types ``visitor.stmt_kind(type)`` names."""

    def __init__(self, visitor) -> None:
        self.v = visitor
        self._hooks: dict[type, _Hooks] = {}

    def _lookup(self, t: type) -> _Hooks:
        v, name = self.v, t.__name__
        fields_ = child_fields(t)
        attr = {}
        for f in fields_:
            pair = (getattr(v, f"visit_{name}_{f}", None), getattr(v, f"leave_{name}_{f}", None))
            if pair != (None, None):
                attr[f] = pair
        h = _Hooks(getattr(v, f"visit_{name}", None), getattr(v, f"leave_{name}", None),
                   fields_, attr, v.stmt_kind(t))
        self._hooks[t] = h
        return h

    def walk(self, node: CSTNode) -> None:
        """Visit ``node`` and, unless its visit hook returns False, its children."""
        h = self._hooks.get(type(node)) or self._lookup(type(node))
        v = self.v
        if h.stmt is not None:
            v._stmt_open(node, h.stmt)
        if h.visit is None or h.visit(node) is not False:
            for f in h.fields:
                if h.stmt is not None:
                    v._stmt_route(node, f)
                pair = h.attr.get(f)
                if pair is not None and pair[0] is not None:
                    pair[0](node)
                child = getattr(node, f)
                t = type(child)
                if t is list or t is tuple:
                    for c in child:
                        if _IS_NODE.get(type(c)) or _is_node(type(c)):
                            self.walk(c)
                elif _IS_NODE.get(t) or _is_node(t):
                    self.walk(child)
                if pair is not None and pair[1] is not None:
                    pair[1](node)
        if h.leave is not None:
            h.leave(node)
        if h.stmt is not None:
            v._stmt_close(node)
