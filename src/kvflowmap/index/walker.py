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
from dataclasses import fields

from libcst import CSTNode

_FIELD = re.compile(r'visit_\w+\(\s*self,\s*"(\w+)"')
_ORDER: dict[type, tuple[str, ...]] = {}
_CLASS_HOOKS: dict[type, dict[type, tuple | None]] = {}
def child_fields(t: type[CSTNode]) -> tuple[str, ...]:
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


class Walker:
    """Calls ``visit_<Type>`` / ``leave_<Type>`` / ``visit_<Type>_<field>`` /
    ``leave_<Type>_<field>`` of ``visitor`` like LibCST does, plus the
    statement-tree hooks ``_stmt_open``, ``_stmt_route`` and ``_stmt_close``
    for the types ``visitor.stmt_kind(type)`` names.

    Hooks are looked up once per (visitor class, node type), for all files,
    and kept as a plain tuple ``(visit, leave, fields, field_hooks, stmt)`` of
    plain functions called with the visitor; a type that is not a node
    (``str``, ``None``) maps to ``None``. Leaves (no child fields: 40% of all
    nodes are ``SimpleWhitespace``) get their hooks called without a
    recursive ``walk`` (measured: a third off the walk)."""

    def __init__(self, visitor) -> None:
        self.v = visitor
        self._hooks: dict[type, tuple | None] = _CLASS_HOOKS.setdefault(type(visitor), {})

    def _lookup(self, t: type) -> tuple | None:
        if not (isinstance(t, type) and issubclass(t, CSTNode)):
            self._hooks[t] = None
            return None
        cls, name = type(self.v), t.__name__
        fields_ = child_fields(t)
        attr = {}
        for f in fields_:
            pair = (getattr(cls, f"visit_{name}_{f}", None), getattr(cls, f"leave_{name}_{f}", None))
            if pair != (None, None):
                attr[f] = pair
        h = (getattr(cls, f"visit_{name}", None), getattr(cls, f"leave_{name}", None),
             fields_, attr, self.v.stmt_kind(t))
        self._hooks[t] = h
        return h

    def walk(self, node: CSTNode) -> None:
        """Visit ``node`` and, unless its visit hook returns False, its children."""
        t = type(node)
        h = self._hooks[t] if t in self._hooks else self._lookup(t)
        if h is not None:
            self._walk(node, h)

    def _walk(self, node: CSTNode, h: tuple) -> None:
        visit, leave, fields_, attr, stmt = h
        v, hooks = self.v, self._hooks
        if stmt is not None:
            v._stmt_open(node, stmt)
        if visit is None or visit(v, node) is not False:
            for f in fields_:
                if stmt is not None:
                    v._stmt_route(node, f)
                pair = attr.get(f)
                if pair is not None and pair[0] is not None:
                    pair[0](v, node)
                child = getattr(node, f)
                t = type(child)
                for c in (child if t is list or t is tuple else (child,)):
                    ct = type(c)
                    ch = hooks[ct] if ct in hooks else self._lookup(ct)
                    if ch is None:
                        continue
                    if ch[2] or ch[4] is not None:
                        self._walk(c, ch)
                    else:  # a leaf: its own hooks only
                        if ch[0] is not None:
                            ch[0](v, c)
                        if ch[1] is not None:
                            ch[1](v, c)
                if pair is not None and pair[1] is not None:
                    pair[1](v, node)
        if leave is not None:
            leave(v, node)
        if stmt is not None:
            v._stmt_close(node)
