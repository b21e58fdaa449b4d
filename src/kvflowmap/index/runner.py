"""Index many files: cache look-up first, then parallel parsing of the misses."""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from kvflowmap import gc_tuning
from kvflowmap.facts import FileFacts, ProblemFact
from kvflowmap.index.cache import FactCache, dump
from kvflowmap.index.parse import content_sha, facts_from_bytes, facts_from_path
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


# Pool workers store what they parse themselves: the main process then only
# unpickles (measured: storing in the main process serialised ~0.8 s of
# pickling and compression per 240 files behind the workers).
_WORKER_CACHE: FactCache | None = None


def _start_worker(cache_root) -> None:
    global _WORKER_CACHE
    gc_tuning.tune()
    _WORKER_CACHE = FactCache(cache_root.parent if cache_root is not None else None)


def _parse_job(job: tuple[str, str, bool]) -> bytes:
    # The worker reads the file itself: sending its bytes through the pool's
    # pipe cost the main process 0.3 s per 5 MB (measured).
    path, display, screen = job
    facts = facts_from_path(path, display, screen=screen)
    pickled = dump(facts)
    if _WORKER_CACHE is not None:
        _WORKER_CACHE.put_pickled(facts.sha, pickled)
    return pickled


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
    for sf, facts in _parse_all(misses, jobs, cache):
        facts.path = sf.rel
        out[sf.module] = facts
        stats.parsed += 1
        done += 1
        if progress:
            progress(done, len(files), stats.cached)
    for facts in out.values():
        stats.lines += facts.lines
        stats.problems += facts.problem is not None
    return out


def _parse_all(misses: list[tuple[SourceFile, bytes]], jobs: int | None, cache: FactCache):
    """(file, facts) for each miss, stored in ``cache`` on the way."""
    workers = jobs or os.cpu_count() or 1
    if workers <= 1 or len(misses) < POOL_THRESHOLD:
        for sf, data in misses:
            facts = facts_from_bytes(sf.rel, data)  # in this process: always screened
            cache.put(facts)
            yield sf, facts
        return
    # Largest files first so one big file does not finish last on its own.
    order = sorted(misses, key=lambda m: -len(m[1]))
    # Workers first parse without the nesting pre-screen; if one crashes (the
    # native parser on pathological nesting), what it left undone is parsed
    # again, screened, in a fresh pool.
    for screen in (False, True):
        done = 0
        try:
            with ProcessPoolExecutor(max_workers=workers, initializer=_start_worker,
                                     initargs=(cache.root,)) as pool:
                jobs_ = [(str(sf.path), sf.rel, screen) for sf, _ in order]
                for (sf, _), pickled in zip(order, pool.map(_parse_job, jobs_, chunksize=4)):
                    done += 1
                    yield sf, pickle.loads(pickled)
            return
        except BrokenProcessPool:
            order = order[done:]
