"""``kvflowmap cache info | clear``."""

from __future__ import annotations

import shutil
from pathlib import Path

from kvflowmap.index.cache import default_cache_dir
from kvflowmap.sources.errors import SourceError


def _root(cache_dir: str | None) -> Path:
    return Path(cache_dir) if cache_dir else default_cache_dir()


def _size(path: Path) -> tuple[int, int]:
    files = [p for p in path.rglob("*") if p.is_file()] if path.exists() else []
    return len(files), sum(p.stat().st_size for p in files)


def info(cache_dir: str | None) -> str:
    """Location, entry count and size of facts, stored run results, compat
    surfaces and releases."""
    root = _root(cache_dir)
    lines = [f"cache: {root}"]
    for part in ("facts", "runs", "compat", "releases"):
        n, size = _size(root / part)
        lines.append(f"{part}: {n} files, {size / 1e6:.1f} MB")
    return "\n".join(lines)


def clear(cache_dir: str | None, releases: bool) -> str:
    """Delete facts, run results and compat's protocol surfaces (and releases
    when asked); ``SourceError`` naming what could not be deleted (a read-only
    cache), never "cleared"."""
    root = _root(cache_dir)
    parts = ["facts", "runs", "compat", *(["releases"] if releases else [])]
    failed: list[str] = []

    def note(func, path, exc_info) -> None:
        exc = exc_info[1]
        failed.append(f"{path}: {getattr(exc, 'strerror', None) or exc}")

    for part in parts:
        if (root / part).exists():
            shutil.rmtree(root / part, onerror=note)
    if failed:
        raise SourceError(f"could not clear the cache in {root}: {len(failed)} entries "
                          f"left, first {failed[0]}")
    return f"cleared {', '.join(parts)} in {root}"
