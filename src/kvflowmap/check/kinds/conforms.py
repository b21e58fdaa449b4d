"""Rule kind ``conforms``: connectors keep to the vLLM base class they run with.

Three checks on each target class (a subclass of the protocol base class):

- every override of a method of a *contract* class (``bases``: the base class
  and its siblings such as ``SupportsHMA``) stays callable the way vLLM calls
  it: same method kind (property, classmethod, async), every positional
  argument vLLM may pass accepted, no extra required parameter, parameters
  vLLM passes by keyword (seen at its call sites) kept under that name,
  ``*args`` / ``**kwargs`` kept, and annotations compatible when both sides
  have them (names resolved to FQNs: ``set[str]`` is no ``KVConnectorMetadata``);
- every abstract method along the MRO is implemented (leaf classes only);
- ``self.X`` / ``super().X`` used but defined nowhere along a fully analysed
  MRO (a base member the analysed vLLM no longer has).

Two-release mode (``compare_with: "vllm==0.X.Y"`` or an import root path):
the contract methods whose signature differs between that release and the
analysed vLLM are reported, and so are overrides that still fit the old form
but not the new one; the other checks are off. The other release is analysed
on its own, once per process (a spec is fetched into the fact cache).
"""

from __future__ import annotations

import ast
import fnmatch
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.model import Finding
from kvflowmap.facts import CallFact, FunctionFact, Param

PARAMS: dict[str, tuple[tuple[type, ...], object, str]] = {
    "bases": ((list,), [], "FQN globs of the contract classes; default: the rule's "
              "applies_to.base_class (else the protocol base class) and its module's classes"),
    "signatures": ((bool,), True, "check override signatures against the base"),
    "annotations": ((bool,), True, "compare parameter annotations when both sides have them"),
    "returns": ((bool,), True, "compare return annotations when both sides have them"),
    "abstract": ((bool,), True, "report abstract methods left unimplemented (leaf classes)"),
    "missing_members": ((bool,), True, "report self.X / super().X defined nowhere in the MRO"),
    "ignore_methods": ((list,), [], "method names (globs) not checked"),
    "compare_with": ((str,), "", "another vLLM release ('vllm==0.X.Y' or an import root): "
                     "two-release mode"),
    "report_changes": ((bool,), True, "two-release mode: also report each changed base method"),
}

TRIVIAL_BASES = {"object", "ABC", "abc.ABC", "Generic", "typing.Generic", "typing.Protocol",
                 "typing_extensions.Protocol"}
_ANY = {"typing.Any", "typing_extensions.Any", "object"}
_TYPING_BUILTIN = {"Set": "set", "FrozenSet": "frozenset", "List": "list", "Dict": "dict",
                   "Tuple": "tuple", "Type": "type"}
_NUMBERS = {"bool", "int", "float", "complex"}


def check(ctx: CheckContext) -> list[Finding]:
    """Findings of every enabled conformance check on the target classes."""
    contract = _contract(ctx)
    if ctx.param("compare_with"):
        return _two_release(ctx, contract, str(ctx.param("compare_with")))
    out: list[Finding] = []
    if ctx.param("signatures", True):
        callers = _Callers(ctx)
        out += each_function(ctx, _overrides(ctx, contract),
                             lambda f: _check_override(ctx, contract, callers, f))
    if ctx.param("abstract", True):
        out += each_function(ctx, ctx.target_classes, lambda c: _check_abstract(ctx, c))
    if ctx.param("missing_members", True):
        out += each_function(ctx, _methods(ctx), lambda f: _check_members(ctx, f))
    return out


# -- which methods ------------------------------------------------------------
def _contract(ctx: CheckContext) -> list[str]:
    pats = list(ctx.param("bases") or [])
    if not pats:
        pats = list(ctx.rule.applies_to.base_class) or [ctx.protocol.base_class]
        pats += [f"{b.rpartition('.')[0]}.*" for b in list(pats)]
    return pats


def _is_contract(cls: str, pats: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(cls, p) for p in pats)


