"""What a dotted chain may evaluate to, statically.

A ``Value`` is ``(kind, fqn)`` with kind one of ``module``, ``class`` (the
class object), ``func`` (a function, or a method found through an instance or
class), ``inst`` (an instance of an analysed or external class), ``ext``
(something outside the analysed code, by dotted name), ``extattr`` (an
attribute of an external instance: callable as a method of that name, but
with nothing known about its own members, so no ``<Base>.<attr>.<method>``
name is ever made up), ``elems`` (a
container whose elements are known: ``fqn`` is the key of what was put into
it, see ``elements``; a subscript, ``get``/``pop`` or a loop reads them) and ``super`` (the
``super()`` of a method of class ``fqn``, only ever the base of a member: ``super().m()`` is
what the first ``m`` after that class returns). Evaluation unions all
possibilities: ``self._worker`` assigned a ``WorkerConnector`` in ``__init__``
and annotated ``WorkerConnector | None`` is ``{("inst", "...WorkerConnector")}``.
"""

from __future__ import annotations

import ast
import builtins
import re
from bisect import bisect_right
from collections import defaultdict
from typing import cast

from kvflowmap.facts import DEF_MARK, AssignFact, CallFact, FunctionFact, Param
from kvflowmap.model.annotations import annotation_names, element_annotation
from kvflowmap.model.callsites import CallSites
from kvflowmap.model.classes import ClassIndex
from kvflowmap.model.core import Model
from kvflowmap.model.cycles import CycleGuard

Value = tuple[str, str]
# Names whose values say nothing about a type (``self._w = None`` then later
# ``self._w = Worker()``: only the second assignment types it).
_NOT_VALUES = frozenset({"super", "None", "True", "False", "NotImplemented", "Ellipsis"})
Ctx = tuple[str, str]  # (module, scope)
MAX_DEPTH = 12
BIND_LEVELS = 2


