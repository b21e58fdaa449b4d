"""Writing what a command produces: an unwritable target is a usage error
that names the path (exit 2), never a traceback."""

from __future__ import annotations

from pathlib import Path

from kvflowmap.sources.errors import SourceError


def write_output(path: str | Path, data: str | bytes, make_parents: bool = False) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` (creating its folder with
    ``make_parents``); ``SourceError`` on failure."""
    try:
        if make_parents:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            Path(path).write_bytes(data)
        else:
            Path(path).write_text(data, encoding="utf-8")
    except OSError as exc:
        raise SourceError(f"cannot write {path}: {exc.strerror or exc}") from exc
