"""Rule kinds read the model only: they import neither the API, the source
fetchers, the CLI (click) nor the terminal renderer (rich), and none re-reads
source files behind the facts. Checked on the kind modules' syntax trees."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kvflowmap.check.kinds as kinds_pkg

KINDS_DIR = Path(kinds_pkg.__file__).resolve().parent
FORBIDDEN = ("kvflowmap.api", "kvflowmap.sources", "kvflowmap.cli", "click", "rich")
# Calls that read a file: a kind gets source text from the facts instead.
FILE_READS = {"open", "read_text", "read_bytes", "getline", "getlines"}
MODULES = sorted(KINDS_DIR.rglob("*.py"))
# Known, not to grow: ``paired`` reads the source lines of simple statements
# (the facts keep no statement text yet; issue 9, item 3).
KNOWN_FILE_READS = {"_paired_text.py"}


def _imports(tree: ast.AST) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out += [(node.lineno, node.module)]
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return out


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(KINDS_DIR).as_posix())
def test_kind_module_imports_no_front_end(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad = [f"{path.name}:{line}: imports {name}" for line, name in _imports(tree)
           if any(name == f or name.startswith(f + ".") for f in FORBIDDEN)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(KINDS_DIR).as_posix())
def test_kind_module_reads_no_files(path: Path) -> None:
    if path.name in KNOWN_FILE_READS:
        pytest.xfail("reads statement source lines; needs a statement-text fact")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad = [f"{path.name}:{line}: imports {name}" for line, name in _imports(tree)
           if name == "linecache" or name.startswith("linecache.")]
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in FILE_READS:
                bad.append(f"{path.name}:{node.lineno}: calls {name}()")
    assert not bad, "\n".join(bad)