class Evaluator:
    """Evaluates chains in a (module, scope) context; memoised, cycle-safe,
    and the same answers in any order of queries (``model.cycles``)."""

    def __init__(self, model: Model, classes: ClassIndex, *, bind_levels: int = BIND_LEVELS) -> None:
        self.model = model
        self.classes = classes
        # A parameter with no type from its annotation takes the values its
        # callers pass (``func(param_func)``). The callers are found by an
        # evaluator one level down (binding one level fewer), so no value this
        # one stores was computed while the index was half built; with two
        # levels, a call through a parameter passes values on again
        # (``a(nested_func)`` inside ``func(a)``).
        self.bind_levels = bind_levels
        self._callers: CallSites | None = None  # built on the first unannotated parameter
        self.self_attrs: dict[str, dict[str, list[tuple[Ctx, AssignFact]]]] = defaultdict(
            lambda: defaultdict(list))
        self._memo: dict[tuple[Ctx, str], tuple[Value, ...]] = {}
        self._self_memo: dict[Ctx, tuple[str, str, bool] | None] = {}
        # ``self.x.append(f)`` and ``self.x = [f]`` in a method, by class and
        # attribute: (scope, element chain, literal key)
        self.self_elems: dict[str, dict[str, list[tuple[Ctx, str, str | None]]]] = defaultdict(
            lambda: defaultdict(list))
        self._elems_memo: dict[str, tuple[tuple[Value, str | None], ...]] = {}
        self._cycles = CycleGuard()  # shared: chains and elements ask each other
        self._index_self_attrs()

    # -- context -------------------------------------------------------------
    def function(self, ctx: Ctx) -> FunctionFact | None:
        d = self.model.defs.get(f"{ctx[0]}.{ctx[1]}") if ctx[1] else None
        return cast(FunctionFact, d.fact) if d is not None and not d.is_class else None

    def is_self(self, ctx: Ctx, name: str) -> bool:
        """``name`` is the ``self``/``cls`` parameter of the method ``ctx``."""
        info = self._self_class(ctx)
        return info is not None and info[0] == name

    def _self_class(self, ctx: Ctx) -> tuple[str, str, bool] | None:
        """(self name, class fqn, is classmethod) for a method scope."""
        if ctx in self._self_memo:
            return self._self_memo[ctx]
        found = self._self_memo[ctx] = self._compute_self_class(ctx)
        return found

    def _compute_self_class(self, ctx: Ctx) -> tuple[str, str, bool] | None:
        fn = self.function(ctx)
        if fn is None:
            return None
        if fn.class_qualname is None:
            # a def nested in a method (a thread target, a done-callback) sees
            # the method's ``self`` when it does not bind the name itself
            outer = ctx[1].rpartition(".")[0]
            info = self._self_class((ctx[0], outer)) if outer else None
            if info is None or any(p.name == info[0] for p in fn.params):
                return None
            return info
        if not fn.params:
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
        for (module, scope), groups in self.model.elements.items():
            info = self._self_class((module, scope))
            if info is None:
                continue
            for group, elems in groups.items():
                head, _, attr = group.partition(".")
                if head == info[0] and attr and "." not in attr:
                    self.self_elems[info[1]][attr].extend(((module, scope), e.value, e.key)
                                                          for e in elems)

    # -- evaluation ----------------------------------------------------------
    def eval(self, ctx: Ctx, chain: str, depth: int = 0) -> tuple[Value, ...]:
        """All values ``chain`` may have in ``ctx``."""
        key = (ctx, chain)
        found = self._memo.get(key)
        if found is not None:
            return found
        if depth > MAX_DEPTH:
            self._cycles.cut()
            return ()
        return self._cycles.memoised(self._memo, key, lambda: self._eval(ctx, chain, depth), ())

    def _eval(self, ctx: Ctx, chain: str, depth: int) -> tuple[Value, ...]:
        parts = chain.split(".")
        if parts[0] == "super()" and len(parts) > 1:
            # ``super().m(...)``: ``m`` looked up after the method's class
            values = self._eval_part(ctx, parts[1], depth, base=self._super(ctx))
            parts = parts[1:]
        else:
            values = self._eval_part(ctx, parts[0], depth, first=True)
        for part in parts[1:]:
            values = self._eval_part(ctx, part, depth, base=values)
        return tuple(dict.fromkeys(values))

    def _super(self, ctx: Ctx) -> tuple[Value, ...]:
        """``super()`` in method ``ctx``: a proxy whose members are looked up
        along the MRO after the method's class (nothing outside a method)."""
        info = self._self_class(ctx)
        return (("super", info[1]),) if info is not None else ()

    def _eval_part(self, ctx: Ctx, part: str, depth: int, *, first: bool = False,
                   base: tuple[Value, ...] = ()) -> tuple[Value, ...]:
        cut = _SUFFIX_START.search(part)
        name = part[:cut.start()] if cut else part
        # ``C`` a call, ``S`` a subscript, ``S<key>`` one by a literal key
        # (``d[s:a]``: ``CallFact.keyed``)
        steps = [("C", None) if m.group(0) == "()" else ("S", m.group(1) or None)
                 for m in _STEP.finditer(part, len(name))]
        if first:
            values = self.name(ctx, name, depth)
        elif name in _GETTERS and steps[:1] == [("C", None)] and any(b[0] == "elems" for b in base):
            # ``d.get(k)``, ``q.pop()``: an element
            values = self._element_values(base, depth)
            values += tuple(r for b in base if b[0] != "elems" for m in self.member(b, name, depth)
                            for r in self.call_result(m, depth))
            steps = steps[1:]
        else:
            values = tuple(v for b in base for v in self.member(b, name, depth))
        for s, key in steps:
            if s == "C":
                values = tuple(v for b in values for v in self.call_result(b, depth))
            else:
                # ``queue.Queue[T]``, ``set[str]``, ``Worker[T]``: a class
                # subscripted is the same class (a generic alias)
                generic = tuple(v for v in values if v[0] == "class" or (
                    v[0] == "ext" and (v[1] in _BUILTIN_CLASSES or
                                       _is_class_name(v[1].rpartition(".")[2]))))
                if key is not None and key.startswith("n:"):
                    key = self._constant(ctx, key[2:])
                values = self._element_values(values, depth, key) + generic
        return values

    def _constant(self, ctx: Ctx, name: str) -> str | None:
        """The literal key a module-level constant holds (``KEY = "load"``, or
        imported from the module that assigns it) when every live
        assignment of it is that one literal; None for a local, a parameter
        or anything else."""
        module, scope = ctx
        s = scope
        while s:  # bound in an enclosing function: not a constant we know
            fn = self.function((module, s))
            if fn is not None and (any(p.name == name for p in fn.params) or
                                   self.model.value_assigns(module, s, name)):
                return None
            s = s.rpartition(".")[0]
        target = self.model.resolve_global(module, name)
        owner, attr = (module, name) if target is None else target.rpartition(".")[::2]
        if target is not None and (owner not in self.model.facts or target in self.model.defs):
            return None
        found = _live(self.model.value_assigns(owner, "", attr),
                      self.model.read_lines(owner, "", attr))
        keys = {_literal_text_key(a.literal) if a.value is None and not a.aug else None
                for a in found}
        return keys.pop() if len(keys) == 1 else None

    def _element_values(self, values: tuple[Value, ...], depth: int,
                        key: str | None = None) -> tuple[Value, ...]:
        """What subscripting (by literal ``key``, when known) or iterating
        ``values`` gives: the elements of known containers, and
        ``__getitem__``'s result for analysed classes."""
        out: list[Value] = []
        for kind, fqn in values:
            if kind == "elems":
                out += self.elements(fqn, depth, key)
            elif kind == "inst" and self.classes.is_class(fqn):
                get = self.classes.find_member(fqn, "__getitem__")
                if get is not None:
                    out += self.returns_of(get, depth)
                for nxt in self.iteration(fqn, depth)[1:]:
                    out += self.returns_of(nxt, depth)
        return tuple(out)

    def iteration(self, cls: str, depth: int) -> tuple[str, ...]:
        """``for x in obj`` on an instance of analysed class ``cls``: its
        ``__iter__`` and the ``__next__`` of what that returns (empty when
        ``cls`` defines no ``__iter__``)."""
        it = self.classes.find_member(cls, "__iter__")
        if it is None:
            return ()
        nexts = [n for kind, fqn in self.returns_of(it, depth + 1)
                 if kind == "inst" and self.classes.is_class(fqn)
                 and (n := self.classes.find_member(fqn, "__next__")) is not None]
        return (it, *dict.fromkeys(nexts))

    def name(self, ctx: Ctx, name: str, depth: int) -> tuple[Value, ...]:
        """Values of a bare name: locals, enclosing functions, module, builtins."""
        if name in _NOT_VALUES:
            return ()
        module, scope = ctx
        if name[0] == "@":  # a nested display (``ElementFact.value``)
            return (("elems", f"{module}|{scope}|{name}"),)
        if name.startswith(DEF_MARK):  # what a decorator is applied to: the raw def
            fqn = f"{module}.{scope}.{name[len(DEF_MARK):]}" if scope else \
                f"{module}.{name[len(DEF_MARK):]}"
            return (("func", fqn),) if fqn in self.model.defs else ()
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
                typed = self.from_annotation(module, p.annotation, depth)
                if not typed and not p.annotation:
                    typed = self._inherited(module, fn, p, depth)
                values += typed or self._passed(f"{module}.{scope}", fn, p, depth)
        for a in self.model.value_assigns(module, scope, name):
            found = True
            values += self.from_assign((module, scope), a, depth)
        if found and name in self.model.elements.get((module, scope), _NO_ELEMENTS):
            values.append(("elems", f"{module}|{scope}|{name}"))
        return tuple(values) if found else None

    def _inherited(self, module: str, fn: FunctionFact, p: Param, depth: int
                   ) -> tuple[Value, ...]:
        """An unannotated parameter of an override takes the annotation of the
        method it overrides (``def __init__(self, vllm_config, role)`` under
        ``KVConnectorBase_V1.__init__(self, vllm_config: VllmConfig, ...)``):
        the same name, else the same position."""
        if fn.class_qualname is None:
            return ()
        cls = f"{module}.{fn.class_qualname}"
        base = self.classes.find_member(cls, fn.name, after=cls)
        d = self.model.defs.get(base) if base else None
        if d is None or d.is_class:
            return ()
        params = cast(FunctionFact, d.fact).params
        at = fn.params.index(p)
        match = next((q for q in params if q.name == p.name), None) or (
            params[at] if at < len(params) and params[at].kind == p.kind else None)
        if match is None or not match.annotation:
            return ()
        return self.from_annotation(d.module, match.annotation, depth)

    def call_sites(self, func: str) -> list[tuple[Ctx, CallFact, int]]:
        """The call sites that may run the analysed function ``func``, each
        with the number of parameters filled before the arguments
        (``CallSites.of``); found by an evaluator that binds one level less."""
        if self._callers is None:
            self._callers = CallSites(Evaluator(self.model, self.classes,
                                                bind_levels=max(self.bind_levels - 1, 0)))
        return self._callers.of(func)

    def _passed(self, func: str, fn: FunctionFact, p: Param, depth: int) -> tuple[Value, ...]:
        """Values the call sites of ``func`` pass for parameter ``p``: by
        position (after ``self`` for a bound method or a constructor), by
        keyword, else its default."""
        if not self.bind_levels or p.kind in ("vararg", "kwarg"):
            return ()
        index = next(i for i, q in enumerate(fn.params) if q is p)
        out: list[Value] = []
        for ctx, call, offset in self.call_sites(func):
            arg = next((v for k, v in call.kwargs if k == p.name), None)
            at = index - offset
            if arg is None and p.kind in ("posonly", "pos") and 0 <= at < len(call.args):
                arg = call.args[at]
                if arg is None:
                    continue
            if arg is not None:
                out += self.eval(ctx, arg, depth + 1)
            elif p.default and _looks_like_chain(p.default):
                # a default is evaluated where the ``def`` is
                scope = fn.qualname.rpartition(".")[0]
                out += self.eval((func[: len(func) - len(fn.qualname) - 1], scope), p.default,
                                 depth + 1)
        return tuple(out)

    def _decorated(self, d, depth: int) -> tuple[Value, ...]:
        """What ``@dec def f`` binds ``f`` to: what the innermost analysed
        decorator returns (``inner``), or nothing when it returns ``f`` itself,
        a ``functools.wraps`` wrapper, or is not analysed (``property``...)."""
        scope = d.fact.qualname.rpartition(".")[0]
        ctx = (d.module, scope)
        # The outermost analysed decorator decides: what it returns is bound
        # to the name (inner ones reach it through its parameter).
        for text in d.fact.decorators:
            dec = _strip_args(text.replace(" ", ""))
            if not _looks_like_chain(dec):
                continue
            out: list[Value] = []
            for kind, fqn in self.eval(ctx, dec, depth + 1):
                if kind == "func":
                    out += [v for v in self.returns_of(fqn, depth + 1) if v != ("func", d.fqn)]
            out = [v for v in out if v[0] in ("func", "inst", "class")]
            # a ``functools.wraps`` wrapper stands for the function it wraps:
            # callers are linked to ``work``, not to every decorated
            # function's shared ``wrapper``
            if any(k == "func" and _wraps(self.model.defs.get(f)) for k, f in out):
                return ()
            return tuple(out)
        return ()

    def body_replaced(self, fqn: str) -> bool:
        """Whether a decorator of ``fqn`` binds its name to a wrapper that never
        calls (nor hands on) the decorated function: ``@delegate_to("worker")``
        forwarding every call to ``self.worker``. The body written under the
        ``def`` (often a bare ``pass``) then never runs."""
        d = self.model.defs.get(fqn)
        if d is None or d.is_class or not d.fact.decorators:
            return False
        ctx = (d.module, d.fact.qualname.rpartition(".")[0])
        for text in d.fact.decorators:
            dec = _strip_args(text.replace(" ", ""))
            if not _looks_like_chain(dec):
                continue
            factory = dec.endswith("()")
            for kind, target in self.eval(ctx, dec[:-2] if factory else dec, 1):
                if kind != "func":
                    continue
                # ``@dec(args)``: the decorator is what the factory returns
                makers = self._returned_defs(target) if factory else [target]
                if any(self._never_calls(m, w) for m in makers for w in self._returned_defs(m)):
                    return True
        return False

    def _returned_defs(self, fqn: str) -> list[str]:
        """The defs nested in ``fqn`` that it returns by name (``return wrapper``)."""
        d = self.model.defs.get(fqn)
        if d is None or d.is_class:
            return []
        out = []
        for r in self.model.facts[d.module].returns:
            if r.scope == d.fact.qualname and r.value and r.value.isidentifier():
                nested = self.model.defs.get(f"{fqn}.{r.value}")
                if nested is not None and not nested.is_class:
                    out.append(f"{fqn}.{r.value}")
        return out

    def _never_calls(self, maker: str, wrapper: str) -> bool:
        """``wrapper``, made by decorator ``maker``, neither calls the function
        ``maker`` was given (its first parameter) nor passes it on."""
        params = cast(FunctionFact, self.model.defs[maker].fact).params
        if not params:
            return False
        wrapped = params[0].name
        w = self.model.defs[wrapper]
        qual = w.fact.qualname
        return not any(
            (c.scope == qual or c.scope.startswith(qual + ".")) and
            (c.callee == wrapped or wrapped in c.args or wrapped in (v for _, v in c.kwargs))
            for c in self.model.facts[w.module].calls)

    def _module_var(self, module: str, name: str, depth: int) -> tuple[Value, ...]:
        """A module-level variable: what its last unconditional assignment
        and the assignments after it bind (``a = dec1`` then ``a = dec2``:
        ``dec2``; functions run after the module body)."""
        values: list[Value] = []
        for a in _live(self.model.value_assigns(module, "", name),
                       self.model.read_lines(module, "", name)):
            values += self.from_assign((module, ""), a, depth)
        if name in self.model.elements.get((module, ""), _NO_ELEMENTS):
            values.append(("elems", f"{module}||{name}"))
        return tuple(values)

    def elements(self, container: str, depth: int, key: str | None = None) -> tuple[Value, ...]:
        """Values put into the container named ``module|scope|chain`` (a
        name's own scope), or ``cls|C|attr`` (``self.attr`` along C's MRO):
        with a literal ``key`` (``s:a``, ``i:0``), those put under that key
        or under an unknown one."""
        none: tuple[tuple[Value, str | None], ...] = ()
        found = self._cycles.memoised(self._elems_memo, container,
                                      lambda: self._elements(container, depth), none, tag="elems")
        return tuple(dict.fromkeys(v for v, k in found if key is None or k is None or k == key))

    def _elements(self, container: str, depth: int) -> tuple[tuple[Value, str | None], ...]:
        first, second, third = container.split("|", 2)
        values: list[tuple[Value, str | None]] = []
        if first == "ann":
            return tuple((v, None) for v in self.from_annotation(
                second, element_annotation(third), depth + 1))
        if first == "cls":
            for k in self.classes.mro(second):
                for ctx, value, key in self.self_elems.get(k, {}).get(third, ()):
                    values += ((v, key) for v in self.eval(ctx, value, depth + 1))
        else:
            reads = self.model.read_lines(first, second, third.partition(".")[0],
                                          elements=True)
            for e in _live(self.model.elements.get((first, second), {}).get(third, ()), reads,
                           keyed=True):
                values += ((v, e.key) for v in self.eval((first, second), e.value, depth + 1))
        return tuple(dict.fromkeys(values))

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
        if not out and text:
            # ``dict[str, Worker]``: a builtin container, whose elements
            # (values, for a mapping) are instances of the last argument
            box = _container(text)
            if box:
                out += box
                if "[" in text:
                    out.append(("elems", f"ann|{module}|{text}"))
        return tuple(out)

    def classify(self, target: str, depth: int) -> tuple[Value, ...]:
        """The value a canonical target names."""
        d = self.model.defs.get(target)
        if d is not None:
            if not d.is_class and d.fact.decorators:
                wrapped = self._decorated(d, depth)
                if wrapped:
                    return wrapped
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
                # an external instance's attribute may be a method (callable
                # by that name), but what it holds is unknown; a builtin
                # class's members are known
                if not _builtin_has(fqn, attr):
                    return ()
                return ((("extattr" if kind == "inst" else "ext"), f"{fqn}.{attr}"),)
            return self._class_member(fqn, attr, kind == "inst", depth)
        if kind == "ext":
            return (("ext", f"{fqn}.{attr}"),)
        if kind == "super":
            return self._super_member(fqn, attr, depth)
        return ()

    def _super_member(self, cls: str, attr: str, depth: int) -> tuple[Value, ...]:
        """``super().attr`` in a method of ``cls``: the first definition after
        ``cls`` along its MRO (as ``CallResolver`` resolves the call), else
        the attribute of its first external base."""
        found = self.classes.find_member(cls, attr, after=cls)
        if found is None:
            ext = [k for k in self.classes.mro(cls)[1:] if not self.classes.is_class(k)]
            return (("extattr", f"{ext[0]}.{attr}"),) if ext and _builtin_has(ext[0], attr) \
                else ()
        d = self.model.defs[found]
        if d.is_class:
            return (("class", found),)
        if _is_property(d.fact):
            return self.returns_of(found, depth)
        return (("func", found),)

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
        if not any(self._analysed(v) for v in values):
            # assigned by the subclasses only (``self.child = self.func2``), or
            # only declared here (``_worker_cls: type``) and given a class by
            # each subclass (``_worker_cls = DecodeWorker``): what they assign
            values += [v for sub in self.classes.all_subclasses(cls)
                       for v in self._attr_values(sub, attr, depth)]
        if any(attr in self.self_elems.get(k, {}) for k in self.classes.mro(cls)):
            values = [*values, ("elems", f"cls|{cls}|{attr}")]
        if not values:
            # Declared only in subclasses (duck-typed base): every override.
            values = [("func", f"{s}.{attr}") for s in self.classes.all_subclasses(cls)
                      if f"{s}.{attr}" in self.model.defs]
        if not values and not self._assigned(cls, attr):
            # inherited from a base outside the analysis (``threading.Thread.start``);
            # an attribute the analysed classes assign with an unknown value is
            # unknown, never ``<external base>.<attr>``
            ext = [k for k in self.classes.external_bases(cls) if _builtin_has(k, attr)]
            values = [("extattr", f"{ext[0]}.{attr}")] if ext else []
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
        if fact is not None and attr in fact.members and not self.classes.is_enum(cls):
            # a class body's ``_worker_cls = DecodeWorker``
            body = (module, cls[len(module) + 1:])
            for a in self.model.assigns.get(body, {}).get(attr, ()):
                values += self.from_assign(body, a, depth)
        return values

    def _analysed(self, v: Value) -> bool:
        """A value naming analysed code (a class, an instance, a function)."""
        return v[0] in ("class", "inst", "func") and v[1] in self.model.defs

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
        if kind == "ext" and (fqn in _BUILTIN_CLASSES or _is_class_name(fqn.rpartition(".")[2])):
            return (("inst", fqn),)  # ``set()``, ``ext.Cls()``: by PEP 8's naming, a class
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
        groups = self.model.elements.get((d.module, fn.qualname), _NO_ELEMENTS)
        for group in ("@return", "@yield"):  # a display returned; what a generator yields
            if group in groups:
                values.append(("elems", f"{d.module}|{fn.qualname}|{group}"))
        for r in self.model.facts[d.module].returns:
            if r.scope == fn.qualname and r.value and r.elements is None:
                chain_text = r.value.replace("(...)", "()")
                if not _looks_like_chain(chain_text) and r.origins and \
                        (r.origins[0] or "").startswith("<lambda"):
                    chain_text = r.origins[0] or ""  # ``return (lambda x: ...)``
                if _looks_like_chain(chain_text):
                    values += self.eval((d.module, fn.qualname), _strip_args(chain_text), depth + 1)
        return tuple(values)


