"""Shared fixtures: small packages built from ``{path: source}`` dicts."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    """Write ``files`` under ``root`` (str sources are dedented) and return root."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(textwrap.dedent(content).lstrip("\n"), encoding="utf-8")
    return root


@pytest.fixture
def tree(tmp_path: Path):
    """Factory: ``tree({path: source})`` -> the import root."""
    counter = iter(range(1000))

    def make(files: dict[str, str | bytes]) -> Path:
        return write_tree(tmp_path / f"root{next(counter)}", files)

    return make


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory, monkeypatch):
    """Each test gets its own fact cache unless it sets one."""
    monkeypatch.setenv("KVFLOWMAP_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
