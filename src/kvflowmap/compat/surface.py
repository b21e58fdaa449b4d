"""Extract the protocol surface of one vLLM release from the few modules
that hold it: the base module of the protocol's base class (and the sibling
modules of its package it imports, such as the metrics bases), the modules of
the protocol's entry points (vLLM's call sites of the hooks), the carrier and
state modules, ``vllm.envs`` and the config classes named in the base's
signatures. Never the whole release."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path

from kvflowmap.check.kinds.conforms_contract import method_kind
from kvflowmap.check.kinds.conforms_signatures import annotation_heads
from kvflowmap.compat.model import CallSite, ClassSurface, Field, Method, Surface, Where
from kvflowmap.compat.names import Names, module_file, module_of
from kvflowmap.facts import FileFacts, FunctionFact
from kvflowmap.protocol import Protocol

Parse = Callable[[Path, str], FileFacts]

# The receivers through which vLLM calls a KV connector (``self.connector``,
# ``kv_connector``, ``get_kv_transfer_group()``); an EC connector or a block
# pool with a method of the same name is another protocol.
_RECEIVER = re.compile(r"(^|\.)(kv_)?connector$|(^|\.)kv_transfer_group$|"
                       r"get_kv_transfer_group\(\)$|(^|\.)connector_cls$|"
                       r"(^|\.)_KV_CONNECTOR_AGENT$")


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
    siblings = _base_modules(rel, base_module)
    for module in siblings:
        _classes(rel, module, surface)
    hooks = {m for c in surface.classes.values() for m in c.methods if not m.startswith("__")}
    for module in sorted(set(_call_modules(rel, protocol, base_module)) | set(siblings)):
        surface.calls += _calls(rel, module, hooks, self_calls=module == base_module)
    for fqn in sorted({c.owner for c in protocol.carriers} | set(protocol.carrier_classes)):
        _fields(rel, fqn, surface.carriers)
    for fqn in protocol.state_enums:
        _fields(rel, fqn, surface.states, members=True)
    for fqn in _config_classes(rel, base_module, surface):
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
    docs = _docstrings(rel.root / file)
    for c in facts.classes:
        if "." in c.qualname:
            continue
        methods = {f.name: _method(f, names, file, docs.get(f.qualname, "")) for f in
                   facts.functions if f.class_qualname == c.qualname}
        assigned = {a.target.split(".")[1] for a in facts.assigns
                    if a.scope.startswith(f"{c.qualname}.") and a.target.startswith("self.")}
        fqn = f"{module}.{c.qualname}"
        if methods or not c.attributes:
            surface.classes[fqn] = ClassSurface(
                fqn, Where(file, c.line), tuple(names.base(b) for b in c.bases), methods,
                tuple(sorted({*c.members, *dict(c.attributes), *assigned})))
        if c.attributes and not any(not m.startswith("__") for m in methods):
            surface.carriers[fqn] = {n: Field(n, Where(file, c.line), a) for n, a in c.attributes}


def _method(fn: FunctionFact, names: Names, file: str, doc: str = "") -> Method:
    kind = method_kind(fn)
    params = fn.params if kind == "static" else fn.params[1:]
    heads = tuple(_sorted(annotation_heads(p.annotation, names.annotation)) for p in params)
    return Method(fn.name, Where(file, fn.line), _signature(fn), params, heads, fn.returns,
                  kind, fn.is_async, fn.abstract, _default(fn),
                  _sorted(annotation_heads(fn.returns, names.annotation)), doc)


def _docstrings(path: Path) -> dict[str, str]:
    """``Class.method`` -> its docstring, whitespace collapsed (the facts keep
    only the first line; the contract is in the rest). Read with ``ast``, not run."""
    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError, RecursionError):
        return {}
    out: dict[str, str] = {}
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef):
            for fn in cls.body:
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out[f"{cls.name}.{fn.name}"] = " ".join((ast.get_docstring(fn) or "").split())
    return out


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
    """vLLM's callers of the hooks: the modules of the protocol's entry points,
    and the modules whose text calls a hook through a connector receiver
    (a byte scan; only those are parsed). The connectors' own package is
    left out: one connector calling another is not vLLM calling it."""
    names = [protocol.create, *(n for ns in protocol.entry_points.values() for n in ns)]
    names += [n for c in protocol.carriers for n in c.targets]
    found = {rel.locate(n) for n in names} | set(_scan(rel, protocol.package, base_module))
    return [base_module] + sorted(m for m in found if m and m != base_module)


# The text of a call through a connector receiver (``_scan``'s pre-filter), in
# a module that names the connector base or its accessor (``connector.x(`` alone
# is also the EC and offloading connectors).
_CALL_TEXT = re.compile(rb"(get_kv_transfer_group\(\)|\bkv_transfer_group|\bkv_connector|"
                        rb"\bconnector|\bconnector_cls|_KV_CONNECTOR_AGENT)\.\w+")
_NAMES_TEXT = re.compile(rb"KVConnectorBase(_V1)?\b|get_kv_transfer_group\b|"
                         rb"KVConnectorFactory\b|\.get_kv_connector\(\)")


def _scan(rel: _Release, package: str, base_module: str) -> list[str]:
    """Modules of ``package`` (outside the base module's package) whose text
    has a call through a connector receiver."""
    top = rel.root / package
    skip = rel.root.joinpath(*base_module.split(".")[:-1])
    out: list[str] = []
    for path in sorted(top.rglob("*.py")):
        if skip in path.parents:
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if _NAMES_TEXT.search(data) and _CALL_TEXT.search(data):
            out.append(module_of(rel.root, path))
    return out


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
    for r in facts.reads:  # property hooks: ``if not connector.prefer_cross_layer_blocks``
        if r.attr in hooks and _RECEIVER.search(r.base):
            caller = f"{module}.{r.scope}" if r.scope else module
            out.append(CallSite(r.attr, Where(rel.files[module], r.line), caller, 0, (), True))
    return out


def _fields(rel: _Release, fqn: str, table: dict[str, dict[str, Field]],
            members: bool = False, hops: int = 2) -> str | None:
    """The annotated fields (or enum members) of class ``fqn``, if the release
    has it, following re-exports (``vllm.config.VllmConfig``); the FQN found."""
    module = rel.locate(fqn, max_tail=1)
    facts = rel.module(module) if module else None
    if facts is None or module is None:
        return None
    qual = fqn[len(module) + 1:]
    for c in facts.classes:
        if c.qualname == qual:
            where = Where(rel.files[module], c.line)
            names = c.members if members else tuple(n for n, _ in c.attributes)
            anns = dict(c.attributes)
            table[fqn] = {n: Field(n, _line_of(facts, qual, n, where), anns.get(n))
                          for n in names}
            return fqn
    target = rel.names(module).fqn(qual)
    if hops and target != qual and target != fqn:
        return _fields(rel, target, table, members, hops - 1)
    return None


def _line_of(facts: FileFacts, qual: str, name: str, default: Where) -> Where:
    """The line assigning ``name`` in class ``qual``'s body, else the class line."""
    for a in facts.assigns:
        if a.scope == qual and a.target == name:
            return Where(default.file, a.line)
    return default


def _config_classes(rel: _Release, base_module: str, surface: Surface) -> list[str]:
    """Config classes whose fields connectors read: the ``*Config`` classes the
    base module imports or its signatures name (``VllmConfig``,
    ``KVCacheConfig``), and the ``KV*Config`` classes their fields hold
    (``VllmConfig.kv_transfer_config: KVTransferConfig``)."""
    found = {h for c in surface.classes.values() for m in c.methods.values()
             for hs in m.heads if hs for h in hs if h.rpartition(".")[2].endswith("Config")}
    names = rel.names(base_module)
    facts = rel.module(base_module)
    assert facts is not None
    found |= {names.fqn(i.asname or i.name) for i in facts.imports
              if i.name and (i.asname or i.name).endswith("Config")}
    out = set(found)
    for fqn in sorted(found):
        scratch: dict[str, dict[str, Field]] = {}
        real = _fields(rel, fqn, scratch)
        if real is None:
            continue
        holder = rel.names(rel.locate(real, max_tail=1) or "")
        for f in scratch[real].values():
            for name in re.findall(r"[A-Za-z_][\w.]*", f.annotation or ""):
                short = name.rpartition(".")[2]
                if short.startswith("KV") and short.endswith("Config"):
                    out.add(holder.fqn(name))
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
