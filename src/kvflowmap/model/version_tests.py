"""Tests of vLLM's version and of what a release has, evaluated for one
release without running them (``if vllm.__version__ >= "0.10"``, ``if
vllm_version_is("0.9.1")``, ``if isinstance(param, T)``, ``if hasattr(obj,
"name")``). Used by ``compat.branches`` (the guards inside a method) and by
``check.gated_modules`` (the gates around an import): below both layers.

``and``/``or``/``not`` combine tests; a test that cannot be decided answers
None (never a false pass by guessing)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from kvflowmap.protocol import version_key


# Where vLLM keeps its version: what a test of the release reads.
VLLM_VERSION_NAMES = frozenset({"vllm.__version__", "vllm.version.__version__",
                                "vllm.__version_tuple__", "vllm.version.__version_tuple__"})


@dataclass(frozen=True)
class Oracle:
    """What a release answers to a guard's tests (None: cannot tell)."""

    version: str
    isinstance_of: Callable[[str, tuple[str, ...]], bool | None]  # (param, types)
    hasattr_of: Callable[[str, str], bool | None]  # (object text, member)
    is_vllm_version: Callable[[str], bool]  # a dotted name that holds vLLM's version
    is_none: Callable[[str], bool | None] = lambda param: None  # ``param is None``


def evaluate(text: str, oracle: Oracle) -> tuple[bool | None, str | None]:
    """Whether test ``text`` holds on the release, and the kind of guard it is
    (``isinstance``, ``hasattr``, ``version``); (None, None) when it is none."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None, None
    kinds: list[str] = []
    value = _eval(node, oracle, kinds)
    return (value, kinds[0]) if kinds else (None, None)


def _eval(node: ast.expr, oracle: Oracle, kinds: list[str]) -> bool | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _eval(node.operand, oracle, kinds)
        return None if inner is None else not inner
    if isinstance(node, ast.BoolOp):
        values = [_eval(v, oracle, kinds) for v in node.values]
        if isinstance(node.op, ast.And):
            return False if False in values else (True if all(values) else None)
        return True if True in values else (False if all(v is False for v in values) else None)
    if isinstance(node, ast.Call) and _is_version_predicate(node):
        return _version_is(node, oracle, kinds)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return _call(node, oracle, kinds)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and \
            isinstance(node.ops[0], (ast.Is, ast.IsNot)) and isinstance(node.left, ast.Name) \
            and isinstance(node.comparators[0], ast.Constant) and node.comparators[0].value is None:
        kinds.append("is-none")
        none = oracle.is_none(node.left.id)
        return none if none is None or isinstance(node.ops[0], ast.Is) else not none
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        return _version(node.left, node.ops[0], node.comparators[0], oracle, kinds)
    return None


def _call(node: ast.Call, oracle: Oracle, kinds: list[str]) -> bool | None:
    name = node.func.id  # type: ignore[attr-defined]
    args = node.args
    if name == "isinstance" and len(args) == 2 and isinstance(args[0], ast.Name):
        types = args[1].elts if isinstance(args[1], ast.Tuple) else [args[1]]
        names = tuple(ast.unparse(t) for t in types)
        kinds.append("isinstance")
        return oracle.isinstance_of(args[0].id, names)
    if name in ("hasattr", "getattr") and len(args) >= 2 and \
            isinstance(args[1], ast.Constant) and isinstance(args[1].value, str):
        kinds.append("hasattr")
        has = oracle.hasattr_of(ast.unparse(args[0]), args[1].value)
        return has if name == "hasattr" else (False if has is False else None)
    return None


_PREDICATE_WORDS = {"vllm", "version", "is", "eq", "equals", "matches"}


def _is_version_predicate(node: ast.Call) -> bool:
    """``vllm_version_is("0.9.1")`` (vllm-ascend's helper, bare or as
    ``utils.vllm_version_is``): a test that vLLM is that release."""
    func = node.func
    name = func.id if isinstance(func, ast.Name) else \
        func.attr if isinstance(func, ast.Attribute) else ""
    words = {w for w in name.lower().split("_") if w}
    return {"vllm", "version"} <= words and words <= _PREDICATE_WORDS and len(node.args) == 1 \
        and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)


def _version_is(node: ast.Call, oracle: Oracle, kinds: list[str]) -> bool | None:
    literal = node.args[0].value  # type: ignore[attr-defined]
    here, there = version_key(oracle.version), version_key(literal)
    if not here or not there:
        return None
    kinds.append("version")
    return _padded(here) == _padded(there)


_OPS: dict[type, Callable[[object, object], bool]] = {
    ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b,  # type: ignore[operator]
    ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,  # type: ignore[operator]
    ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b}


def _version(left: ast.expr, op: ast.cmpop, right: ast.expr, oracle: Oracle,
             kinds: list[str]) -> bool | None:
    """A comparison of vLLM's version with a literal, evaluated for the release."""
    if type(op) not in _OPS:
        return None
    for mine, other, flip in ((left, right, False), (right, left, True)):
        wrapped, dotted = _unwrap(mine)
        if dotted is None or not oracle.is_vllm_version(dotted):
            continue
        literal = _literal(other)
        if literal is None or not version_key(oracle.version):
            return None  # not a literal, or a release without a version (an import root)
        kinds.append("version")
        here: object
        there: object
        if isinstance(literal, str) and not wrapped and not isinstance(other, ast.Call):
            here, there = oracle.version, literal  # str against str: as Python compares them
        else:
            here = _padded(version_key(oracle.version))
            there = _padded(version_key(literal) if isinstance(literal, str) else literal)
        a, b = (there, here) if flip else (here, there)
        return _OPS[type(op)](a, b)
    return None


def _unwrap(node: ast.expr) -> tuple[bool, str | None]:
    """(wrapped in a call, the dotted name) of ``Version(vllm.__version__)`` or
    ``vllm.__version__``; (False, None) for anything else."""
    wrapped = False
    while isinstance(node, ast.Call) and len(node.args) == 1:
        node, wrapped = node.args[0], True
    try:
        text = ast.unparse(node)
    except (ValueError, RecursionError):
        return False, None
    ok = isinstance(node, (ast.Name, ast.Attribute)) and "version" in text.lower()
    return wrapped, text if ok else None


def _literal(node: ast.expr) -> str | tuple[int, ...] | None:
    while isinstance(node, ast.Call) and len(node.args) == 1:
        node = node.args[0]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Tuple) and all(isinstance(e, ast.Constant) and
                                           isinstance(e.value, int) for e in node.elts):
        return tuple(e.value for e in node.elts)  # type: ignore[attr-defined]
    return None


def _padded(key: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(key) + (0,) * (4 - len(key))
