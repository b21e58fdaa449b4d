"""The ``conforms`` comparison: the ways an override's signature breaks the
callers of its base method (kind, async, positional and keyword parameters,
annotations when both sides have them)."""

from __future__ import annotations

from collections.abc import Callable

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.conforms_contract import fully_analysed
from kvflowmap.check.kinds.conforms_signatures import Sig

_NUMBERS = {"bool", "int", "float", "complex"}


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


def _compatible(a: frozenset[str] | None, b: frozenset[str] | None, related: RelatedFn) -> bool:
    return a is None or b is None or any(related(x, y) for x in a for y in b)


Issues = list[tuple[str, str]]
# What ``compare`` asks of two resolved annotation names: ``Related`` here,
# ``kvflowmap.compat.related.Related`` across a connector and a release surface.
RelatedFn = Callable[[str, str], bool]


def compare(base: Sig, over: Sig, passed: dict[str, int] | None, related: RelatedFn, *,
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
                related: RelatedFn | None) -> Issues:
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


def _keywords(base: Sig, over: Sig, related: RelatedFn | None) -> Issues:
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