def _base_method(ctx: CheckContext, fqn: str, pats: list[str]) -> str | None:
    """Method ``fqn`` as defined in the first contract class after its own."""
    cls, _, name = fqn.rpartition(".")
    for k in ctx.classes.mro(cls)[1:]:
        if _is_contract(k, pats) and f"{k}.{name}" in ctx.model.defs:
            return f"{k}.{name}"
    return None


def _methods(ctx: CheckContext) -> list[str]:
    classes = set(ctx.target_classes)
    return [f for f in ctx.target_functions if f.rpartition(".")[0] in classes]


def _ignored(ctx: CheckContext, name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in ctx.param("ignore_methods") or [])


def _overrides(ctx: CheckContext, pats: list[str]) -> list[str]:
    return [f for f in _methods(ctx) if not _ignored(ctx, f.rpartition(".")[2])
            and _base_method(ctx, f, pats)]


def method_kind(fn: FunctionFact) -> str:
    """instance | class | static | property."""
    names = {d.split("(")[0].split(".")[-1] for d in fn.decorators}
    for deco, kind in (("staticmethod", "static"), ("classmethod", "class"),
                       ("property", "property"), ("cached_property", "property")):
        if deco in names:
            return kind
    return "instance"


def fully_analysed(ctx: CheckContext, cls: str) -> bool:
    """True when every class along the MRO is analysed (or trivially empty)."""
    return all(ctx.classes.is_class(k) or k in TRIVIAL_BASES for k in ctx.classes.mro(cls))


# -- signatures ----------------------------------------------------------------
@dataclass(frozen=True)
class Sig:
    """A method signature with annotations resolved to FQN alternatives
    (``None``: unknown or ``Any``, compatible with everything)."""

    kind: str
    is_async: bool
    params: tuple[Param, ...]  # without self / cls
    heads: tuple[frozenset[str] | None, ...]
    ret: frozenset[str] | None
    returns: str | None
    text: str

    @classmethod
    def of(cls, linker, fqn: str) -> Sig:
        """The signature of analysed method ``fqn`` (``linker`` of its analysis)."""
        d = linker.model.defs[fqn]
        fn: FunctionFact = d.fact
        kind = method_kind(fn)
        params = fn.params if kind == "static" else fn.params[1:]
        node = linker.graph.nodes.get(fqn, {})
        return cls(kind, fn.is_async, params, tuple(_heads(linker, d.module, p.annotation)
                                                    for p in params),
                   _heads(linker, d.module, fn.returns), fn.returns,
                   node.get("signature") or f"def {fn.name}(...)")

    @property
    def shape(self) -> tuple:
        """What two releases compare: kinds, names, defaults, annotation texts."""
        def norm(t: str | None) -> str | None:
            return None if t is None else "".join(c for c in t if c not in "\"' ")
        return (self.kind, self.is_async, norm(self.returns),
                tuple((p.name, p.kind, p.default is not None, norm(p.annotation))
                      for p in self.params))


def _heads(linker, module: str, text: str | None) -> frozenset[str] | None:
    if not text:
        return None
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None
    names: list[str] = []
    if not _alternatives(node, names, 0):
        return None
    out = set()
    for name in names:
        fq = "None" if name == "None" else _resolve(linker, module, name)
        if fq is None:
            return None
        out.add(fq)
    return frozenset(out)


def _alternatives(node: ast.AST, out: list[str], depth: int) -> bool:
    """Top-level alternatives of an annotation (``A | B``, ``Optional[A]``)."""
    if depth > 10:
        return False
    if isinstance(node, ast.Constant):
        if node.value is None:
            out.append("None")
            return True
        if isinstance(node.value, str):
            try:
                inner = ast.parse(node.value.strip(), mode="eval").body
                return _alternatives(inner, out, depth + 1)
            except SyntaxError:
                return False
        return False
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return all(_alternatives(side, out, depth + 1) for side in (node.left, node.right))
    if isinstance(node, ast.Subscript):
        head = _dotted(node.value)
        last = (head or "").split(".")[-1]
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if last in ("Optional", "Union", "Annotated"):
            items = items[:1] if last == "Annotated" else items
            out.extend(["None"] if last == "Optional" else [])
            return all(_alternatives(i, out, depth + 1) for i in items)
        node = node.value
    name = _dotted(node)
    if name:
        out.append(name)
    return bool(name)


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _resolve(linker, module: str, name: str) -> str | None:
    """FQN of an annotation name; builtins bare (``set``); None when unknown."""
    head, _, rest = name.partition(".")
    for kind, fqn in linker.values.name((module, ""), head, 0):
        if kind not in ("class", "ext", "module"):
            continue
        full = linker.model.canonical(f"{fqn}.{rest}" if rest else fqn)
        full = full.removeprefix("<builtin>.").removeprefix("builtins.")
        mod, _, last = full.rpartition(".")
        if full in _ANY or mod == "collections.abc":
            return None
        if mod in ("typing", "typing_extensions"):
            return _TYPING_BUILTIN.get(last)
        return full
    return None


