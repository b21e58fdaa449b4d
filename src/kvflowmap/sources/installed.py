"""Locate an installed distribution's sources through its metadata only.

``installed_root("vllm")`` answers from ``importlib.metadata``: the package is
never imported (importing vLLM would start CUDA probing and take seconds, and
kvflowmap never runs the code it reads). Editable installs are followed to
their source tree through their ``.pth`` file, setuptools' finder mapping or
``direct_url.json``.
"""

from __future__ import annotations

import ast
import json
import sys
import urllib.parse
from importlib import metadata
from pathlib import Path

from kvflowmap.sources.errors import SourceError


def installed_root(name: str) -> tuple[Path, str]:
    """(import root, version) of installed distribution ``name``.

    ``name`` is a distribution name (``pegaflow-llm``) or, failing that, a
    top-level import name owned by exactly one distribution (``pegaflow``).
    Raises SourceError when it is not installed or its files are missing.
    """
    dist = _distribution(name)
    return _import_root(dist, name), dist.version


def _distribution(name: str) -> metadata.Distribution:
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        pass
    owners = sorted(set(metadata.packages_distributions().get(name, ())))
    if len(owners) == 1:
        return metadata.distribution(owners[0])
    if owners:
        raise SourceError(f"{name!r} is provided by several installed distributions "
                          f"({', '.join(owners)}): name the one to analyse")
    raise SourceError(
        f"{name!r} is not installed in the environment of {sys.executable}: "
        f"install it there, or analyse a path or a release ('{name}==VERSION')")


def _import_root(dist: metadata.Distribution, name: str) -> Path:
    label = f"{dist.metadata['Name']} {dist.version}"
    if dist.files is None:
        raise SourceError(f"{label} is installed without a file list (RECORD): "
                          "cannot tell where its sources are")
    base = Path(str(dist.locate_file("")))
    # Editable installs put a finder module in site-packages: not the package.
    py_files = [f for f in dist.files
                if f.suffix == ".py" and f.parts and f.parts[0] != ".."
                and not f.name.startswith("__editable__")]
    if any(Path(str(dist.locate_file(f))).is_file() for f in py_files):
        return base
    editable = _editable_root(dist)
    if editable is not None:
        return editable
    raise SourceError(f"{label} is installed but none of its Python files exist "
                      f"under {base}: reinstall it ({name!r})")


def _top_levels(dist: metadata.Distribution) -> set[str]:
    text = dist.read_text("top_level.txt") or ""
    tops = set(text.split())
    return tops or {(dist.metadata["Name"] or "").replace("-", "_").lower()}


def _editable_root(dist: metadata.Distribution) -> Path | None:
    """Source root of an editable install, or None when not editable."""
    tops = _top_levels(dist)
    files = dist.files or []
    for f in files:
        path = Path(str(dist.locate_file(f)))
        if f.suffix == ".pth":
            found = _pth_root(path, tops)
        elif f.name.startswith("__editable__") and f.name.endswith("_finder.py"):
            found = _finder_root(path)
        else:
            continue
        if found is not None:
            return found
    return _direct_url_root(dist, tops)


def _contains(root: Path, tops: set[str]) -> bool:
    return any((root / t).is_dir() or (root / f"{t}.py").is_file() for t in tops)


def _pth_root(pth: Path, tops: set[str]) -> Path | None:
    """A directory listed in a ``.pth`` file that holds the package."""
    try:
        lines = pth.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        line = line.strip()
        # `import ...` lines are code that site.py would run: never follow them.
        if line and not line.startswith(("#", "import ", "import\t")):
            root = Path(line)
            if root.is_dir() and _contains(root, tops):
                return root
    return None


def _finder_root(finder: Path) -> Path | None:
    """setuptools' ``MAPPING = {'pkg': '/src/pkg'}``, read with ast."""
    try:
        tree = ast.parse(finder.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        target = getattr(node, "target", None) or next(iter(getattr(node, "targets", [])), None)
        if isinstance(target, ast.Name) and target.id == "MAPPING":
            try:
                mapping = ast.literal_eval(node.value)  # type: ignore[attr-defined]
            except ValueError:
                return None
            if not isinstance(mapping, dict):
                return None
            dirs = sorted(Path(p).parent for p in mapping.values()
                          if isinstance(p, str) and Path(p).exists())
            return dirs[0] if dirs else None
    return None


def _direct_url_root(dist: metadata.Distribution, tops: set[str]) -> Path | None:
    """The project dir of an editable install (or its ``src/``)."""
    try:
        info = json.loads(dist.read_text("direct_url.json") or "null")
    except ValueError:
        return None
    if not (isinstance(info, dict) and info.get("dir_info", {}).get("editable")):
        return None
    url = urllib.parse.urlparse(info.get("url", ""))
    if url.scheme != "file":
        return None
    from urllib.request import url2pathname  # urllib.request: 17 ms of every start-up

    project = Path(url2pathname(url.path))
    for root in (project / "src", project):
        if _contains(root, tops):
            return root
    return None