_NO_ELEMENTS: dict = {}
_SUFFIX_START = re.compile(r"[(\[]")
_STEP = re.compile(r"\(\)|\[([^\]]*)\]")


def _literal_text_key(text: str | None) -> str | None:
    """``literal_key`` of a literal's source text (``1``, ``"load"``)."""
    try:
        value = ast.literal_eval(text) if text else None
    except (ValueError, SyntaxError):
        return None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return f"i:{value}" if value >= 0 else None
    if isinstance(value, str) and value.isascii() and (value.replace("_", "").isalnum()
                                                       or not value):
        return f"s:{value}"
    return None


def _live(facts, reads: list[int], *, keyed: bool = False) -> list:
    """The assignments (or, ``keyed``, the elements put under a literal key)
    still live somewhere: one is dead when a later one that always runs (a
    simple statement of the scope's own body, not ``+=``) rebinds the name
    (puts under the same key) before the scope reads it again (``reads``,
    sorted: ``a = dec1; a = dec2; @a``: only ``dec2``; ``a = f; a(); a = g``:
    both). Elements under unknown keys stay live."""
    if len(facts) < 2:
        return list(facts)
    rebinds: dict[str | None, list[int]] = defaultdict(list)  # group -> sorted lines
    for g in facts:
        if g.straight and not getattr(g, "aug", False):
            rebinds[g.key if keyed else None].append(g.line)
    for lines in rebinds.values():
        lines.sort()
    out = []
    for f in facts:
        group = f.key if keyed else None
        if keyed and group is None:
            out.append(f)
            continue
        lines = rebinds.get(group, [])
        at = bisect_right(lines, f.line)
        if at == len(lines):
            out.append(f)  # nothing rebinds it later
            continue
        # a read in (f.line, next rebinding] keeps it
        if bisect_right(reads, lines[at]) > bisect_right(reads, f.line):
            out.append(f)
    return out