class Related:
    """Whether two resolved annotation names may denote compatible values."""

    def __init__(self, ctx: CheckContext) -> None:
        self.ctx = ctx

    def __call__(self, x: str, y: str) -> bool:
        if x == y or (x in _NUMBERS and y in _NUMBERS):
            return True
        if "None" in (x, y):
            return False
        cls = self.ctx.classes
        cx, cy = cls.is_class(x), cls.is_class(y)
        if cx and cy:
            return y in cls.mro(x) or x in cls.mro(y)
        if cx != cy and "." not in (y if cx else x):  # analysed class vs builtin
            c, b = (x, y) if cx else (y, x)
            return b in {k.removeprefix("<builtin>.") for k in cls.mro(c)} or \
                not fully_analysed(self.ctx, c)
        if not cx and not cy and "." not in x and "." not in y:
            return False  # two different builtins
        return True  # something external: cannot tell


def _compatible(a: frozenset[str] | None, b: frozenset[str] | None, related: Related) -> bool:
    return a is None or b is None or any(related(x, y) for x in a for y in b)


Issues = list[tuple[str, str]]


def compare(base: Sig, over: Sig, passed: dict[str, int] | None, related: Related, *,
            annotations: bool = True, returns: bool = True) -> Issues:
    """(key, message) of each way ``over`` breaks callers of ``base``.
    ``passed``: keyword names (and ``*pos``: most positional args) seen at call
    sites; ``None`` when no call site is known (assume any may be passed)."""
    if base.kind != over.kind:
        return [("kind", f"is a {over.kind} method; the base is a {base.kind} method")]
    issues: Issues = []
    if base.is_async != over.is_async:
        issues.append(("async", f"is {'' if over.is_async else 'not '}async; the base is "
                       f"{'' if base.is_async else 'not '}async"))
    if returns and not _compatible(base.ret, over.ret, related):
        issues.append(("return", f"returns {over.returns}; the base returns {base.returns}"))
    if base.kind != "property":
        issues += _positional(base, over, passed, related if annotations else None)
        issues += _keywords(base, over, related if annotations else None)
        issues += _extras(base, over)
    return issues


def _kinds(sig: Sig) -> tuple[list[int], bool, bool, set[str]]:
    """Positional indexes, has ``*args``, has ``**kwargs``, names usable by keyword."""
    return ([i for i, p in enumerate(sig.params) if p.kind in ("posonly", "pos")],
            any(p.kind == "vararg" for p in sig.params),
            any(p.kind == "kwarg" for p in sig.params),
            {p.name for p in sig.params if p.kind in ("pos", "kwonly")})


def _positional(base: Sig, over: Sig, passed: dict[str, int] | None,
                related: Related | None) -> Issues:
    issues: Issues = []
    pos, has_var, has_kw, names = _kinds(over)
    for n, bi in enumerate(_kinds(base)[0]):
        bp = base.params[bi]
        maybe = passed is None or passed.get("*pos", 0) > n or bp.name in passed
        if n >= len(pos):
            if not has_var and (bp.default is None or maybe):
                issues.append((f"pos:{bp.name}", f"does not accept parameter '{bp.name}' "
                               f"(position {n + 1} of the base)"))
            continue
        op = over.params[pos[n]]
        if related and not _compatible(base.heads[bi], over.heads[pos[n]], related):
            issues.append((f"ann:{bp.name}", f"parameter '{op.name}' is annotated "
                           f"{op.annotation}; the base takes {bp.name}: {bp.annotation}"))
        if passed and bp.name in passed and op.name != bp.name and bp.name not in names \
                and not has_kw:
            issues.append((f"kw:{bp.name}", f"vLLM passes '{bp.name}=' by keyword; this "
                           f"override calls it '{op.name}'"))
        elif op.default is None and bp.default is not None and passed is not None and not maybe:
            issues.append((f"req:{op.name}", f"makes optional parameter '{bp.name}' required"))
    return issues


