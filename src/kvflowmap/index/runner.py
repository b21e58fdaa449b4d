"""Index many files: cache look-up first, then parallel parsing of the misses."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from kvflowmap.facts import FileFacts, ProblemFact
from kvflowmap.index.cache import FactCache
from kvflowmap.index.parse import content_sha, facts_from_bytes
from kvflowmap.sources.roots import SourceFile

# Below this many misses a process pool costs more than it saves.
POOL_THRESHOLD = 8


@dataclass
class IndexStats:
    """Counters for one run; tests read ``parsed`` to prove the cache works."""

    parsed: int = 0
    cached: int = 0
    lines: int = 0
    problems: int = 0


Progress = Callable[[int, int, int], None]  # (done, total, cached)


def _parse_job(job: tuple[str, bytes]) -> FileFacts:
    display, data = job
    return facts_from_bytes(display, data)


def _display(sf: SourceFile) -> str:
    return f"{sf.root.label}:{sf.rel}"


def index_files(files: Iterable[SourceFile], cache: FactCache, stats: IndexStats,
                *, jobs: int | None = None, progress: Progress | None = None
                ) -> dict[str, FileFacts]:
    """Facts for each file, keyed by module name. Never raises on bad input."""
    files = list(files)
    out: dict[str, FileFacts] = {}
    misses: list[tuple[SourceFile, bytes]] = []
    for sf in files:
        try:
            data = sf.path.read_bytes()
        except OSError as exc:
            out[sf.module] = FileFacts(sf.rel, "", problem=ProblemFact(0, f"cannot read: {exc.strerror}"))
            continue
        hit = cache.get(content_sha(data), sf.rel)
        if hit is not None:
            out[sf.module] = hit
            stats.cached += 1
        else:
            misses.append((sf, data))
    done = len(out)
    if progress:
        progress(done, len(files), stats.cached)
    for sf, facts in _parse_all(misses, jobs):
        facts.path = sf.rel
        cache.put(facts)
        out[sf.module] = facts
        stats.parsed += 1
        done += 1
        if progress:
            progress(done, len(files), stats.cached)
    for facts in out.values():
        stats.lines += facts.lines
        stats.problems += facts.problem is not None
    return out


def _parse_all(misses: list[tuple[SourceFile, bytes]], jobs: int | None):
    workers = jobs or os.cpu_count() or 1
    if workers <= 1 or len(misses) < POOL_THRESHOLD:
        for sf, data in misses:
            yield sf, facts_from_bytes(sf.rel, data)
        return
    # Largest files first so one big file does not finish last on its own.
    order = sorted(misses, key=lambda m: -len(m[1]))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        results = pool.map(_parse_job, [(sf.rel, data) for sf, data in order], chunksize=4)
        for (sf, _), facts in zip(order, results):
            yield sf, facts