# Methods returning one of a container's elements
_GETTERS = frozenset({"get", "pop", "popleft", "setdefault", "popitem"})

# Builtin containers an annotation may name, by their spellings.
_CONTAINERS = {"dict": "dict", "Dict": "dict", "defaultdict": "dict", "DefaultDict": "dict",
               "OrderedDict": "dict", "Mapping": "dict", "MutableMapping": "dict",
               "list": "list", "List": "list", "Sequence": "list", "MutableSequence": "list",
               "set": "set", "Set": "set", "frozenset": "frozenset", "FrozenSet": "frozenset",
               "MutableSet": "set", "tuple": "tuple", "Tuple": "tuple", "deque": "deque",
               "Deque": "deque"}


# Classes outside the analysis whose names are not CapWords
_BUILTIN_CLASSES = frozenset({f"<builtin>.{n}" for n in (
    "dict", "list", "set", "frozenset", "tuple", "str", "bytes", "bytearray", "int", "float",
    "bool", "complex", "object", "range", "memoryview")} | {
    "collections.deque", "collections.defaultdict"})


def _builtin_has(cls: str, attr: str) -> bool:
    """False only for a builtin class known to lack ``attr``
    (``<builtin>.Exception.done``); other classes may have anything."""
    if not cls.startswith("<builtin>."):
        return True
    found = getattr(builtins, cls[len("<builtin>."):], None)
    return not isinstance(found, type) or hasattr(found, attr)


