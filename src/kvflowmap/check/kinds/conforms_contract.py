"""Which methods the ``conforms`` checks look at: the contract classes, the
target classes' methods that override them, and facts about a method or class
that every check needs (method kind, whether the whole MRO is analysed)."""

from __future__ import annotations

import fnmatch

from kvflowmap.check.context import CheckContext
from kvflowmap.facts import FunctionFact

TRIVIAL_BASES = {"object", "ABC", "abc.ABC", "Generic", "typing.Generic", "typing.Protocol",
                 "typing_extensions.Protocol"}


def contract_patterns(ctx: CheckContext, bases: tuple[str, ...]) -> list[str]:
    """FQN globs of the contract classes: ``bases``, else the rule's (or the
    protocol's) base class and the other classes of its module."""
    pats = list(bases)
    if not pats:
        pats = list(ctx.rule.applies_to.base_class) or [ctx.protocol.base_class]
        pats += [f"{b.rpartition('.')[0]}.*" for b in list(pats)]
    return pats


def is_contract(cls: str, pats: list[str]) -> bool:
    """True when class ``cls`` matches one of the contract globs."""
    return any(fnmatch.fnmatchcase(cls, p) for p in pats)


def base_method(ctx: CheckContext, fqn: str, pats: list[str]) -> str | None:
    """Method ``fqn`` as defined in the first contract class after its own."""
    cls, _, name = fqn.rpartition(".")
    for k in ctx.classes.mro(cls)[1:]:
        if is_contract(k, pats) and f"{k}.{name}" in ctx.model.defs:
            return f"{k}.{name}"
    return None


def target_methods(ctx: CheckContext) -> list[str]:
    """Target functions that are methods of the target classes."""
    classes = set(ctx.target_classes)
    return [f for f in ctx.target_functions if f.rpartition(".")[0] in classes]


def ignored(ignore: tuple[str, ...], name: str) -> bool:
    """True when method ``name`` matches an ``ignore_methods`` glob."""
    return any(fnmatch.fnmatchcase(name, p) for p in ignore)


def overrides(ctx: CheckContext, pats: list[str], ignore: tuple[str, ...]) -> list[str]:
    """Target methods (not ignored) that override a contract class's method."""
    return [f for f in target_methods(ctx) if not ignored(ignore, f.rpartition(".")[2])
            and base_method(ctx, f, pats)]


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


def vllm_label(ctx: CheckContext, fqn: str | None = None) -> str:
    """``vllm 0.33.0`` (the detected version), else the root label of ``fqn``."""
    fqn = fqn or ctx.protocol.base_class
    package, version = ctx.protocol.package, ctx.analysis.vllm_version
    if version and fqn.startswith(package + "."):
        return f"{package} {version}"
    return (ctx.where(fqn)[1] if fqn in ctx.model.defs else "") or "the analysed vLLM"