def _keywords(base: Sig, over: Sig, related: Related | None) -> Issues:
    issues: Issues = []
    _, has_var, has_kw, names = _kinds(over)
    for bi, bp in enumerate(base.params):
        if bp.kind == "kwonly" and bp.name not in names and not has_kw:
            issues.append((f"kwonly:{bp.name}", f"does not accept keyword '{bp.name}'"))
        elif bp.kind == "kwonly" and related and bp.name in names:
            oi = next(i for i, p in enumerate(over.params) if p.name == bp.name)
            if not _compatible(base.heads[bi], over.heads[oi], related):
                issues.append((f"ann:{bp.name}", f"'{bp.name}' is annotated "
                               f"{over.params[oi].annotation}; the base takes {bp.annotation}"))
    _, base_var, base_kw, _ = _kinds(base)
    if base_var and not has_var:
        issues.append(("varargs", "drops *args of the base"))
    if base_kw and not has_kw:
        issues.append(("kwargs", "drops **kwargs of the base: extra keywords vLLM passes fail"))
    return issues


def _extras(base: Sig, over: Sig) -> Issues:
    """Required parameters of the override that vLLM never passes."""
    bpos, base_var, _, _ = _kinds(base)
    bnames = {p.name for p in base.params}
    issues: Issues = []
    for n, i in enumerate(_kinds(over)[0]):
        p = over.params[i]
        if n >= len(bpos) and p.default is None and p.name not in bnames and not base_var:
            issues.append((f"extra:{p.name}", f"requires parameter '{p.name}' that the base "
                           "does not have"))
    for p in over.params:
        if p.kind == "kwonly" and p.default is None and p.name not in bnames:
            issues.append((f"extra:{p.name}", f"requires keyword '{p.name}' that the base "
                           "does not have"))
    return issues


class _Callers:
    """Call sites of contract methods: keywords passed, positional counts."""

    def __init__(self, ctx: CheckContext) -> None:
        self.ctx = ctx
        self.by_name: dict[str, list[tuple[str, CallFact]]] = {}
        for module, ff in ctx.model.facts.items():
            for c in ff.calls:
                if c.callee and "." in c.callee:
                    self.by_name.setdefault(c.callee.rpartition(".")[2], []).append((module, c))
        self._memo: dict[str, list[tuple[str, CallFact]]] = {}

    def calls(self, base: str) -> list[tuple[str, CallFact]]:
        """Call sites resolved to ``base`` or one of its overrides."""
        if base not in self._memo:
            wanted = {base, *self.ctx.classes.overrides(base)}
            self._memo[base] = sorted(
                ((m, c) for m, c in self.by_name.get(base.rpartition(".")[2], ())
                 if any(t.fqn in wanted for t in self.ctx.linker.calls.resolve((m, c.scope), c))),
                key=lambda mc: (self.ctx.is_subject(mc[0]), mc[0], mc[1].line))
        return self._memo[base]

    def passed(self, base: str) -> dict[str, int] | None:
        """Keyword names and ``*pos`` (most positional args) over all call sites."""
        sites = self.calls(base)
        if not sites:
            return None
        out = {"*pos": max(len(c.args) for _, c in sites)}
        out.update({k: 1 for _, c in sites for k, _ in c.kwargs})
        return out

    def first_site(self, base: str) -> list[tuple[str, int, str]]:
        for m, c in self.calls(base)[:1]:
            args = [a or "…" for a in c.args] + [f"{k}={v or '…'}" for k, v in c.kwargs]
            return [(f"{m}.{c.scope}" if c.scope else m, c.line, f"{c.callee}({', '.join(args)})")]
        return []


