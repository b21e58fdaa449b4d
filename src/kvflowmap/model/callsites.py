"""Call sites by the analysed function they call: what binds a parameter
with no annotation to the values its callers pass (``Evaluator._passed``)."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, cast

from kvflowmap.facts import CallFact, FunctionFact
from kvflowmap.model.core import BUILTINS

if TYPE_CHECKING:
    from kvflowmap.model.values import Ctx, Evaluator


class CallSites:
    """Call sites by the analysed function they call, each with the number
    of parameters filled before the arguments (1 for ``self``/``cls``).

    Found per function when first asked, by an evaluator that binds no
    parameters, among the calls that could name it: by its own name, by the
    name of its class or a subclass (``__init__``), ``super().name``, and
    calls of a bare name that is no analysed definition (``a = func;
    a(x)``, a parameter called) or of a call's result or an element. Evaluating every call site of the program
    up front cost more than the whole link did before (profiled on vLLM)."""

    def __init__(self, plain: Evaluator) -> None:
        self.plain = plain
        self.model = plain.model
        self._by_name: dict[str, list[tuple[str, CallFact]]] = defaultdict(list)
        self._memo: dict[str, list[tuple[Ctx, CallFact, int]]] = {}
        self._buckets: dict[str, dict[str, list[tuple[Ctx, CallFact, int]]]] = {}
        defined = {d.fact.name for d in self.model.defs.values()}
        for module, ff in self.model.facts.items():
            for call in ff.calls:
                if not call.callee or not (call.args or call.kwargs):
                    continue
                last = call.callee.rpartition(".")[2]
                if "(" in last or "[" in last or (
                        last == call.callee and last not in defined and last not in BUILTINS):
                    # a call of a call's result or of an element (``f()(x)``,
                    # ``d[k](x)``), or of a name bound to a function
                    last = "<alias>"
                self._by_name[last].append((module, call))

    def of(self, func: str) -> list[tuple[Ctx, CallFact, int]]:
        """The call sites whose callee may be ``func``."""
        found = self._memo.get(func)
        if found is None:
            found = self._memo[func] = self._find(func)
        return found

    def _find(self, func: str) -> list[tuple[Ctx, CallFact, int]]:
        d = self.model.defs[func]
        fn = cast(FunctionFact, d.fact)
        names = [fn.name, "<alias>"]
        if fn.name == "__init__" and fn.class_qualname is not None:
            cls = func.rpartition(".")[0]
            names += [k.rpartition(".")[2] for k in (cls, *self.plain.classes.all_subclasses(cls))]
        out: list[tuple[Ctx, CallFact, int]] = []
        for name in dict.fromkeys(names):
            out += self._bucket(name).get(func, ())
        return out

    def _bucket(self, name: str) -> dict[str, list[tuple[Ctx, CallFact, int]]]:
        """The calls named ``name``, resolved once, by the function each runs."""
        found = self._buckets.get(name)
        if found is None:
            found = self._buckets[name] = defaultdict(list)
            for module, call in self._by_name.get(name, ()):
                for target, offset in self._targets(module, call).items():
                    found[target].append(((module, call.scope), call, offset))
        return found

    def _targets(self, module: str, call: CallFact) -> dict[str, int]:
        """Each function ``call`` may run, with its offset."""
        plain = self.plain
        ctx = (module, call.scope)
        callee = call.callee or ""
        out: dict[str, int] = {}
        if callee.startswith("super()."):
            fn = plain.function(ctx)
            if fn is not None and fn.class_qualname is not None:
                cls = f"{module}.{fn.class_qualname}"
                found = plain.classes.find_member(cls, callee[8:].rstrip("()"), after=cls)
                if found is not None:
                    out[found] = 1
            return out
        base = callee.rpartition(".")[0]
        for kind, fqn in plain.eval(ctx, callee):
            if kind == "class":
                init = plain.classes.find_member(fqn, "__init__")
                if init is not None:
                    out[init] = 1
            elif kind == "inst" and plain.classes.is_class(fqn):
                found = plain.classes.find_member(fqn, "__call__")
                if found is not None:
                    out[found] = 1
            elif kind == "func" and fqn in plain.model.defs:
                fn = cast(FunctionFact, plain.model.defs[fqn].fact)
                decos = {x.rpartition(".")[2] for x in fn.decorators}
                # A bare name that holds a method (``cb = obj.m; cb(x)``, a
                # parameter given ``obj.m``) holds it bound: ``Cls.m(obj, x)``
                # is written with its class.
                bound = fn.class_qualname is not None and "staticmethod" not in decos and (
                    "classmethod" in decos or not base or
                    any(k == "inst" for k, _ in plain.eval(ctx, base)))
                out[fqn] = 1 if bound else 0
        return out
