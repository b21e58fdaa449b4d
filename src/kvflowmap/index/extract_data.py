"""The data half of the fact walk: assignments, container operations, attribute
reads, comparisons and returns. Mixed into the fact visitor in ``extract``,
whose helpers (``_pos``, ``_code``, ``_scope``, ``_event``...) it uses."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING

import libcst as cst

from kvflowmap.facts import (AssignFact, AttrReadFact, CallFact, CompareFact, ContainerOpFact,
                             ElementFact, KeyReadFact, ReturnFact)
from kvflowmap.index.text import chain, literal_key, literal_string

if TYPE_CHECKING:
    from kvflowmap.facts import FileFacts


def _unpacked(target: cst.BaseExpression,
              iterable: cst.BaseExpression) -> list[tuple[str, str]]:
    """(name, sequence) pairs a tuple target takes elements of:
    ``for i, x in enumerate(xs)`` binds ``x`` to an element of ``xs``, ``for
    a, b in zip(xs, ys)`` ``a`` of ``xs`` and ``b`` of ``ys``."""
    if not (isinstance(target, cst.Tuple) and isinstance(iterable, cst.Call)):
        return []
    names = [chain(e.value) if isinstance(e.value, cst.Name) else None for e in target.elements]
    mapping = dict_view(iterable, "items")
    if mapping and len(names) == 2 and names[1]:
        return [(names[1], mapping)]  # ``for rid, tracker in self._trackers.items()``
    fn = chain(iterable.func)
    args = [chain(a.value) if not a.keyword and not a.star else None for a in iterable.args]
    if fn == "enumerate" and len(names) == 2 and args and args[0] and names[1]:
        return [(names[1], args[0])]
    if fn == "zip" and len(names) == len(args):
        return [(n, a) for n, a in zip(names, args, strict=True) if n and a]
    return []


# Calls that keep the elements of the one sequence they are given.
_KEEPS = frozenset({"list", "sorted", "tuple", "reversed", "set", "frozenset", "iter"})


def dict_view(iterable: cst.BaseExpression, view: str) -> str | None:
    """The mapping ``m`` whose values a loop over ``m.<view>()`` walks, also
    under ``list(...)``/``sorted(...)``: ``self._trackers`` for
    ``list(self._trackers.values())``."""
    while isinstance(iterable, cst.Call) and chain(iterable.func) in _KEEPS and \
            len(iterable.args) == 1 and not iterable.args[0].keyword:
        iterable = iterable.args[0].value
    if isinstance(iterable, cst.Call) and not iterable.args and \
            isinstance(iterable.func, cst.Attribute) and iterable.func.attr.value == view:
        return chain(iterable.func.value)
    return None


# Values whose text ``AssignFact.literal`` keeps: displays a rule compares.
_BUILTIN_NAMES = frozenset(dir(builtins))
_DISPLAYS = (cst.List, cst.Tuple, cst.Set, cst.Dict)
# ``x |= y``, ``x -= y``, ``x &= y`` on a container: the set method each stands for
_SET_AUG_OPS: dict[type, str] = {cst.BitOrAssign: "update", cst.SubtractAssign: "difference_update",
                                 cst.BitAndAssign: "intersection_update"}
_AUG_SYMBOLS: dict[type, str] = {
    cst.BitOrAssign: "|", cst.SubtractAssign: "-", cst.BitAndAssign: "&", cst.AddAssign: "+",
    cst.BitXorAssign: "^", cst.MultiplyAssign: "*"}
_DISPLAY_TYPES = {cst.List: "list", cst.Tuple: "tuple", cst.Set: "set", cst.Dict: "dict"}
# ``x.m(value)``: which argument a container method puts into ``x``; for
# ``update``/``extend`` the argument is itself a container of elements.
_PUTS = {"append": 0, "appendleft": 0, "add": 0, "insert": 1, "setdefault": 1}
_PUTS_ALL = frozenset({"update", "extend"})
_LITERALS = (cst.Tuple, cst.IfExp, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString,
             cst.ConcatenatedString, cst.Ellipsis)


class DataFactsMixin:
    """Visit hooks producing assignment, container, read, compare and return facts."""

    if TYPE_CHECKING:  # provided by the fact visitor (``extract._FactVisitor``)
        facts: FileFacts
        scope: list[str]
        func_stack: list[dict]
        called: set[int]
        attr_names: set[int]
        subtracted: set[int]
        _pending_refs: dict[int, str]
        _displays: list[str]
        line: int

        @property
        def _scope(self) -> str: ...
        def _pos(self, node: cst.CSTNode, token: str | None = None) -> tuple[int, int]: ...
        def _code(self, node: cst.CSTNode | None) -> str | None: ...
        def _add_assign(self, fact: AssignFact) -> None: ...
        def _annotation(self, ann: cst.Annotation | None) -> str | None: ...
        def _record_value_refs(self, value: cst.BaseExpression) -> None: ...
        def _ref_reached(self, node: cst.CSTNode) -> None: ...
        def _event(self, kind: str, index: int) -> None: ...
        def _stmt_name(self, name: str) -> None: ...
        def _straight(self) -> bool: ...

    # -- assignments and containers -----------------------------------------
    def visit_Assign(self, node: cst.Assign) -> bool:
        plain = chain(node.value)
        value = plain or _made_or_none(node.value)
        self._record_value_refs(node.value)
        literal = self._literal(node.value) if plain is None else None
        key = _literal_key(node.value)
        origin = origin_of(node.value)
        for t in node.targets:
            # ``done = done | t.take()``: what comes in is the right side
            grows = _grown(t.target, node.value)
            self._assign_target(t.target, value, None, node, literal, key,
                                origin if grows is None else grows)
            self._value_flow(t.target, node.value)
        if not self.scope:
            self._maybe_all(node)
        return True

    def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
        plain = chain(node.value) if node.value is not None else None
        value = plain or (_made_or_none(node.value) if node.value is not None else None)
        if node.value is not None:
            self._record_value_refs(node.value)
        literal = self._literal(node.value) if plain is None else None
        self._assign_target(node.target, value, self._annotation(node.annotation), node, literal)
        if node.value is not None:
            self._value_flow(node.target, node.value)
        return True

    # -- values for the call graph: elements and bindings --------------------
    def _value_flow(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        """Elements and bindings ``target = value`` gives the evaluator:
        a display's elements under the target's chain (``x = [f, g]``, and
        ``x[k] = f`` puts ``f`` into ``x``), and each name of a tuple
        unpacking bound to the matching element (``a, (b, c) = f, (g, h)``)."""
        if isinstance(target, cst.Subscript):
            container = chain(target.value)
            if container:
                index = target.slice[0].slice if len(target.slice) == 1 else None
                self._element(container, value,
                              literal_key(index.value) if isinstance(index, cst.Index) else None)
            return
        if isinstance(target, (cst.Tuple, cst.List)):
            if isinstance(value, (cst.Tuple, cst.List)):
                self._unpack(target, value)
            return
        name = chain(target)
        if name and isinstance(value, _DISPLAYS):
            self._elements(name, value)
            # ``x = {}`` types ``x`` as ``dict(...)`` does
            self._bind(name, f"{_DISPLAY_TYPES[type(value)]}()")

    def _unpack(self, target: cst.Tuple | cst.List, value: cst.Tuple | cst.List) -> None:
        values = [e for e in value.elements]
        if any(isinstance(e, cst.StarredElement) for e in values):
            return  # lengths unknown
        targets = list(target.elements)
        star = next((i for i, e in enumerate(targets) if isinstance(e, cst.StarredElement)), None)
        if star is None and len(targets) != len(values):
            return
        if star is not None and len(values) < len(targets) - 1:
            return
        after = len(targets) - 1 - star if star is not None else 0
        for i, t in enumerate(targets):
            if star is not None and i == star:
                name = chain(t.value)
                if name:  # ``*rest`` holds the middle elements as a list
                    for v in values[star:len(values) - after]:
                        self._element(name, v.value)
                continue
            v = values[i] if star is None or i < star else values[len(values) - (len(targets) - i)]
            if isinstance(t.value, (cst.Tuple, cst.List)):
                if isinstance(v.value, (cst.Tuple, cst.List)):
                    self._unpack(t.value, v.value)
                continue
            name = chain(t.value)
            if not name:
                continue
            if isinstance(v.value, _DISPLAYS):
                self._elements(name, v.value)
            elif chain(v.value):
                self._bind(name, chain(v.value) or "")

    def _bind(self, name: str, value: str) -> None:
        self.facts.binds.append(AssignFact(self._scope, name, value, None, self.line, 0,
                                           straight=self._straight()))

    def _element(self, group: str, value: cst.BaseExpression, key: str | None = None) -> None:
        """``value`` put into container ``group`` (under literal ``key``): a
        chain, or a display of its own."""
        if isinstance(value, _DISPLAYS):
            nested = f"@{len(self._displays)}"
            self._displays.append(nested)
            self._put(group, nested, key)
            self._elements(nested, value)
            return
        text = chain(value)
        if text and text not in ("None", "True", "False"):
            self._put(group, text, key)

    def _put(self, group: str, value: str, key: str | None = None) -> None:
        self.facts.elements.append(ElementFact(self._scope, group, value, self.line, key,
                                               self._straight()))

    def _elements(self, group: str, display: cst.BaseExpression, *, keyed: bool = True) -> None:
        """Each element (a dict's values) of a display, put into ``group``
        under its key (a dict's literal key, a list's or tuple's index) when
        ``keyed``; ``extend`` puts them at unknown places."""
        if isinstance(display, cst.Dict):
            for e in display.elements:
                if isinstance(e, cst.DictElement):
                    self._element(group, e.value, literal_key(e.key) if keyed else None)
                elif isinstance(e, cst.StarredDictElement) and chain(e.value):
                    self._put(group, f"{chain(e.value)}[]")
            return
        if isinstance(display, (cst.List, cst.Tuple, cst.Set)):
            indexed = keyed and not isinstance(display, cst.Set)
            for i, el in enumerate(display.elements):
                if isinstance(el, cst.StarredElement):
                    indexed = False  # the places after it are unknown
                    if chain(el.value):
                        self._put(group, f"{chain(el.value)}[]")
                else:
                    self._element(group, el.value, f"i:{i}" if indexed else None)

    def _container_puts(self, base: str, meth: str, node: cst.Call) -> None:
        """``base.append(f)``, ``base.update({k: f})``...: the elements put into ``base``."""
        pos = [a for a in node.args if a.keyword is None and not a.star]
        at = _PUTS.get(meth)
        if at is not None and len(pos) > at:
            key = literal_key(pos[0].value) if meth == "setdefault" else None
            self._element(base, pos[at].value, key)
        elif meth in _PUTS_ALL and pos:
            arg = pos[0].value
            if isinstance(arg, _DISPLAYS):
                self._elements(base, arg, keyed=meth == "update")
            elif chain(arg):
                self._put(base, f"{chain(arg)}[]")

    def _loop_target(self, target: cst.BaseExpression, iterable: cst.BaseExpression) -> None:
        """``for x in xs`` (and comprehensions) bind ``x`` to an element of
        ``xs``. Every loop is kept (origin ``for``; target ``<iter>`` when it
        is no plain name) so that iterating an instance links ``__iter__``."""
        name = chain(target) if isinstance(target, cst.Name) else None
        # ``for t in self._trackers.values()``: the values a subscript reads
        source = dict_view(iterable, "values") or chain(iterable)
        if source is None and isinstance(iterable, _DISPLAYS):
            source = f"@{len(self._displays)}"
            self._displays.append(source)
            self._elements(source, iterable)
        if source:
            self.facts.binds.append(AssignFact(self._scope, name or "<iter>", f"{source}[]", None,
                                               self.line, 0, origin="for"))
        for part, element in _unpacked(target, iterable):
            self.facts.binds.append(AssignFact(self._scope, part, f"{element}[]", None,
                                               self.line, 0, origin="for"))

    def visit_AugAssign(self, node: cst.AugAssign) -> bool:
        target = chain(node.target)
        line, col = self._pos(node)
        if target:
            self._add_assign(AssignFact(self._scope, target, chain(node.value), None,
                                        line, col, aug=True,
                                        op=_AUG_SYMBOLS.get(type(node.operator))))
            op = _SET_AUG_OPS.get(type(node.operator))
            if op is not None and "." in target and \
                    not isinstance(node.value, (cst.Integer, cst.Float)):
                # ``self._done -= finished``: the set method it stands for
                self.facts.containers.append(ContainerOpFact(
                    self._scope, target, op, self._code(node.value), line, col))
                self._event("container", len(self.facts.containers) - 1)
        elif isinstance(node.target, cst.Subscript):
            self._container_write(node.target, "setitem", node)
        return True

    def _literal(self, value: cst.BaseExpression | None) -> str | None:
        """Source text of a literal display (``AssignFact.literal``), else None.
        An empty ``{}`` or ``[]`` is kept too: ``self._x = {}`` empties a
        container, where a display with items may fill it."""
        if isinstance(value, (cst.Dict, cst.List)) and not value.elements:
            return "{}" if isinstance(value, cst.Dict) else "[]"
        return self._code(value) if isinstance(value, _LITERALS) else None

    def _assign_target(self, target, value, annotation, node, literal=None, key=None,
                       origin=None, position=None) -> None:
        line, col = self._pos(node)
        if isinstance(target, (cst.Tuple, cst.List)):
            starred = False
            for i, el in enumerate(target.elements):
                starred |= isinstance(el, cst.StarredElement)
                # positions after a ``*rest`` are not known
                at = None if starred or position is not None else i
                self._assign_target(el.value, None, None, node,
                                    origin=origin if at is not None else None, position=at)
            return
        if isinstance(target, cst.Subscript):
            self._container_write(target, "setitem", node,
                                  counts=_counts(getattr(node, "value", None)))
            return
        name = chain(target)
        if name:
            test = _test_text(self, node) if "." not in name and isinstance(
                target, cst.Name) else None
            self._add_assign(AssignFact(self._scope, name, value, annotation, line, col,
                                        literal=literal, key=key, origin=origin, position=position,
                                        test=test))

    def _container_write(self, target: cst.Subscript, op: str, node,
                         counts: bool = False) -> None:
        container = chain(target.value)
        if not container:
            return
        line, col = self._pos(node)
        key = None
        if target.slice and isinstance(target.slice[0].slice, cst.Index):
            key = self._code(target.slice[0].slice.value)
        self.facts.containers.append(ContainerOpFact(self._scope, container, op, key, line, col,
                                                     counts))
        self._event("container", len(self.facts.containers) - 1)

    def visit_Del(self, node: cst.Del) -> bool:
        targets = [e.value for e in node.target.elements] if isinstance(
            node.target, (cst.Tuple, cst.List)) else [node.target]
        for t in targets:
            if isinstance(t, cst.Subscript):
                self._container_write(t, "delitem", node)
        return True

    def _maybe_all(self, node: cst.Assign) -> None:
        if any(chain(t.target) == "__all__" for t in node.targets) and isinstance(
            node.value, (cst.List, cst.Tuple)
        ):
            names = [literal_string(e.value) for e in node.value.elements]
            self.facts.dunder_all = tuple(n for n in names if n)

    def visit_WithItem(self, node: cst.WithItem) -> bool:
        if node.asname is not None:
            target = chain(node.asname.name)
            if target:
                line, col = self._pos(node)
                self._add_assign(AssignFact(self._scope, target, chain(node.item),
                                                     None, line, col))
        return True

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> bool:
        if node.name is not None and node.type is not None:
            target = chain(node.name.name)
            if target:
                line, col = self._pos(node)
                self._add_assign(AssignFact(self._scope, target, None,
                                                     self._code(node.type), line, col))
        return True

    def visit_For(self, node: cst.For) -> bool:
        self._record_value_refs(node.iter)
        self._loop_target(node.target, node.iter)
        return True

    def visit_CompFor(self, node: cst.CompFor) -> bool:
        self._loop_target(node.target, node.iter)
        return True

    # -- reads, comparisons, returns ----------------------------------------
    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if self._pending_refs:
            self._ref_reached(node)
        self.attr_names.add(id(node.attr))
        dotted = chain(node)
        if dotted and id(node) not in self.subtracted:
            self._stmt_name(dotted)
        if id(node) not in self.called:
            base = chain(node.value)
            if base:
                line, col = self._pos(node)
                self.facts.reads.append(AttrReadFact(self._scope, base, node.attr.value, line, col))
        return True

    def visit_Subscript(self, node: cst.Subscript) -> bool:
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            key = literal_string(node.slice[0].slice.value) if isinstance(
                node.slice[0].slice.value, (cst.SimpleString, cst.ConcatenatedString)) else None
            base = chain(node.value)
            if key is not None and base:
                self.facts.key_reads.append(KeyReadFact(self._scope, base, key,
                                                        self._pos(node)[0]))
        return True

    def visit_Comparison(self, node: cst.Comparison) -> bool:
        operands = [chain(node.left)]
        ops = []
        for c in node.comparisons:
            ops.append(type(c.operator).__name__)
            comp = c.comparator
            if isinstance(comp, (cst.Tuple, cst.List, cst.Set)):
                operands.extend(chain(e.value) for e in comp.elements)
            else:
                operands.append(chain(comp))
        line, col = self._pos(node)
        self.facts.compares.append(
            CompareFact(self._scope, tuple(o for o in operands if o), tuple(ops),
                        self._code(node) or "", line, col)
        )
        return True

    # -- truth tests: a chain used as a condition on its own ----------------
    def truth(self, node: cst.BaseExpression, at: cst.CSTNode) -> None:
        """Record ``node`` as a truth test when it is a dotted chain (``if
        x.spec:``, ``x.spec and ...``, ``not x.spec``), at the line of ``at``,
        the node being visited now (line numbers are exact only for it)."""
        found = chain(node)
        if found:
            line, col = self._pos(at)
            self.facts.truths.append(CompareFact(self._scope, (found,), ("Truth",), found,
                                                 line, col))

    def visit_While(self, node: cst.While) -> bool:
        self.truth(node.test, node)
        return True

    def visit_IfExp(self, node: cst.IfExp) -> bool:
        self.truth(node.test, node)
        return True

    def visit_Assert(self, node: cst.Assert) -> bool:
        self.truth(node.test, node)
        return True

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> bool:
        self.truth(node.left, node)
        self.truth(node.right, node)
        return True

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> bool:
        if isinstance(node.operator, cst.Not):
            self.truth(node.expression, node)
        return True

    def visit_Raise(self, node: cst.Raise) -> bool:
        # ``raise C`` constructs C, as ``raise C()`` does (that one is a call);
        # a builtin exception's constructor is nothing to follow
        if isinstance(node.exc, (cst.Name, cst.Attribute)):
            name = chain(node.exc)
            if name and name not in _BUILTIN_NAMES:
                line, col = self._pos(node.exc)
                self.facts.calls.append(CallFact(self._scope, name, line, col))
                self._event("call", len(self.facts.calls) - 1)
        return True

    def visit_Return(self, node: cst.Return) -> bool:
        self._return(node.value, node)
        if node.value is not None:
            self._record_value_refs(node.value)
        return True

    def visit_Yield(self, node: cst.Yield) -> bool:
        if self.func_stack:
            self.func_stack[-1]["generator"] = True
        if isinstance(node.value, cst.BaseExpression):  # not ``yield from``
            self._element("@yield", node.value)
        elif node.value is not None and chain(node.value.item):
            self._put("@yield", f"{chain(node.value.item)}[]")
        return True

    def _return(self, value: cst.BaseExpression | None, node: cst.CSTNode,
                event: bool = True) -> None:
        """A ``ReturnFact`` of the current scope; ``event=False`` for a
        lambda's body, which is no statement of the enclosing function."""
        line, col = self._pos(node)
        if isinstance(value, _DISPLAYS):
            self._elements("@return", value)
        elements = None
        origins: tuple[str | None, ...] = ()
        fields: tuple[tuple[str, str | None], ...] = ()
        if isinstance(value, cst.Tuple):
            elements = tuple(self._code(e.value) or "" for e in value.elements)
            origins = tuple(origin_of(e.value) for e in value.elements)
        elif value is not None:
            origins = (origin_of(value),)
            if isinstance(value, cst.Call):
                fields = tuple((a.keyword.value, origin_of(a.value))
                               for a in value.args if a.keyword is not None)
        self.facts.returns.append(ReturnFact(self._scope, self._code(value), elements, line, col,
                                             origins, fields))
        if event:
            self._event("return", len(self.facts.returns) - 1)


# Calls that copy their argument: the value still comes from it.
_COPIES = frozenset({"set", "list", "frozenset", "tuple", "sorted", "dict"})


# Set operators whose result holds elements of the left operand.
_SET_OPS = (cst.BitAnd, cst.Subtract, cst.BitOr)


def origin_of(value: cst.BaseExpression | None) -> str | None:
    """The dotted chain a value comes from: through ``a or b`` (``a``), a copy
    (``set(a)``, ``list(a)``), parentheses, ``a & b``/``a - b``/``a | b``
    (``a``), a conditional with an empty arm (``a if c else set()`` -> ``a``),
    and a comprehension that keeps the elements it walks (``[r for t in batch
    for r in t.ids]`` -> ``t.ids``); a call stays ``f()``."""
    while value is not None:
        if isinstance(value, cst.BooleanOperation) and isinstance(value.operator, cst.Or):
            value = value.left
        elif isinstance(value, cst.Call) and chain(value.func) in _COPIES and value.args and \
                value.args[0].keyword is None and not value.args[0].star:
            value = value.args[0].value
        elif isinstance(value, cst.BinaryOperation) and isinstance(value.operator, _SET_OPS):
            value = value.left
        elif isinstance(value, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
            value = _walked(value)
        elif isinstance(value, cst.IfExp) and (_empty(value.orelse) or _empty(value.body)):
            # ``t.done() if role == "consumer" else set()``: the arm with a value
            value = value.body if _empty(value.orelse) else value.orelse
        else:
            return chain(value)
    return None


def _grown(target: cst.BaseExpression, value: cst.BaseExpression) -> str | None:
    """``x = x | y`` (or ``x + y``): the origin of ``y``, what is added to ``x``."""
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, (cst.BitOr, cst.Add)) \
            and chain(target) and chain(value.left) == chain(target):
        return origin_of(value.right)
    return None


def _made_or_none(value: cst.BaseExpression) -> str | None:
    """``Engine(...) if role == WORKER else None``: the call of the arm that
    makes something, when the other arm is ``None`` or empty (the value's
    type where it is not empty)."""
    if isinstance(value, cst.IfExp):
        for arm, other in ((value.body, value.orelse), (value.orelse, value.body)):
            if isinstance(arm, cst.Call) and _empty(other):
                return chain(arm)
    return None


def _empty(value: cst.BaseExpression) -> bool:
    """``None`` or an empty collection (``set()``, ``[]``, ``{}``, ``()``)."""
    if isinstance(value, cst.Name):
        return value.value == "None"
    if isinstance(value, (cst.List, cst.Tuple, cst.Set, cst.Dict)):
        return not value.elements
    return isinstance(value, cst.Call) and not value.args and \
        chain(value.func) in ("set", "list", "dict", "tuple", "frozenset")


def _walked(comp: cst.ListComp | cst.SetComp | cst.GeneratorExp | cst.DictComp
            ) -> cst.BaseExpression | None:
    """The iterable of a comprehension's innermost ``for`` when its element (a
    dict comprehension's key) is that ``for``'s target (its first name)."""
    elt = comp.key if isinstance(comp, cst.DictComp) else comp.elt
    inner = comp.for_in
    while inner.inner_for_in is not None:
        inner = inner.inner_for_in
    target: cst.BaseExpression = inner.target
    if isinstance(target, cst.Tuple) and target.elements:
        target = target.elements[0].value
    if isinstance(elt, cst.Name) and isinstance(target, cst.Name) and elt.value == target.value:
        return inner.iter
    return None


def _test_text(walker: DataFactsMixin, node: cst.CSTNode) -> str | None:
    """The source of an assignment's value when it is a truth test
    (``AssignFact.test``): a boolean operation, ``not``, a comparison, or
    ``bool(...)``."""
    value = getattr(node, "value", None) if isinstance(node, (cst.Assign, cst.AnnAssign)) \
        else None
    if isinstance(value, (cst.BooleanOperation, cst.UnaryOperation, cst.Comparison)) or (
            isinstance(value, cst.Call) and chain(value.func) == "bool"):
        return walker._code(value)
    return None


def _literal_key(value: cst.BaseExpression) -> str | None:
    """``"request_id"`` for ``meta["request_id"]`` (a subscript by a string literal)."""
    if not isinstance(value, cst.Subscript) or len(value.slice) != 1:
        return None
    index = value.slice[0].slice
    return literal_string(index.value) if isinstance(index, cst.Index) else None


def _counts(value: cst.BaseExpression | None) -> bool:
    """``value`` is a count moved by a number: ``left - 1``, ``n + 2``."""
    return isinstance(value, cst.BinaryOperation) and \
        isinstance(value.operator, (cst.Add, cst.Subtract)) and \
        (isinstance(value.right, cst.Integer) or isinstance(value.left, cst.Integer))
