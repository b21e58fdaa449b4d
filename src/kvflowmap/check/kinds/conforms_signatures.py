"""The ``conforms`` signature model: a method's parameters, kind and
annotations, the annotation names resolved to FQN alternatives so that two
releases (or a base and its override) can be compared."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from kvflowmap.check.kinds.conforms_contract import method_kind
from kvflowmap.facts import FunctionFact, Param
from kvflowmap.model.annotations import dotted_name

# Annotations that accept anything: no constraint to compare.
_ANY = {"typing.Any", "typing_extensions.Any", "object"}
_TYPING_BUILTIN = {"Set": "set", "FrozenSet": "frozenset", "List": "list", "Dict": "dict",
                   "Tuple": "tuple", "Type": "type"}


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
    return annotation_heads(text, lambda name: _resolve(linker, module, name))


def annotation_heads(text: str | None,
                     resolve: Callable[[str], str | None]) -> frozenset[str] | None:
    """The top-level alternatives of annotation ``text`` as FQNs (``resolve``
    maps a dotted name to one, normalised with ``normalise_fqn``); ``None``
    when unknown or unconstrained. Shared with ``kvflowmap compat``, which
    resolves names from a file's imports instead of a linked analysis."""
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
        fq = "None" if name == "None" else resolve(name)
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
        head = dotted_name(node.value)
        last = (head or "").split(".")[-1]
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if last in ("Optional", "Union", "Annotated"):
            items = items[:1] if last == "Annotated" else items
            out.extend(["None"] if last == "Optional" else [])
            return all(_alternatives(i, out, depth + 1) for i in items)
        node = node.value
    name = dotted_name(node)
    if name:
        out.append(name)
    return bool(name)


def _resolve(linker, module: str, name: str) -> str | None:
    """FQN of an annotation name; builtins bare (``set``); None when unknown."""
    head, _, rest = name.partition(".")
    for kind, fqn in linker.values.name((module, ""), head, 0):
        if kind not in ("class", "ext", "module"):
            continue
        return normalise_fqn(linker.model.canonical(f"{fqn}.{rest}" if rest else fqn))
    return None


def normalise_fqn(full: str) -> str | None:
    """An annotation's FQN as compared: builtins bare (``set``), ``typing``
    aliases as their builtin, ``None`` for what accepts anything (``Any``,
    ``object``, the ``collections.abc`` protocols, other ``typing`` names)."""
    full = full.removeprefix("<builtin>.").removeprefix("builtins.")
    mod, _, last = full.rpartition(".")
    if full in _ANY or mod == "collections.abc":
        return None
    if mod in ("typing", "typing_extensions"):
        return _TYPING_BUILTIN.get(last)
    return full
