"""Subject modules that load only on other vLLM releases.

A plugin that supports several vLLM releases keeps the code for each in
modules it imports only under a test of vLLM's version::

    match get_vllm_version():
        case "0.11.0":
            import ucm.integration.vllm.patch.v0110.vllm.pc_patch
        case "0.18.0":
            import ucm.integration.vllm.patch.v0180.vllm.pc_patch

    if vllm_version_is("0.9.1"):
        from vllm_ascend.patch import patch_0_9_1

Such a module never runs with another release, so judging its imports,
signatures and members against that release reports drift that cannot
happen. A module is *gated off* the analysed vLLM when it is imported
(directly, or as the package of what is imported) only by imports whose
``if``/``case`` tests are false on that release, or by modules that are
gated off themselves; a module nothing in the subject imports is loaded from
outside (vLLM's connector factory, an entry point) and always counts. A
test that cannot be decided (a name not known to hold vLLM's version, a
platform's own version) leaves the import live: never a false pass by
guessing.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass

from kvflowmap.facts import FileFacts, ImportFact
from kvflowmap.model.core import Model
from kvflowmap.model.version_tests import VLLM_VERSION_NAMES, Oracle, evaluate
from kvflowmap.protocol import version_key


@dataclass(frozen=True)
class Edge:
    """One import of ``target`` written in ``importer`` at ``line``."""

    importer: str
    target: str
    line: int
    off: str | None  # the gate that is false on the analysed release, if one is


def gated_off(model: Model, version: str | None,
              aligned: tuple[str, ...] = ()) -> dict[str, str]:
    """Subject module -> why it does not load on vLLM ``version`` (the import
    and the gate that keeps it off); empty when the version is unknown.
    ``aligned``: platform plugins released in step with vLLM (the protocol's
    ``aligned_plugins``), whose version gates name a vLLM major.minor."""
    if not version:
        return {}
    subject = sorted(m for m, sf in model.table.files.items() if sf.subject and m in model.facts)
    edges = [e for m in subject for e in _edges(model, m, version, aligned)]
    out_of: dict[str, list[Edge]] = {}
    for e in edges:
        out_of.setdefault(e.importer, []).append(e)
    imported = {e.target for e in edges}
    # live: loaded from outside (nothing imports it), or by a live module past its gates
    live = {m for m in subject if m not in imported}
    todo = sorted(live)
    while todo:
        for e in out_of.get(todo.pop(), ()):
            if e.off is None and e.target not in live:
                live.add(e.target)
                todo.append(e.target)
    # only what a false gate cuts off: an import cycle nothing loads is not judged here
    why: dict[str, str] = {}
    for e in edges:
        if e.off is not None and e.target not in live and e.target not in why:
            why[e.target] = f"imported only under `{e.off}` ({e.importer}, line {e.line})"
            todo.append(e.target)
    while todo:
        m = todo.pop()
        for e in out_of.get(m, ()):
            if e.target not in live and e.target not in why:
                why[e.target] = why[m]
                todo.append(e.target)
    return why


def is_gated(fqn: str, gated: dict[str, str]) -> bool:
    """``fqn`` (a module, or a def in one) lies in a gated-off module."""
    parts = fqn.split(".")
    return any(".".join(parts[:i]) in gated for i in range(len(parts), 0, -1))


def live_only(fqns: Iterable[str], gated: dict[str, str]) -> list[str]:
    """``fqns`` without those in gated-off modules."""
    return [f for f in fqns if not is_gated(f, gated)] if gated else list(fqns)


def _edges(model: Model, module: str, version: str, aligned: tuple[str, ...]) -> list[Edge]:
    ff = model.facts[module]
    out: list[Edge] = []
    for imp in ff.imports:
        if imp.type_checking or imp.name == "*":
            continue
        off = (_false_gate(ff, imp, version) or _other_plugin_release(ff, imp, version, aligned)
               ) if imp.gates else None
        for target in _targets(model, module, imp):
            if target != module:
                out.append(Edge(module, target, imp.line, off))
    return out


def _targets(model: Model, module: str, imp: ImportFact) -> list[str]:
    """The subject modules an import runs: the module named, its packages, and
    ``from P import m`` of a submodule ``m``."""
    name = model.absolute(module, imp)
    if imp.name:
        name = f"{name}.{imp.name}" if f"{name}.{imp.name}" in model.facts else name
    parts = name.split(".")
    mods = (".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return [m for m in mods if m in model.facts and model.table.files[m].subject]


def _false_gate(ff: FileFacts, imp: ImportFact, version: str) -> str | None:
    """The first gate of ``imp`` that is false on ``version``, or None."""
    holders = _version_locals(ff, imp.scope)
    oracle = Oracle(version, lambda p, t: None, lambda o, n: None,
                    lambda dotted: dotted in VLLM_VERSION_NAMES or dotted in holders
                    or _reads_vllm_version(dotted))
    for gate in imp.gates:
        taken, kind = evaluate(gate, oracle)
        if taken is False and kind is not None:
            return gate
    return None


def _other_plugin_release(ff: FileFacts, imp: ImportFact, version: str,
                          aligned: tuple[str, ...]) -> str | None:
    """The gate of ``imp`` that tests an aligned plugin's version for releases
    of another vLLM major.minor only (``case "0.11.0" | "0.11.1":`` of
    ``get_vllm_ascend_version()`` on vLLM 0.18), or None."""
    if not aligned:
        return None
    words = [set(p.lower().split("_")) for p in aligned]
    holders = {a.target for a in ff.assigns if a.scope == imp.scope and a.value and any(
        w | {"version"} <= _words(a.value) for w in words)}
    here = version_key(version)[:2]
    for gate in imp.gates:
        try:
            node = ast.parse(gate, mode="eval").body
        except (SyntaxError, ValueError):
            continue
        tests = node.values if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) \
            else [node]
        literals = [_plugin_literal(t, holders, words) for t in tests]
        if literals and all(lit is not None and len(lit) >= 2 and lit[:2] != here
                            for lit in literals):
            return gate
    return None


def _plugin_literal(node: ast.expr, holders: set[str],
                    words: list[set[str]]) -> tuple[int, ...] | None:
    """The release of ``holder == "0.11.0"`` where holder is a plugin's version."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1
            and isinstance(node.ops[0], ast.Eq)):
        return None
    left, right = node.left, node.comparators[0]
    if isinstance(left, ast.Constant):
        left, right = right, left
    text = ast.unparse(left)
    if not (text in holders or any(w | {"version"} <= _words(text) for w in words)):
        return None
    if isinstance(right, ast.Constant) and isinstance(right.value, str):
        return version_key(right.value) or None
    return None


def _words(dotted: str) -> set[str]:
    return {w for w in dotted.lower().replace(".", "_").replace("(", "_").replace(")", "_")
            .split("_") if w}


def _version_locals(ff: FileFacts, scope: str) -> set[str]:
    """Names of ``scope`` bound to vLLM's version (``v = get_vllm_version()``,
    ``v = vllm.__version__``)."""
    return {a.target for a in ff.assigns if a.scope == scope and a.value
            and (a.value in VLLM_VERSION_NAMES or _reads_vllm_version(a.value.removesuffix("()")))}


def _reads_vllm_version(dotted: str) -> bool:
    """A name or call that reads vLLM's own version (``get_vllm_version``,
    ``vllm_version``), not another package's (``get_vllm_ascend_version``)."""
    try:
        node = ast.parse(dotted, mode="eval").body
    except (SyntaxError, ValueError):
        return False
    if isinstance(node, ast.Call):
        node = node.func
    last = dotted.rpartition(".")[2].split("(")[0].lower()
    words = {w for w in last.split("_") if w}
    return isinstance(node, (ast.Name, ast.Attribute)) and {"vllm", "version"} <= words \
        and words <= {"vllm", "version", "get", "current", "installed", "detected", "ver"}
