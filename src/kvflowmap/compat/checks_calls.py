"""Calls from a connector into its vLLM base: ``super().__init__(vllm_config,
role)`` where the release's ``__init__`` requires ``kv_cache_config``, or a
keyword the release's method does not take. Each call is bound against the
release's signature as Python binds it (TypeError when it does not fit); a
``try/except TypeError`` around it makes the fallback the branch that runs.
Calls with ``*args``/``**kwargs`` are not bound (their length is unknown)."""

from __future__ import annotations

import ast

from kvflowmap.compat.branches import Problem
from kvflowmap.compat.context import Run
from kvflowmap.compat.findings import Finding
from kvflowmap.compat.guarded import settle
from kvflowmap.compat.model import Method
from kvflowmap.facts import CallFact, FunctionFact


def check_base_calls(run: Run) -> list[Finding]:
    """``super().m(...)`` / ``self.m(...)`` calls to base methods (the class
    does not define ``m``), and ``KVConnectorBase_V1.m(self, ...)``, whose
    arguments the release's ``m`` does not bind."""
    out: list[Finding] = []
    for name, (module, fn) in sorted(run.reported.items()):
        if not fn.params:
            continue
        me = fn.params[0].name
        problems: list[Problem] = []
        for c in run.code.facts[module].calls:
            if c.scope != fn.qualname or not c.callee:
                continue
            head, _, method = c.callee.rpartition(".")
            explicit = run.canon(run.code.names[module].fqn(head)) in run.contract
            if not method or not (head in ("super()", me) or explicit) or \
                    not explicit and _defined_above(run, fn, method, head == "super()"):
                continue
            base = run.base_of(method) if not explicit else \
                run.surface.method(run.canon(run.code.names[module].fqn(head)), method)
            if base is None or base.kind == "property":
                continue
            unbound = explicit and base.kind == "instance"  # Base.m(self, ...)
            why = _unbound(run, module, c, base, skip=1 if unbound else 0)
            if why:
                problems.append(Problem(c.line, "TypeError", "error", "base-call",
                                        f"{name} calls {head}.{method}(…) {why}: vLLM "
                                        f"{run.surface.version}'s base raises TypeError "
                                        f"({base.signature})", base.where))
        out += settle(run, module, fn, problems)
    return out


def _defined_above(run: Run, fn: FunctionFact, method: str, sup: bool) -> bool:
    """Whether the connector side resolves ``method`` before vLLM's base: any
    class of the row's MRO for ``self.`` (methods, class attributes, ``self.X``
    its methods assign), one after ``fn``'s class for ``super()``."""
    if not sup and method in run.code.members(run.cls):
        return True
    chain = run.code.ancestors(run.cls)
    owner = next((k for k in chain if run.code.classes[k].fact.qualname == fn.class_qualname
                  and run.code.classes[k].module in run.code.facts), None)
    if sup and owner is not None:
        chain = chain[chain.index(owner) + 1:]
    for k in chain:
        cls = run.code.classes[k]
        if any(f.name == method and f.class_qualname == cls.fact.qualname
               for f in run.code.facts[cls.module].functions):
            return True
        if method in cls.fact.members or method in dict(cls.fact.attributes):
            return True
    return False


def _call_node(run: Run, module: str, c: CallFact) -> ast.Call | None:
    """The call as ``ast`` reads its source text (from its line to its closing
    parenthesis), to see starred arguments the facts leave out."""
    line = run.code.source_line(module, c.line)
    start = line.find(c.callee + "(") if c.callee else -1
    if start < 0:
        return None
    text = line[start:]
    for n in range(c.line + 1, c.line + 40):
        try:
            tree = ast.parse(text.strip().rstrip(":"), mode="eval")
        except SyntaxError:
            text += "\n" + run.code.source_line(module, n)
            continue
        return next((x for x in ast.walk(tree) if isinstance(x, ast.Call)
                     and ast.unparse(x.func) == c.callee), None)
    return None


def _unbound(run: Run, module: str, c: CallFact, base: Method, skip: int = 0) -> str | None:
    """Why the call does not bind to ``base`` (None when it does or cannot tell);
    ``skip``: leading arguments that are not the base's parameters (``self``)."""
    node = _call_node(run, module, c)
    if node is None or any(isinstance(a, ast.Starred) for a in node.args) or \
            any(k.arg is None for k in node.keywords) or len(node.args) < skip:
        return None
    node.args = node.args[skip:]
    params = base.params
    positional = [p for p in params if p.kind in ("posonly", "pos")]
    has_var = any(p.kind == "vararg" for p in params)
    has_kw = any(p.kind == "kwarg" for p in params)
    names = {p.name for p in params if p.kind in ("pos", "kwonly")}
    given = len(node.args)
    if given > len(positional) and not has_var:
        return f"with {given} positional arguments (it takes {len(positional)})"
    for k in node.keywords:
        if k.arg not in names and not has_kw:
            return f"with keyword {k.arg}="
    passed = {p.name for p in positional[:given]} | {k.arg for k in node.keywords if k.arg}
    missing = [p.name for p in params if p.default is None and p.kind in
               ("posonly", "pos", "kwonly") and p.name not in passed]
    if missing:
        return f"without {', '.join(missing)}"
    return None
