"""Whole-run memo: when nothing changed since the last run, reuse its result.

The fact cache makes a warm run parse nothing, but linking and rules still
cost seconds. A run's result is stored with a manifest of every file it read
(content hash) and of the subject files listed; a later run with the same
options, the same tool code and rules, the same file listing and the same
file contents returns the stored result without analysing anything.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from kvflowmap import __version__
from kvflowmap.index import plain_codec
from kvflowmap.index.readfile import read_regular

PACKAGE = Path(__file__).resolve().parent.parent
SUFFIX = ".msgpack"


@lru_cache(maxsize=1)
def tool_fingerprint() -> str:
    """Hash of kvflowmap's own code and shipped rules: a new build misses."""
    h = hashlib.sha256(__version__.encode())
    # os.walk follows the link: in a checkout ``kvflowmap/rules`` is a symlink to
    # the repository's rules/, which Path.rglob skips (an edited protocol file
    # then reused results computed with the old one)
    files = [Path(d) / f for d, _, fs in os.walk(PACKAGE, followlinks=True) for f in fs]
    for path in sorted(files):
        if path.suffix in (".py", ".yaml", ".yml", ".json") and "__pycache__" not in path.parts:
            h.update(str(path.relative_to(PACKAGE)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:20]


def files_digest(paths: list[Path]) -> str:
    """Hash of the names and contents of ``paths`` (missing ones count)."""
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(str(p).encode())
        try:
            h.update(hashlib.sha256(read_regular(p)).digest())
        except OSError:
            h.update(b"<missing>")
    return h.hexdigest()


@dataclass
class Manifest:
    """What a run read: file -> content hash, and the subject listing."""

    files: dict[str, str]
    listing: list[str]

    def unchanged(self, listing: list[str]) -> bool:
        if listing != self.listing:
            return False
        for path, sha in self.files.items():
            try:
                if hashlib.sha256(read_regular(path)).hexdigest() != sha:
                    return False
            except OSError:
                return False
        return True


class RunMemo:
    """Stores results under ``<cache>/runs/<key>.msgpack`` (``plain_codec``:
    loading builds only plain data and kvflowmap's data classes); ``None``
    cache: off."""

    def __init__(self, cache_root: Path | None) -> None:
        self.root = None if cache_root is None else Path(cache_root) / "runs"

    @staticmethod
    def key(*parts: object) -> str:
        h = hashlib.sha256(tool_fingerprint().encode())
        for part in parts:
            h.update(repr(part).encode())
            h.update(b"\0")
        return h.hexdigest()[:32]

    def load(self, key: str, listing: list[str]) -> Any | None:
        """The stored result if every input is as it was, else None."""
        if self.root is None:
            return None
        try:
            manifest, payload = plain_codec.decode(
                zlib.decompress((self.root / f"{key}{SUFFIX}").read_bytes()))
        except Exception:  # missing, truncated or foreign: analyse again
            return None
        return payload if isinstance(manifest, Manifest) and manifest.unchanged(listing) else None

    def save(self, key: str, manifest: Manifest, payload: Any) -> None:
        """Store atomically; failing to store only costs the next run time."""
        if self.root is None:
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            blob = zlib.compress(plain_codec.encode((manifest, payload)), 3)
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
            with os.fdopen(fd, "wb") as fh:
                fh.write(blob)
            os.replace(tmp, self.root / f"{key}{SUFFIX}")
        except (OSError, TypeError):  # TypeError: a result that is not plain data
            return
