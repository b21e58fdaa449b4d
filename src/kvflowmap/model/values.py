"""What a dotted chain may evaluate to, statically.

A ``Value`` is ``(kind, fqn)`` with kind one of ``module``, ``class`` (the
class object), ``func`` (a function, or a method found through an instance or
class), ``inst`` (an instance of an analysed or external class) and ``ext``
(something outside the analysed code, by dotted name). Evaluation unions all
possibilities: ``self._worker`` assigned a ``WorkerConnector`` in ``__init__``
and annotated ``WorkerConnector | None`` is ``{("inst", "...WorkerConnector")}``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import cast

from kvflowmap.facts import AssignFact, FunctionFact
from kvflowmap.model.annotations import annotation_names
from kvflowmap.model.classes import ClassIndex
from kvflowmap.model.core import Model

Value = tuple[str, str]
# Names whose values say nothing about a type (``self._w = None`` then later
# ``self._w = Worker()``: only the second assignment types it).
_NOT_VALUES = frozenset({"super", "None", "True", "False", "NotImplemented", "Ellipsis"})
Ctx = tuple[str, str]  # (module, scope)
MAX_DEPTH = 12


class Evaluator:
    """Evaluates chains in a (module, scope) context; memoised, cycle-safe."""

    def __init__(self, model: Model, classes: ClassIndex) -> None:
        self.model = model
        self.classes = classes
        self.self_attrs: dict[str, dict[str, list[tuple[Ctx, AssignFact]]]] = defaultdict(
            lambda: defaultdict(list))
        self._memo: dict[tuple[Ctx, str], tuple[Value, ...]] = {}
        self._self_memo: dict[Ctx, tuple[str, str, bool] | None] = {}
        self._index_self_attrs()

    # -- context -------------------------------------------------------------
    def function(self, ctx: Ctx) -> FunctionFact | None:
        d = self.model.defs.get(f"{ctx[0]}.{ctx[1]}") if ctx[1] else None
        return cast(FunctionFact, d.fact) if d is not None and not d.is_class else None

    def _self_class(self, ctx: Ctx) -> tuple[str, str, bool] | None:
        """(self name, class fqn, is classmethod) for a method scope."""
        if ctx in self._self_memo:
            return self._self_memo[ctx]
        found = self._self_memo[ctx] = self._compute_self_class(ctx)
        return found

    def _compute_self_class(self, ctx: Ctx) -> tuple[str, str, bool] | None:
        fn = self.function(ctx)
        if fn is None or fn.class_qualname is None or not fn.params:
            return None
        if any(d.split(".")[-1] == "staticmethod" for d in fn.decorators):
            return None
        is_cm = any(d.split(".")[-1] == "classmethod" for d in fn.decorators)
        return fn.params[0].name, f"{ctx[0]}.{fn.class_qualname}", is_cm

    def _index_self_attrs(self) -> None:
        for (module, scope), targets in self.model.assigns.items():
            info = self._self_class((module, scope))
            if info is None:
                continue
            selfname, cls, _ = info
            for target, assigns in targets.items():
                head, _, attr = target.partition(".")
                if head == selfname and attr and "." not in attr:
                    self.self_attrs[cls][attr].extend(((module, scope), a) for a in assigns)

    # -- evaluation ----------------------------------------------------------
    def eval(self, ctx: Ctx, chain: str, depth: int = 0) -> tuple[Value, ...]:
        """All values ``chain`` may have in ``ctx``."""
        key = (ctx, chain)
        if key in self._memo:
            return self._memo[key]
        if depth > MAX_DEPTH:
            return ()
        self._memo[key] = ()  # cycle guard
        parts = chain.split(".")
        values = self._eval_part(ctx, parts[0], depth, first=True)
        for part in parts[1:]:
            values = self._eval_part(ctx, part, depth, base=values)
        result = tuple(dict.fromkeys(values))
        self._memo[key] = result
        return result

    def _eval_part(self, ctx: Ctx, part: str, depth: int, *, first: bool = False,
                   base: tuple[Value, ...] = ()) -> tuple[Value, ...]:
        name = part.rstrip("()[]")
        suffix = part[len(name):]
        if first:
            values = self.name(ctx, name, depth)
        else:
            values = tuple(v for b in base for v in self.member(b, name, depth))
        for s in suffix.replace("()", "C").replace("[]", "S"):
            if s == "C":
                values = tuple(v for b in values for v in self.call_result(b, depth))
            else:
                values = ()  # element types are not tracked
        return values

    def name(self, ctx: Ctx, name: str, depth: int) -> tuple[Value, ...]:
        """Values of a bare name: locals, enclosing functions, module, builtins."""
        if name in _NOT_VALUES:
            return ()
        module, scope = ctx
        info = self._self_class(ctx)
        if info is not None and name == info[0]:
            return (("class" if info[2] else "inst", info[1]),)
        s = scope
        while s:
            # Class bodies do not enclose their methods' names (Python scoping).
            d = self.model.defs.get(f"{module}.{s}")
            if d is None or not d.is_class:
                local = self._local(module, s, name, depth)
                if local is not None:
                    return local
            s = s.rpartition(".")[0]
        target = self.model.resolve_global(module, name)
        if target is None:
            return self._module_var(module, name, depth)
        return self.classify(target, depth)

    def _local(self, module: str, scope: str, name: str, depth: int) -> tuple[Value, ...] | None:
        nested = f"{module}.{scope}.{name}"
        if nested in self.model.defs:
            return self.classify(nested, depth)
        fn = self.function((module, scope))
        if fn is None:
            return None  # a class body: its names do not leak into methods
        bound = self.model._import_target(module, scope, name)
        if bound is not None:
            return self.classify(self.model.canonical(bound), depth)
        values: list[Value] = []
        found = False
        for p in fn.params:
            if p.name == name:
                found = True
                values += self.from_annotation(module, p.annotation, depth)
        for a in self.model.assigns.get((module, scope), {}).get(name, ()):
            found = True
            values += self.from_assign((module, scope), a, depth)
        return tuple(values) if found else None

    def _module_var(self, module: str, name: str, depth: int) -> tuple[Value, ...]:
        values: list[Value] = []
        for a in self.model.assigns.get((module, ""), {}).get(name, ()):
            values += self.from_assign((module, ""), a, depth)
        return tuple(values)

    def from_assign(self, ctx: Ctx, a: AssignFact, depth: int) -> tuple[Value, ...]:
        values = list(self.from_annotation(ctx[0], a.annotation, depth))
        if a.value and not a.aug:
            values += self.eval(ctx, a.value, depth + 1)
        return tuple(values)

    def from_annotation(self, module: str, text: str | None, depth: int) -> tuple[Value, ...]:
        """Instances of the classes an annotation names."""
        out: list[Value] = []
        for n in annotation_names(text):
            head, _, rest = n.partition(".")
            for kind, fqn in self.name((module, ""), head, depth + 1):
                if kind in ("class", "ext", "module"):
                    full = f"{fqn}.{rest}" if rest else fqn
                    if kind == "module":
                        full = self.model.canonical(full)
                    out.append(("inst", full))
        return tuple(out)

    def classify(self, target: str, depth: int) -> tuple[Value, ...]:
        """The value a canonical target names."""
        d = self.model.defs.get(target)
        if d is not None:
            return (("class" if d.is_class else "func", target),)
        if target in self.model.table.files:
            return (("module", target),)
        owner, _, attr = target.rpartition(".")
        if owner in self.model.defs and self.model.defs[owner].is_class:
            return self.member(("class", owner), attr, depth)
        if owner in self.model.facts:  # a module-level variable elsewhere
            return self._module_var(owner, attr, depth)
        return (("ext", target),)

    # -- members and calls ---------------------------------------------------
    def member(self, base: Value, attr: str, depth: int) -> tuple[Value, ...]:
        """Values of ``base.attr``."""
        kind, fqn = base
        if kind == "module":
            t = self.model.lookup(fqn, attr)
            if t is None:
                return () if fqn in self.model.facts else (("ext", f"{fqn}.{attr}"),)
            return self.classify(self.model.canonical(t), depth)
        if kind in ("class", "inst"):
            if not self.classes.is_class(fqn):
                return (("ext", f"{fqn}.{attr}"),)
            return self._class_member(fqn, attr, kind == "inst", depth)
        if kind == "ext":
            return (("ext", f"{fqn}.{attr}"),)
        return ()

    def _class_member(self, cls: str, attr: str, instance: bool, depth: int) -> tuple[Value, ...]:
        found = self.classes.find_member(cls, attr)
        if found is not None:
            d = self.model.defs[found]
            if d.is_class:
                return (("class", found),)
            if instance and _is_property(d.fact):
                return self.returns_of(found, depth)
            return (("func", found),)
        # The most derived class along the MRO that types the attribute wins:
        # ``NixlPullConnector`` assigning a pull worker is not widened by the
        # base's ``NixlBaseConnectorWorker | None`` declaration (which would
        # dispatch to every sibling's worker).
        values: list[Value] = []
        for k in self.classes.mro(cls):
            values = self._attr_values(k, attr, depth)
            if values:
                break
        if not values:
            # Declared only in subclasses (duck-typed base): every override.
            values = [("func", f"{s}.{attr}") for s in self.classes.all_subclasses(cls)
                      if f"{s}.{attr}" in self.model.defs]
        if not values and not self._assigned(cls, attr):
            # inherited from a base outside the analysis (``threading.Thread.start``);
            # an attribute the analysed classes assign with an unknown value is
            # unknown, never ``<external base>.<attr>``
            ext = self.classes.external_bases(cls)
            values = [("ext", f"{ext[0]}.{attr}")] if ext else []
        return tuple(values)

    def _assigned(self, cls: str, attr: str) -> bool:
        """Some analysed class along ``cls``'s MRO, or a subclass (``other:
        Base`` narrowed to a subclass), assigns or declares ``attr``."""
        for k in (*self.classes.mro(cls), *self.classes.all_subclasses(cls)):
            if attr in self.self_attrs.get(k, {}):
                return True
            fact = self.classes.class_fact(k)
            if fact is not None and (attr in fact.members or
                                     any(name == attr for name, _ in fact.attributes)):
                return True
        return False

    def _attr_values(self, cls: str, attr: str, depth: int) -> list[Value]:
        values: list[Value] = []
        fact = self.classes.class_fact(cls)
        module = self.model.defs[cls].module if cls in self.model.defs else ""
        if fact is not None:
            for name, ann in fact.attributes:
                if name == attr:
                    values += self.from_annotation(module, ann, depth) or _container(ann)
            if attr in fact.members and not values and self.classes.is_enum(cls):
                values.append(("inst", cls))
        for ctx, a in self.self_attrs.get(cls, {}).get(attr, ()):
            values += self.from_assign(ctx, a, depth)
        return values

    def call_result(self, callee: Value, depth: int) -> tuple[Value, ...]:
        """Values a call of ``callee`` returns."""
        kind, fqn = callee
        if kind == "class":
            return (("inst", fqn),)
        if kind == "func":
            return self.returns_of(fqn, depth)
        if kind == "inst" and self.classes.is_class(fqn):
            call = self.classes.find_member(fqn, "__call__")
            return self.returns_of(call, depth) if call else ()
        return ()

    def returns_of(self, func: str, depth: int) -> tuple[Value, ...]:
        """Return annotation of a function, else its returned chains."""
        d = self.model.defs.get(func)
        if d is None or d.is_class:
            return ()
        fn = cast(FunctionFact, d.fact)
        if fn.returns:
            return self.from_annotation(d.module, fn.returns, depth)
        values: list[Value] = []
        for r in self.model.facts[d.module].returns:
            if r.scope == fn.qualname and r.value and r.elements is None:
                chain_text = r.value.replace("(...)", "()")
                if _looks_like_chain(chain_text):
                    values += self.eval((d.module, fn.qualname), _strip_args(chain_text), depth + 1)
        return tuple(values)


# Builtin containers an annotation may name, by their spellings.
_CONTAINERS = {"dict": "dict", "Dict": "dict", "defaultdict": "dict", "DefaultDict": "dict",
               "OrderedDict": "dict", "Mapping": "dict", "MutableMapping": "dict",
               "list": "list", "List": "list", "Sequence": "list", "MutableSequence": "list",
               "set": "set", "Set": "set", "frozenset": "frozenset", "FrozenSet": "frozenset",
               "MutableSet": "set", "tuple": "tuple", "Tuple": "tuple", "deque": "deque",
               "Deque": "deque"}


def _container(annotation: str | None) -> tuple[Value, ...]:
    """``dict[str, X]`` -> an instance of the builtin ``dict`` (its methods are
    ``<builtin>.dict.get``...); nothing for other annotations."""
    head = (annotation or "").strip().strip("'\"").partition("[")[0].rpartition(".")[2]
    kind = _CONTAINERS.get(head)
    if kind is None:
        return ()
    return (("inst", f"collections.{kind}") if kind == "deque" else ("inst", f"<builtin>.{kind}"),)


def _is_property(fn) -> bool:
    return any(d.split(".")[-1] in ("property", "cached_property") for d in fn.decorators)


def _looks_like_chain(text: str) -> bool:
    return bool(text) and (text[0].isalpha() or text[0] == "_") and " " not in _strip_args(text)


def _strip_args(text: str) -> str:
    """``make(a, b).x`` -> ``make().x``: drop call arguments and subscripts' contents."""
    out, depth = [], 0
    for ch in text:
        if ch in "([":
            if depth == 0:
                out.append(ch)
            depth += 1
        elif ch in ")]":
            depth -= 1
            if depth == 0:
                out.append(ch)
        elif depth == 0:
            out.append(ch)
    return "".join(out)
