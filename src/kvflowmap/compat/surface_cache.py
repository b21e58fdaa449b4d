"""Protocol surfaces cached once per release, and the per-file fact cache
for the few modules a surface (or a connector) needs.

A surface is stored as JSON under ``cache/compat/`` keyed by the release and
a hash of what produced it: the fact extractor (its cache header), the
``kvflowmap.compat`` sources and the protocol file. A stale or corrupt entry
is a miss; writes are atomic, so concurrent runs never read half a file."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from kvflowmap.compat.model import Surface
from kvflowmap.compat.surface import extract_surface
from kvflowmap.facts import FileFacts
from kvflowmap.index.cache import HEADER, FactCache, content_sha
from kvflowmap.index.parse import facts_from_bytes
from kvflowmap.index.readfile import read_regular
from kvflowmap.protocol import Protocol
from kvflowmap.sources.fetch import fetch_release


def cached_parser(cache: FactCache) -> Callable[[Path, str], FileFacts]:
    """``parse(path, display)``: the file's facts, from the fact cache when its
    content was seen before (any release, any run)."""
    def parse(path: Path, display: str) -> FileFacts:
        data = read_regular(str(path))
        hit = cache.get(content_sha(data), display)
        if hit is not None:
            return hit
        facts = facts_from_bytes(display, data)
        cache.put(facts)
        return facts
    return parse


def _key(protocol: Protocol) -> str:
    h = hashlib.sha256(HEADER)
    for path in sorted(Path(__file__).resolve().parent.glob("*.py")):
        h.update(path.read_bytes())
    h.update(protocol.path.read_bytes())
    return h.hexdigest()[:16]


class SurfaceStore:
    """Surfaces by release spec (``vllm==0.33.0``) or import root, memoised."""

    def __init__(self, cache_root: Path, protocol: Protocol, *, use_cache: bool = True) -> None:
        self.cache_root, self.protocol, self.use_cache = cache_root, protocol, use_cache
        self.facts = FactCache(cache_root if use_cache else None)
        self._key = _key(protocol)
        self._memo: dict[str, Surface] = {}

    def release(self, version: str) -> Surface:
        """The surface of ``<package>==version``, fetched and extracted at most once."""
        if version not in self._memo:
            self._memo[version] = self._load(version) or self._build(version)
        return self._memo[version]

    def root(self, root: Path, label: str) -> Surface:
        """The surface of an import root on disk (not cached: it may change)."""
        return extract_surface(root, label, self.protocol, cached_parser(self.facts))

    def _file(self, version: str) -> Path:
        return self.cache_root / "compat" / f"{self.protocol.package}-{version}-{self._key}.json"

    def _load(self, version: str) -> Surface | None:
        if not self.use_cache:
            return None
        try:
            return Surface.from_json(json.loads(self._file(version).read_text("utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _build(self, version: str) -> Surface:
        root = fetch_release(f"{self.protocol.package}=={version}", self.cache_root)
        surface = extract_surface(root, version, self.protocol, cached_parser(self.facts))
        if self.use_cache:
            target = self._file(version)
            _write_atomic(target, json.dumps(surface.to_json(), sort_keys=True))
            for old in target.parent.glob(f"{self.protocol.package}-{version}-*.json"):
                if old != target:  # made by another kvflowmap or protocol file: stale
                    old.unlink(missing_ok=True)
        return surface


def _write_atomic(target: Path, text: str) -> None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except OSError:
        return  # a read-only cache only costs a re-extraction
