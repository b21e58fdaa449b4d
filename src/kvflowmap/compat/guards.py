"""Version guards in a connector method: code written to support two forms
of a vLLM hook at once. Found in the statement tree of the method's facts:

- ``if isinstance(param, T)`` / ``if hasattr(obj, "name")``: a type or member test;
- ``try: ... except TypeError``: the call shape is tried, the old one the fallback;
- an ``if`` comparing a version (``vllm.__version__``, ``Version(...)``,
  a ``*version*`` name): the release picks the branch.

A guarded parameter is accepted with either of the annotations vLLM gives it
(an annotation is not checked at run time). Which branch of a guard runs on
a release, and checking only that one, is ``compat.branches``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvflowmap.facts import FileFacts, FunctionFact, Stmt

_HASATTR = re.compile(r"\bhasattr\(\s*([^,]+?)\s*,\s*[\"']([\w]+)[\"']")
_VERSION = re.compile(r"__version__|\bVersion\(|version\w*\s*(<|>|==|!=|<=|>=)|"
                      r"(<|>|==|!=|<=|>=)\s*\w*version", re.IGNORECASE)


@dataclass(frozen=True)
class Guards:
    """What one method tests before using a hook's arguments or vLLM members."""

    isinstance_params: dict[str, str]  # parameter -> the test text
    isinstance_types: dict[str, tuple[str, ...]]  # parameter -> the types it is tested against
    hasattr_names: frozenset[str]  # member names tested with hasattr / getattr
    type_error: str | None  # ``try/except TypeError`` text, if any
    version: str | None  # the version comparison, if any

    def param_guard(self, name: str) -> str | None:
        """Why parameter ``name`` may take either form, or None."""
        return self.isinstance_params.get(name) or self.version or self.type_error

    @property
    def any(self) -> bool:
        return bool(self.isinstance_params or self.type_error or self.version)


def find_guards(fn: FunctionFact, facts: FileFacts) -> Guards:
    """The guards in method ``fn`` (of file ``facts``)."""
    inst: dict[str, str] = {}
    types: dict[str, tuple[str, ...]] = {}
    names: set[str] = set()
    type_error: list[str] = []
    version: list[str] = []
    for s in _walk(fn.body):
        text = s.text or ""
        if s.kind in ("if", "while", "assert", "simple", "return") and text:
            names.update(m.group(2) for m in _HASATTR.finditer(text))
            if s.kind == "if" and _VERSION.search(text):
                version.append(f"version test at line {s.line} ({text})")
        if s.kind == "try" and any("TypeError" in (h.text or "") for h in s.handlers):
            type_error.append(f"try/except TypeError at line {s.line}")
    for c in facts.calls:  # isinstance/hasattr/getattr calls anywhere in the body
        if c.scope != fn.qualname:
            continue
        if c.callee == "isinstance" and len(c.args) > 1 and c.args[0]:
            inst.setdefault(c.args[0], f"isinstance({c.args[0]}, {c.args[1] or '…'}) at line "
                            f"{c.line}")
            types.setdefault(c.args[0], tuple(x for x in (c.args[1],) if x))
        if c.callee in ("hasattr", "getattr") and len(c.literal_args) > 1 and c.literal_args[1]:
            names.add(c.literal_args[1])
    return Guards(inst, types, frozenset(names), type_error[0] if type_error else None,
                  version[0] if version else None)


def _walk(stmts: tuple[Stmt, ...]):
    for s in stmts:
        yield s
        for part in (s.body, s.orelse, s.handlers, s.final):
            yield from _walk(part)


def collection_uses(fn: FunctionFact, facts: FileFacts, param: str) -> list[int]:
    """Every line where ``fn`` uses ``param`` as a collection (see ``iterates``)."""
    lines = [b.line for b in facts.binds if b.scope == fn.qualname and b.value == f"{param}[]"]
    lines += [c.line for c in facts.calls if c.scope == fn.qualname and c.callee in _MAKERS
              and c.args[:1] == (param,)]
    lines += [c.line for c in facts.compares if c.scope == fn.qualname
              and c.operands[-1:] == (param,) and set(c.ops) & {"In", "NotIn"}]
    return sorted(set(lines))


_MAKERS = {"set", "list", "sorted", "tuple", "len", "iter", "frozenset"}
