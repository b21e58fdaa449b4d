"""Tell which version of a package an import root holds, without importing it.

Used to name what was analysed ("vLLM 0.33.0") in warnings and reports.
Packaging metadata is preferred; a ``__version__`` literal read with ``ast``
is the fallback for plain source trees. Nothing is executed.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from email.parser import HeaderParser
from pathlib import Path

_VERSION_NAMES = ("__version__", "version")


def detect_version(root: Path, package: str) -> str | None:
    """The version of ``package`` (import or distribution name) under ``root``.

    Looks for ``*.dist-info/METADATA`` or ``*.egg-info/PKG-INFO`` belonging to
    the package, then a ``PKG-INFO`` of an unpacked sdist, then a version
    literal in ``<package>/_version.py``, ``version.py`` or ``__init__.py``.
    Returns None when none of these names a version.
    """
    root = Path(root)
    return (_from_metadata(root, package) or _from_pkg_info(root, package)
            or _from_source(root, package))


def distribution(root: Path, package: str) -> tuple[str, str] | None:
    """``(name, version)`` of the installed or unpacked distribution under
    ``root`` that ships top-level ``package`` (``("pegaflow-llm", "0.25.1")``
    for ``pegaflow``), from its packaging metadata only; None for a plain
    source tree."""
    for meta in _metas(root, package):
        name, version = _header(meta, "Name"), _header(meta, "Version")
        if name and version:
            return name, version
    return None


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _meta_file(entry: Path) -> Path | None:
    """The core-metadata file of a ``.dist-info`` / ``.egg-info`` entry."""
    name = entry.name.lower()
    if name.endswith(".dist-info"):
        return entry / "METADATA"
    if name.endswith(".egg-info"):
        # Old distutils installs write egg-info as a single PKG-INFO-like file.
        return entry if entry.is_file() else entry / "PKG-INFO"
    return None


def _from_metadata(root: Path, package: str) -> str | None:
    return next((v for meta in _metas(root, package)
                 if (v := _header(meta, "Version")) is not None), None)


def _metas(root: Path, package: str) -> Iterator[Path]:
    """Core-metadata files under ``root`` that belong to ``package``: the
    distribution named like it first (a dist that merely ships a module of
    the same name, vendoring, must not win over the package's own), then
    those whose RECORD or top_level.txt ship it."""
    try:
        entries = sorted(Path(root).iterdir())
    except OSError:
        return
    metas = [(e, m) for e in entries if (m := _meta_file(e)) is not None]
    want = _norm(package)
    named = [m for e, m in metas if _norm(e.name.rsplit(".", 1)[0].split("-")[0]) == want]
    yield from named
    yield from (m for e, m in metas if m not in named and e.is_dir() and _owns(e, package))


def _owns(meta_dir: Path, package: str) -> bool:
    """Whether a metadata dir's distribution ships top-level ``package``.

    ``top_level.txt`` says so directly; wheels built without it (maturin,
    e.g. pegaflow-llm) still list their files in ``RECORD``.
    """
    top = _read(meta_dir / "top_level.txt")
    if top is not None and package in top.split():
        return True
    record = _read(meta_dir / "RECORD") or ""
    prefixes = (f"{package}/", f"{package}.py,")
    return any(line.startswith(prefixes) for line in record.splitlines())


def _from_pkg_info(root: Path, package: str) -> str | None:
    """``PKG-INFO`` at the top of an unpacked sdist (root or its ``src/``)."""
    for path in (root / "PKG-INFO", root.parent / "PKG-INFO"):
        name = _header(path, "Name")
        if name is not None and _norm(name) == _norm(package):
            return _header(path, "Version")
    return None


def _from_source(root: Path, package: str) -> str | None:
    pkg = root / package
    candidates = [pkg / "_version.py", pkg / "version.py", pkg / "__init__.py",
                  root / f"{package}.py"]
    for path in candidates:
        text = _read(path)
        if text is not None and (version := version_literal(text)) is not None:
            return version
    return None


def version_literal(source: str) -> str | None:
    """A module-level ``__version__ = "x"`` (or ``version = "x"``) string.

    Handles ``__version__ = version = "x"`` and annotated assignments as
    written by setuptools-scm. Returns None for computed or absent values.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            for t in targets:
                if isinstance(t, ast.Name) and t.id in _VERSION_NAMES:
                    found.setdefault(t.id, value.value)
    return next((found[n] for n in _VERSION_NAMES if n in found), None)


def _header(path: Path, key: str) -> str | None:
    text = _read(path)
    if text is None:
        return None
    value = HeaderParser().parsestr(text).get(key)
    return value.strip() if isinstance(value, str) and value.strip() else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