def _check_override(ctx: CheckContext, pats: list[str], callers: _Callers,
                    fqn: str) -> list[Finding]:
    base = _base_method(ctx, fqn, pats)
    assert base is not None
    b, o = Sig.of(ctx.linker, base), Sig.of(ctx.linker, fqn)
    issues = compare(b, o, callers.passed(base), Related(ctx),
                     annotations=bool(ctx.param("annotations", True)),
                     returns=bool(ctx.param("returns", True)))
    if not issues:
        return []
    fn = ctx.function(fqn)
    label = _vllm_label(ctx, base)
    steps = [ctx.step(base, ctx.function(base).line, f"base ({label}): {b.text}"),
             ctx.step(fqn, fn.line, f"override: {o.text}")]
    steps += [ctx.step(c, line, f"vLLM calls it: {text}") for c, line, text in
              callers.first_site(base)]
    short = base.rpartition(".")[0].rpartition(".")[2]
    return [ctx.finding(fqn, fn.line, f"{fn.name} {issue} ({short} in {label})", column=fn.col,
                        path=tuple(steps), anchor=f"{fn.name}:{key}") for key, issue in issues]


# -- abstract methods -----------------------------------------------------------
def _check_abstract(ctx: CheckContext, cls: str) -> list[Finding]:
    if ctx.classes.all_subclasses(cls) or not fully_analysed(ctx, cls):
        return []  # an intermediate base, or unknown bases may implement it
    mro = ctx.classes.mro(cls)
    methods = {k: _own_methods(ctx, k) for k in mro if ctx.classes.is_class(k)}
    if any(d.fact.abstract for d in methods.get(cls, ())):
        return []  # declares abstract methods itself: meant to be subclassed
    fact = ctx.classes.class_fact(cls)
    assert fact is not None
    out: list[Finding] = []
    for name in sorted({d.fact.name for ds in methods.values() for d in ds if d.fact.abstract}):
        impl = ctx.classes.find_member(cls, name)
        if impl is None or not ctx.model.defs[impl].fact.abstract:
            continue
        definer = impl.rpartition(".")[0]
        if any(name in getattr(ctx.classes.class_fact(k), "members", ())
               for k in mro[:mro.index(definer)]):
            continue  # ``name = other_function`` in a class body
        label = _vllm_label(ctx, impl)
        step = ctx.step(impl, ctx.function(impl).line, f"abstract in {definer} ({label})")
        out.append(ctx.finding(cls, fact.line, f"{fact.name} does not implement abstract method "
                               f"{name} of {definer.rpartition('.')[2]} ({label}): creating "
                               "it raises TypeError", column=fact.col, path=(step,),
                               anchor=f"abstract:{name}"))
    return out


def _own_methods(ctx: CheckContext, cls: str) -> list:
    d = ctx.model.defs[cls]
    return [ctx.model.defs[f"{d.module}.{f.qualname}"] for f in ctx.model.facts[d.module].functions
            if f.class_qualname == d.fact.qualname]


# -- members the base no longer has ------------------------------------------------
def _check_members(ctx: CheckContext, fqn: str) -> list[Finding]:
    fn, cls = ctx.function(fqn), fqn.rpartition(".")[0]
    if not fn.params or method_kind(fn) == "static" or not fully_analysed(ctx, cls):
        return []
    mro = ctx.classes.mro(cls)
    if any(ctx.classes.find_member(cls, n) for n in ("__getattr__", "__getattribute__")):
        return []
    me, ff = fn.params[0].name, ctx.facts(fqn)
    scoped = [c for c in ff.calls if c.scope == fn.qualname]
    guarded = {a for c in scoped if c.callee in ("hasattr", "getattr", "setattr")
               for a in c.literal_args if a}
    uses = [(c.callee or "", c.line, c.col) for c in scoped]
    uses += [(f"{r.base}.{r.attr}", r.line, r.col) for r in ff.reads if r.scope == fn.qualname]
    out: list[Finding] = []
    for chain, line, col in sorted(set(uses), key=lambda u: (u[1], u[2])):
        sup = chain.startswith("super().")
        if not sup and not chain.startswith(f"{me}."):
            continue
        name = chain.split(".")[1].split("(")[0].split("[")[0]
        if name in guarded or name.startswith("__") or _known(ctx, mro[1:] if sup else mro, name):
            continue
        if not sup and any(_known(ctx, (s,), name) for s in ctx.classes.all_subclasses(cls)):
            continue  # a template method: subclasses provide it
        what = f"super().{name}" if sup else f"{me}.{name}"
        out.append(ctx.finding(fqn, line, f"{what}: no class in the MRO of "
                               f"{cls.rpartition('.')[2]} defines '{name}' "
                               f"(with {_vllm_label(ctx)})", column=col, anchor=f"member:{what}"))
    return out


