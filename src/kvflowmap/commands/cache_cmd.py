"""``kvflowmap cache info | clear``."""

from __future__ import annotations

import shutil
from pathlib import Path

from kvflowmap.index.cache import default_cache_dir


def _root(cache_dir: str | None) -> Path:
    return Path(cache_dir) if cache_dir else default_cache_dir()


def _size(path: Path) -> tuple[int, int]:
    files = [p for p in path.rglob("*") if p.is_file()] if path.exists() else []
    return len(files), sum(p.stat().st_size for p in files)


def info(cache_dir: str | None) -> str:
    """Location, entry count and size of facts and releases."""
    root = _root(cache_dir)
    lines = [f"cache: {root}"]
    for part in ("facts", "releases"):
        n, size = _size(root / part)
        lines.append(f"{part}: {n} files, {size / 1e6:.1f} MB")
    return "\n".join(lines)


def clear(cache_dir: str | None, releases: bool) -> str:
    """Delete facts (and releases when asked)."""
    root = _root(cache_dir)
    parts = ["facts", "releases"] if releases else ["facts"]
    for part in parts:
        shutil.rmtree(root / part, ignore_errors=True)
    return f"cleared {', '.join(parts)} in {root}"
