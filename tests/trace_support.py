"""Shared by the trace tests: the code index of one small connector package."""

from __future__ import annotations

from pathlib import Path

from kvflowmap.trace.code import CodeIndex, build_code_index
from tests.conftest import write_tree


def connector_index(folder: Path, package: str, source: str) -> CodeIndex:
    """The trace code index of ``package`` (``package/connector.py`` holding
    ``source``) written under ``folder``, analysed against the vLLM stub."""
    from kvflowmap.api import Request, analyse
    from kvflowmap.check.stubs import stub_root

    root = write_tree(folder, {f"{package}/__init__.py": "", f"{package}/connector.py": source})
    a = analyse(Request(sources=[str(root / package)], context=[str(stub_root())], use_cache=False))
    return build_code_index(a)
