"""Which releases a ``compat`` run covers: a range ``0.28.0..0.33.0``
resolved through the package index (``pip index versions``), a comma list,
or the connector's own ``vllm`` requirement (``--vllm-from-pins``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from kvflowmap.protocol import version_key
from kvflowmap.sources.errors import SourceError

_FINAL = re.compile(r"^\d+(\.\d+)*$")  # no pre-releases, dev or post releases


def index_versions(package: str) -> list[str]:
    """The final releases of ``package`` on the package index, oldest first."""
    cmd = [sys.executable, "-m", "pip", "index", "versions", package]
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False,
                          timeout=120)
    for line in proc.stdout.splitlines():
        if line.startswith("Available versions:"):
            found = [v.strip() for v in line.partition(":")[2].split(",")]
            return sorted((v for v in found if _FINAL.match(v)), key=version_key)
    tail = "\n".join(proc.stderr.splitlines()[-4:])
    raise SourceError(f"cannot list the releases of {package} on the package index:\n{tail}")


def resolve_releases(spec: str, package: str, available: list[str] | None = None) -> list[str]:
    """``A..B`` (inclusive; either end may be left open) or ``A,B,C``, oldest first.
    A range keeps one release per minor version, the newest patch."""
    if ".." not in spec:
        return sorted({v.strip() for v in spec.split(",") if v.strip()}, key=version_key)
    lo, _, hi = spec.partition("..")
    versions = available if available is not None else index_versions(package)
    picked = [v for v in versions if (not lo or version_key(v) >= version_key(lo))
              and (not hi or version_key(v) <= version_key(hi))]
    newest: dict[tuple[int, ...], str] = {}
    for v in sorted(picked, key=version_key):
        newest[version_key(v)[:2]] = v
    if not newest:
        raise SourceError(f"no release of {package} in {spec}")
    return sorted(newest.values(), key=version_key)


def pinned_range(project: Path, package: str) -> str:
    """The ``package`` requirement of the project at ``project`` (its
    ``pyproject.toml`` dependencies, else ``setup.cfg``/``requires.txt``
    metadata) as a range for ``resolve_releases``."""
    for req in _requirements(project):
        name = re.split(r"[<>=!~;\[ (]", req, maxsplit=1)[0].strip().lower()
        if name == package:
            return _as_range(req[len(name):])
    raise SourceError(f"{project}: no {package} requirement found in its metadata "
                      "(pyproject.toml [project].dependencies, PKG-INFO/METADATA Requires-Dist)")


def _requirements(project: Path) -> list[str]:
    py = project / "pyproject.toml"
    out: list[str] = []
    if py.is_file():
        data = tomllib.loads(py.read_text("utf-8"))
        proj = data.get("project", {})
        out += list(proj.get("dependencies", []))
        for extra in proj.get("optional-dependencies", {}).values():
            out += list(extra)
    for meta in [*project.glob("*.dist-info/METADATA"), project / "PKG-INFO"]:
        if meta.is_file():
            out += [ln.partition(":")[2].strip() for ln in meta.read_text("utf-8").splitlines()
                    if ln.startswith("Requires-Dist:")]
    return out


def _as_range(constraint: str) -> str:
    """``>=0.28,<0.34`` -> ``0.28..0.33.99``; ``==0.30.0`` -> ``0.30.0``."""
    lo = hi = ""
    for part in constraint.split(";")[0].split(","):
        part = part.strip().strip("()")
        m = re.match(r"(>=|==|<=|<|>|~=)\s*([\w.]+)", part)
        if not m:
            continue
        op, v = m.groups()
        if op == "==":
            return v
        if op in (">=", ">", "~="):
            lo = v
        elif op == "<=":
            hi = v
        elif op == "<":
            hi = _before(v)
    return f"{lo}..{hi}"


def _before(version: str) -> str:
    """The highest version below ``version`` a range end can name (``0.34`` -> ``0.33.999``)."""
    parts = list(version_key(version)) + [0, 0]
    major, minor = parts[0], parts[1]
    if minor:
        return f"{major}.{minor - 1}.999"
    return f"{major - 1}.999.999"
