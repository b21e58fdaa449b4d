"""Call-graph fixtures: each fixture root holds an ``expected.json``.

``tests/fixtures/callgraph/<feature>/`` (one small import root per resolution
feature) and ``tests/fixtures/minivllm/`` (a miniature vLLM plus connector) list
the edges the graph must contain and those it must not::

    {"edges":  [[caller, callee], [caller, callee, "dispatch"], ...],
     "absent": [[caller, callee], ...]}

An expected edge's optional third item is its ``kind`` (default ``"call"``);
an absent edge must not exist with any kind. Node ids follow
``docs/graph-model.md``.

The format checks below run without the engine; the graph checks build the
graph with ``kvflowmap.api.build_graph`` and are skipped while that module does
not exist yet.
"""

from __future__ import annotations

import ast
import builtins
import functools
import json
import re
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
EXAMPLES = Path(__file__).parent.parent / "examples"
EDGE_KINDS = {"call", "dispatch", "bridge", "sets_state", "reads_state", "produces", "consumes"}

_LAMBDA = re.compile(r"<lambda\d+>")  # a lambda's node: ``scope.<lambda1>``
ROOTS = sorted(p.parent for p in (FIXTURES / "callgraph").glob("*/expected.json"))
ROOTS.append(FIXTURES / "minivllm")
IDS = [str(p.relative_to(FIXTURES)) for p in ROOTS]


# ---------------------------------------------------------------- helpers


def _load_expected(root: Path) -> dict[str, list[list[str]]]:
    with (root / "expected.json").open(encoding="utf-8") as fh:
        return json.load(fh)


def _edge(entry: list[str]) -> tuple[str, str, str]:
    """``[caller, callee]`` or ``[caller, callee, kind]`` -> a triple."""
    kind = entry[2] if len(entry) > 2 else "call"
    return entry[0], entry[1], kind


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _definitions(root: Path) -> set[str]:
    """Qualified names of every module, class and function under ``root``."""
    names: set[str] = set()
    for path in sorted(root.rglob("*.py")):
        module = _module_name(root, path)
        names.add(module)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        _collect(tree.body, module, names)
    return names


def _collect(body: list[ast.stmt], prefix: str, names: set[str]) -> None:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            qual = f"{prefix}.{node.name}"
            names.add(qual)
            _collect(node.body, qual, names)
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            _collect(node.body, prefix, names)
    _lambdas(body, prefix, names, [0])


def _lambdas(nodes: list, prefix: str, names: set[str], count: list[int]) -> None:
    """``prefix.<lambdaN>`` for the lambdas of one scope, in source order
    (not inside its nested defs and classes, which number their own)."""
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            _lambdas(node.decorator_list, prefix, names, count)
            continue
        if isinstance(node, ast.Lambda):
            count[0] += 1
            qual = f"{prefix}.<lambda{count[0]}>"
            names.add(qual)
            _lambdas([node.body], qual, names, [0])
            continue
        _lambdas(list(ast.iter_child_nodes(node)), prefix, names, count)


def _top_level_names(root: Path) -> set[str]:
    return {p.stem for p in root.glob("*.py")} | {
        p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists()
    }


def _node_problem(node: str, root: Path) -> str | None:
    """Why ``node`` cannot be a node id of this fixture, or None."""
    if node.startswith("<builtin>."):
        name, _, method = node.split(".", 1)[1].partition(".")
        if not hasattr(builtins, name):
            return f"{name!r} is not a builtin"
        # a method of a builtin class: ``<builtin>.dict.get``
        return None if not method or hasattr(getattr(builtins, name), method) else \
            f"{name}.{method} is not a builtin method"
    if not all(part.isidentifier() or _LAMBDA.fullmatch(part) for part in node.split(".")):
        return "not a dotted name"
    if node.split(".")[0] in _top_level_names(root) and node not in _definitions(root):
        return "names no module, class or function defined in the fixture"
    return None  # external code: any dotted import name


# ------------------------------------------------- format (no engine needed)