def _known(ctx: CheckContext, chain, name: str) -> bool:
    for k in chain:
        fact = ctx.classes.class_fact(k)
        if f"{k}.{name}" in ctx.model.defs or name in ctx.values.self_attrs.get(k, {}):
            return True
        if fact is not None and (name in fact.members or name in dict(fact.attributes)):
            return True
    return False


def _vllm_label(ctx: CheckContext, fqn: str | None = None) -> str:
    """``vllm 0.33.0`` (the detected version), else the root label of ``fqn``."""
    fqn = fqn or ctx.protocol.base_class
    package, version = ctx.protocol.package, ctx.analysis.vllm_version
    if version and fqn.startswith(package + "."):
        return f"{package} {version}"
    return (ctx.where(fqn)[1] if fqn in ctx.model.defs else "") or "the analysed vLLM"


# -- two releases -------------------------------------------------------------------
@lru_cache(maxsize=4)
def _other_release(ref: str):
    """Analysis of another vLLM release (spec or import root), once per process."""
    from kvflowmap.api import Request, analyse
    from kvflowmap.index.cache import default_cache_dir
    from kvflowmap.sources.fetch import fetch_release

    if "==" in ref:
        root, label = fetch_release(ref, default_cache_dir()), ref.replace("==", " ")
    else:
        root, label = Path(ref).expanduser().resolve(), f"vllm at {ref}"
    return analyse(Request(sources=[], release_roots=[(root, label)])), label


def _two_release(ctx: CheckContext, pats: list[str], ref: str) -> list[Finding]:
    other, old_label = _other_release(ref)
    labels = (old_label, _vllm_label(ctx))
    out: list[Finding] = []
    for base in sorted(f for f, d in ctx.model.defs.items() if not d.is_class
                       and d.fact.class_qualname and _is_contract(f.rpartition(".")[0], pats)):
        if base not in other.linker.model.defs or _ignored(ctx, base.rpartition(".")[2]):
            continue
        new, old = Sig.of(ctx.linker, base), Sig.of(other.linker, base)
        if new.shape == old.shape:
            continue
        fn = ctx.function(base)
        if ctx.param("report_changes", True):
            out.append(ctx.finding(base, fn.line, f"{fn.name} changed between {labels[0]} and "
                                   f"{labels[1]}: {old.text} -> {new.text}", column=fn.col,
                                   anchor=f"changed:{base}"))
        out += _old_form(ctx, base, new, old, labels)
    return out


def _old_form(ctx: CheckContext, base: str, new: Sig, old: Sig,
              labels: tuple[str, str]) -> list[Finding]:
    """Overrides that fit the old base signature but not the new one."""
    out: list[Finding] = []
    targets, related = set(ctx.target_classes), Related(ctx)
    for over in ctx.classes.overrides(base):
        if over.rpartition(".")[0] not in targets:
            continue
        o = Sig.of(ctx.linker, over)
        now = compare(new, o, None, related)
        if now and not compare(old, o, None, related):
            fn, line = ctx.function(over), ctx.function(base).line
            steps = (ctx.step(base, line, f"{labels[0]}: {old.text}"),
                     ctx.step(base, line, f"{labels[1]}: {new.text}"),
                     ctx.step(over, fn.line, f"override: {o.text}"))
            out.append(ctx.finding(over, fn.line, f"{fn.name} still has the {labels[0]} form "
                                   f"({now[0][1]}); {labels[1]} calls {new.text}",
                                   column=fn.col, path=steps, anchor=f"old-form:{fn.name}"))
    return out