def _is_class_name(name: str) -> bool:
    """``Cls``, ``HTTPServer``: CapWords, not a CONSTANT or a function."""
    return bool(name) and name[0].isupper() and not name.isupper() and "_" not in name.strip("_")


def _container(annotation: str | None) -> tuple[Value, ...]:
    """``dict[str, X]`` -> an instance of the builtin ``dict`` (its methods are
    ``<builtin>.dict.get``...); nothing for other annotations."""
    head = (annotation or "").strip().strip("'\"").partition("[")[0].rpartition(".")[2]
    kind = _CONTAINERS.get(head)
    if kind is None:
        return ()
    return (("inst", f"collections.{kind}") if kind == "deque" else ("inst", f"<builtin>.{kind}"),)


def _wraps(d) -> bool:
    """A function decorated ``@functools.wraps(...)``."""
    return d is not None and not d.is_class and any(
        x.partition("(")[0].rpartition(".")[2] == "wraps" for x in d.fact.decorators)


def _is_property(fn) -> bool:
    return any(d.split(".")[-1] in ("property", "cached_property") for d in fn.decorators)


def _looks_like_chain(text: str) -> bool:
    return bool(text) and (text[0].isalpha() or text[0] == "_" or text.startswith("<lambda")) \
        and " " not in _strip_args(text)


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