@pytest.mark.parametrize("root", ROOTS, ids=IDS)
def test_expected_json_is_well_formed(root: Path) -> None:
    expected = _load_expected(root)
    assert set(expected) == {"edges", "absent"}, f"{root}: keys must be edges and absent"
    assert expected["edges"], f"{root}: no expected edges"
    problems: list[str] = []
    seen: set[tuple[str, str, str]] = set()
    for section in ("edges", "absent"):
        for entry in expected[section]:
            size = (2, 3) if section == "edges" else (2,)
            if not isinstance(entry, list) or len(entry) not in size:
                problems.append(f"{section}: malformed entry {entry!r}")
                continue
            edge = _edge(entry)
            if edge[2] not in EDGE_KINDS:
                problems.append(f"{section}: unknown kind in {entry!r}")
            if (section, *edge) in seen:
                problems.append(f"{section}: duplicate {entry!r}")
            seen.add((section, *edge))
            if section == "edges":
                for node in edge[:2]:
                    why = _node_problem(node, root)
                    if why:
                        problems.append(f"edges: {node!r} in {entry!r}: {why}")
    expected_pairs = {tuple(e[:2]) for e in expected["edges"]}
    for entry in expected["absent"]:
        if tuple(entry) in expected_pairs:
            problems.append(f"{entry!r} is both expected and absent")
    assert not problems, f"{root}/expected.json:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("root", ROOTS, ids=IDS)
def test_fixture_sources_compile(root: Path) -> None:
    for path in sorted(root.rglob("*.py")):
        compile(path.read_text(encoding="utf-8"), str(path), "exec")


@pytest.mark.parametrize("root", ROOTS[:-1], ids=IDS[:-1])
def test_callgraph_fixture_says_what_it_tests(root: Path) -> None:
    first = (root / "main.py").read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# Fixture: "), f"{root}/main.py must open with '# Fixture: ...'"


def test_examples_compile() -> None:
    paths = sorted(EXAMPLES.rglob("*.py"))
    assert paths, "examples/ holds no Python sources"
    for path in paths:
        compile(path.read_text(encoding="utf-8"), str(path), "exec")


# ------------------------------------------------------------ graph checks


def _build_graph_api() -> Any:
    # imported, never skipped: a broken install must fail these tests, not pass them
    from kvflowmap.api import build_graph

    return build_graph


@functools.lru_cache(maxsize=None)
def _graph(root: str) -> Any:
    # minivllm's vLLM half is the stub shipped with the rules (one copy only).
    from kvflowmap.check.stubs import stub_root

    context = [str(stub_root())] if root.endswith("minivllm") else []
    return _build_graph_api()([root], context=context)


def _kinds(graph: Any, caller: str, callee: str) -> set[str]:
    if not graph.has_edge(caller, callee):
        return set()
    return {str(data.get("kind")) for data in graph.get_edge_data(caller, callee).values()}


def _out_edges(graph: Any, caller: str) -> str:
    """The caller's out-edges, or nearby node ids when it is missing."""
    if caller not in graph:
        prefix = caller.rsplit(".", 1)[0]
        near = sorted(str(n) for n in graph.nodes if str(n).startswith(prefix))
        return f"    node {caller!r} is not in the graph; nodes under {prefix!r}: {near[:30]}"
    lines = sorted(
        f"      -> {callee} [{data.get('kind')}] line {data.get('line')}"
        for _, callee, data in graph.out_edges(caller, data=True)
    )
    return f"    out-edges of {caller}:\n" + ("\n".join(lines) or "      (none)")


def _report(title: str, failures: list[str], graph: Any, callers: list[str]) -> str:
    parts = [f"{title}:", *failures, ""]
    parts += [_out_edges(graph, caller) for caller in dict.fromkeys(callers)]
    return "\n".join(parts)


@pytest.mark.parametrize("root", ROOTS, ids=IDS)
def test_expected_edges_present(root: Path) -> None:
    graph = _graph(str(root))
    failures: list[str] = []
    callers: list[str] = []
    for entry in _load_expected(root)["edges"]:
        caller, callee, kind = _edge(entry)
        kinds = _kinds(graph, caller, callee)
        if kind not in kinds:
            found = f"edge exists with kinds {sorted(kinds)}" if kinds else "no edge"
            failures.append(f"  missing {caller} -> {callee} [{kind}]: {found}")
            callers.append(caller)
    assert not failures, _report(f"{root.name}: expected edges missing", failures, graph, callers)


@pytest.mark.parametrize("root", ROOTS, ids=IDS)
def test_absent_edges_absent(root: Path) -> None:
    graph = _graph(str(root))
    failures: list[str] = []
    callers: list[str] = []
    for caller, callee in _load_expected(root)["absent"]:
        kinds = _kinds(graph, caller, callee)
        if kinds:
            failures.append(f"  unexpected {caller} -> {callee} {sorted(kinds)}")
            callers.append(caller)
    assert not failures, _report(f"{root.name}: edges that must not exist", failures, graph, callers)
