"""Extract the protocol surface of one vLLM release from the few modules
that hold it: the base module of the protocol's base class (and the sibling
modules of its package it imports, such as the metrics bases), the modules of
the protocol's entry points (vLLM's call sites of the hooks), the carrier and
state modules, ``vllm.envs`` and the config classes named in the base's
signatures. Never the whole release."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from kvflowmap.check.kinds.conforms_contract import method_kind
from kvflowmap.check.kinds.conforms_signatures import annotation_heads
from kvflowmap.compat.model import CallSite, ClassSurface, Field, Method, Surface, Where
from kvflowmap.compat.names import Names, module_file
from kvflowmap.facts import FileFacts, FunctionFact
from kvflowmap.protocol import Protocol

Parse = Callable[[Path, str], FileFacts]

# The receivers through which vLLM calls a KV connector (``self.connector``,
# ``kv_connector``, ``get_kv_transfer_group()``); an EC connector or a block
# pool with a method of the same name is another protocol.
_RECEIVER = re.compile(r"(^|\.)(kv_)?connector$|kv_connector|kv_transfer_group\(\)$")


class _Release:
    """One release's import root, with its parsed modules memoised."""

    def __init__(self, root: Path, parse: Parse) -> None:
        self.root, self.parse = root, parse
        self.facts: dict[str, FileFacts] = {}
        self.files: dict[str, str] = {}

    def module(self, module: str) -> FileFacts | None:
        """The facts of ``module``, parsed on first use; None when the release lacks it."""
        if module not in self.facts:
            path = module_file(self.root, module)
            if path is None:
                return None
            self.files[module] = path.relative_to(self.root).as_posix()
            self.facts[module] = self.parse(path, self.files[module])
        return self.facts[module]

    def names(self, module: str) -> Names:
        facts = self.module(module)
        assert facts is not None
        return Names(module, facts, self.files[module].endswith("__init__.py"))

    def locate(self, fqn: str, max_tail: int = 2) -> str | None:
        """The module holding ``fqn`` (a module, class, function or field)."""
        parts = fqn.split(".")
        for cut in range(len(parts), max(len(parts) - max_tail - 1, 1), -1):
            if module_file(self.root, ".".join(parts[:cut])) is not None:
                return ".".join(parts[:cut])
        return None


def extract_surface(root: Path, version: str, protocol: Protocol, parse: Parse) -> Surface:
    """The protocol surface of the release whose import root is ``root``."""
    rel = _Release(root, parse)
    surface = Surface(version=version)
    base_module = protocol.base_class.rpartition(".")[0]
    for module in _base_modules(rel, base_module):
        _classes(rel, module, surface)
    hooks = {m for c in surface.classes.values() for m in c.methods if not m.startswith("__")}
    for module in _call_modules(rel, protocol, base_module):
        surface.calls += _calls(rel, module, hooks, self_calls=module == base_module)
    for fqn in sorted({c.owner for c in protocol.carriers} | set(protocol.carrier_classes)):
        _fields(rel, fqn, surface.carriers)
    for fqn in protocol.state_enums:
        _fields(rel, fqn, surface.states, members=True)
    for fqn in _config_classes(surface):
        _fields(rel, fqn, surface.configs)
    surface.envs = _envs(rel, f"{protocol.package}.envs")
    surface.calls.sort(key=lambda c: (c.method, c.where.file, c.where.line))
    surface.modules = sorted(rel.files.values())
    return surface


def _base_modules(rel: _Release, base_module: str) -> list[str]:
    """The base module and the sibling modules of its package that it imports."""
    facts = rel.module(base_module)
    if facts is None:
        return []
    package = base_module.rpartition(".")[0]
    names = rel.names(base_module)
    siblings = {names.fqn(i.asname or i.name or i.module).rpartition(".")[0]
                for i in facts.imports if i.name and not i.scope}
    return [base_module] + sorted(m for m in siblings if m.rpartition(".")[0] == package
                                  and m != base_module and rel.module(m) is not None)


def _classes(rel: _Release, module: str, surface: Surface) -> None:
    facts, names = rel.module(module), rel.names(module)
    assert facts is not None
    file = rel.files[module]
    for c in facts.classes:
        if "." in c.qualname:
            continue
        methods = {f.name: _method(f, names, file) for f in facts.functions
                   if f.class_qualname == c.qualname}
        assigned = {a.target.split(".")[1] for a in facts.assigns
                    if a.scope.startswith(f"{c.qualname}.") and a.target.startswith("self.")}
        fqn = f"{module}.{c.qualname}"
        if methods or not c.attributes:
            surface.classes[fqn] = ClassSurface(
                fqn, Where(file, c.line), tuple(names.fqn(b) for b in c.bases), methods,
                tuple(sorted({*c.members, *dict(c.attributes), *assigned})))
        if c.attributes and not any(not m.startswith("__") for m in methods):
            surface.carriers[fqn] = {n: Field(n, Where(file, c.line), a) for n, a in c.attributes}


