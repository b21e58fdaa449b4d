"""``compat`` runs as plain functions: the diff of two releases, and the
matrix of a connector over releases (the command only parses options and
writes what these return)."""

from __future__ import annotations

from pathlib import Path

from kvflowmap.compat.connector import ConnectorCode
from kvflowmap.compat.diff import Change, diff_surfaces
from kvflowmap.compat.findings import Matrix
from kvflowmap.compat.matrix import build_matrix
from kvflowmap.compat.model import Surface
from kvflowmap.compat.releases import pinned_range, resolve_releases
from kvflowmap.compat.surface_cache import SurfaceStore, cached_parser
from kvflowmap.sources.errors import SourceError
from kvflowmap.sources.release_spec import parse_spec


def surface_of(store: SurfaceStore, ref: str) -> Surface:
    """The surface of ``ref``: ``vllm==0.33.0``, a bare version, or an import root."""
    path = Path(ref)
    if "==" not in ref and path.is_dir():
        return store.root(path, path.name)
    if "==" in ref:
        rs = parse_spec(ref)
        if rs.canonical != store.protocol.package:
            raise SourceError(f"{ref}: compat compares releases of {store.protocol.package}")
        return store.release(rs.version)
    return store.release(ref)


def run_diff(store: SurfaceStore, a: str, b: str) -> tuple[Surface, Surface, list[Change]]:
    """The protocol changes from release ``a`` to ``b``."""
    sa, sb = surface_of(store, a), surface_of(store, b)
    return sa, sb, diff_surfaces(sa, sb)


def pick_releases(store: SurfaceStore, spec: str | None, pins_from: list[Path]) -> list[str]:
    """The versions of a run: ``spec`` (a range or list), else the pins of the
    first project found at or above the sources."""
    package = store.protocol.package
    if spec:
        return resolve_releases(spec, package)
    for src in pins_from:
        for cand in [src, *list(src.resolve().parents)[:3]]:
            if (cand / "pyproject.toml").is_file() or any(cand.glob("*.dist-info")):
                return resolve_releases(pinned_range(cand, package), package)
    raise SourceError("no releases: give --vllm A..B (or A,B,C), or --vllm-from-pins in a "
                      "project whose metadata requires vllm")


def run_matrix(store: SurfaceStore, sources: list[Path], versions: list[str],
               classes: list[str] | None = None) -> Matrix:
    """The matrix of the connector classes under ``sources`` × ``versions``."""
    surfaces = [store.release(v) for v in versions]
    code = ConnectorCode(sources, cached_parser(store.facts))
    if classes:
        wanted = [k for k in code.classes if k in classes or k.rpartition(".")[2] in classes]
        missing = [c for c in classes if not any(c in (k, k.rpartition(".")[2]) for k in wanted)]
        if missing:
            raise SourceError(f"no class {', '.join(missing)} in {', '.join(map(str, sources))}")
        return build_matrix(code, surfaces, store.protocol, sorted(wanted))
    return build_matrix(code, surfaces, store.protocol)