def _method(fn: FunctionFact, names: Names, file: str) -> Method:
    kind = method_kind(fn)
    params = fn.params if kind == "static" else fn.params[1:]
    heads = tuple(_sorted(annotation_heads(p.annotation, names.annotation)) for p in params)
    return Method(fn.name, Where(file, fn.line), _signature(fn), params, heads, fn.returns,
                  kind, fn.is_async, fn.abstract, _default(fn))


def _sorted(heads: frozenset[str] | None) -> tuple[str, ...] | None:
    return None if heads is None else tuple(sorted(heads))


def _signature(fn: FunctionFact) -> str:
    """``def name(a: T, *, b=...) -> R`` as written (defaults elided)."""
    parts: list[str] = []
    star = False
    for p in fn.params:
        if p.kind == "kwonly" and not star:
            parts.append("*")
            star = True
        prefix = {"vararg": "*", "kwarg": "**"}.get(p.kind, "")
        star = star or p.kind == "vararg"
        ann = f": {p.annotation}" if p.annotation else ""
        parts.append(f"{prefix}{p.name}{ann}{' = …' if p.default is not None else ''}")
    ret = f" -> {fn.returns}" if fn.returns else ""
    return f"{'async ' if fn.is_async else ''}def {fn.name}({', '.join(parts)}){ret}"


def _default(fn: FunctionFact) -> str:
    """What the base method does when not overridden, in a few words."""
    body = list(fn.body[1:] if fn.doc and fn.body else fn.body)
    if fn.abstract:
        return "abstract"
    if not body:
        return "no-op"
    if len(body) == 1 and body[0].kind == "raise":
        return f"raises {(body[0].text or 'an exception').split('(')[0]}"
    if len(body) == 1 and body[0].kind == "return":
        return f"returns {body[0].text or 'None'}"
    if len(body) == 1 and body[0].kind == "simple" and not body[0].events:
        return "no-op"
    return f"runs {len(body)} statement{'s' if len(body) > 1 else ''}"


def _call_modules(rel: _Release, protocol: Protocol, base_module: str) -> list[str]:
    """Modules of the protocol's entry points (vLLM's callers of the hooks)."""
    names = [protocol.create, *(n for ns in protocol.entry_points.values() for n in ns)]
    names += [n for c in protocol.carriers for n in c.targets]
    found = {rel.locate(n) for n in names}
    return [base_module] + sorted(m for m in found if m and m != base_module)


def _calls(rel: _Release, module: str, hooks: set[str], *, self_calls: bool) -> list[CallSite]:
    facts = rel.module(module)
    assert facts is not None
    out: list[CallSite] = []
    for c in facts.calls:
        if not c.callee or "." not in c.callee:
            continue
        receiver, _, name = c.callee.rpartition(".")
        if name not in hooks or not (_RECEIVER.search(receiver) or
                                     (self_calls and receiver == "self")):
            continue
        caller = f"{module}.{c.scope}" if c.scope else module
        out.append(CallSite(name, Where(rel.files[module], c.line), caller, len(c.args),
                            tuple(k for k, _ in c.kwargs)))
    return out


def _fields(rel: _Release, fqn: str, table: dict[str, dict[str, Field]],
            members: bool = False) -> None:
    """The annotated fields (or enum members) of class ``fqn``, if the release has it."""
    module = rel.locate(fqn, max_tail=1)
    facts = rel.module(module) if module else None
    if facts is None or module is None:
        return
    qual = fqn[len(module) + 1:]
    for c in facts.classes:
        if c.qualname == qual:
            where = Where(rel.files[module], c.line)
            names = c.members if members else tuple(n for n, _ in c.attributes)
            anns = dict(c.attributes)
            table[fqn] = {n: Field(n, _line_of(facts, qual, n, where), anns.get(n))
                          for n in names}
            return


def _line_of(facts: FileFacts, qual: str, name: str, default: Where) -> Where:
    """The line assigning ``name`` in class ``qual``'s body, else the class line."""
    for a in facts.assigns:
        if a.scope == qual and a.target == name:
            return Where(default.file, a.line)
    return default


def _config_classes(surface: Surface) -> list[str]:
    """Config classes named in the base classes' signatures (``VllmConfig``,
    ``KVTransferConfig``): the fields a connector reads from them."""
    out = {h for c in surface.classes.values() for m in c.methods.values()
           for hs in m.heads if hs for h in hs if h.rpartition(".")[2].endswith("Config")}
    return sorted(out)


def _envs(rel: _Release, module: str) -> dict[str, Field]:
    """Names ``vllm.envs`` defines: its module-level assignments (the
    ``TYPE_CHECKING`` declarations) and the keys of its variables table."""
    facts = rel.module(module)
    if facts is None:
        return {}
    file = rel.files[module]
    out: dict[str, Field] = {}
    for a in facts.assigns:
        if not a.scope and a.target.isupper() and a.target.isidentifier():
            out.setdefault(a.target, Field(a.target, Where(file, a.line), a.annotation))
    return dict(sorted(out.items()))
