"""Index files: cache look-up first, then parallel parsing of the misses."""

from __future__ import annotations

import faulthandler
import multiprocessing
import os
import signal
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from kvflowmap import gc_tuning
from kvflowmap.facts import FileFacts, ProblemFact
from kvflowmap.index import facts_codec
from kvflowmap.index.cache import FactCache, content_sha, dump
from kvflowmap.index.readfile import read_regular
from kvflowmap.sources.roots import SourceFile

IN_FLIGHT_PER_WORKER = 4
# Every pool this process started and has not shut down: ``kill_workers``
# ends their workers when the run is cut short (SIGTERM, Ctrl-C), which a
# ``finally`` cannot do once the process exits without unwinding.
_POOLS: set[ProcessPoolExecutor] = set()


def kill_workers() -> None:
    """Terminate the workers of every pool still open, and forget the pools."""
    for pool in list(_POOLS):
        procs = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        # a worker started while the signal arrived may not be in the pool's
        # table yet (seen once on a loaded machine): every child of ours goes
        procs += [c for c in multiprocessing.active_children() if c not in procs]
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.join(timeout=5)
        _POOLS.discard(pool)


@dataclass
class IndexStats:
    """Counters for one run; tests read ``parsed`` to prove the cache works."""

    parsed: int = 0
    cached: int = 0
    lines: int = 0
    problems: int = 0


Progress = Callable[[int, int, int], None]  # (done, total, cached)


# Pool workers store what they parse themselves: the main process then only
# decodes (measured: storing in the main process serialised ~0.8 s of
# encoding and compression per 240 files behind the workers).
_WORKER: tuple[FactCache, gc_tuning.BetweenFiles] | None = None  # set in each worker


def _start_worker(cache: FactCache) -> None:
    global _WORKER
    # A worker that crashes (LibCST's native parser on pathological nesting) is
    # redone screened by the parent, which warns naming the file; the crash trace
    # a forked worker inherits from the parent's faulthandler (pytest enables it)
    # would only be noise on stderr.
    faulthandler.disable()
    # A forked worker inherits the CLI's SIGTERM handler, which raises an
    # exception: the pool's worker loop catches it around a job, reports it and
    # waits for the next one, so a worker mid-job outlived the parent (parent 1,
    # blocked on the call queue). Workers die on SIGTERM; Ctrl-C is the
    # parent's to handle (it terminates the workers).
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _WORKER = (cache, gc_tuning.BetweenFiles())


def _parse_job(job: tuple[str, str, bool]) -> bytes:
    # The worker reads the file itself: sending its bytes through the pool's
    # pipe cost the main process 0.3 s per 5 MB (measured).
    from kvflowmap.index.parse import facts_from_path  # LibCST: imported by each worker

    assert _WORKER is not None, "set by _start_worker"
    cache, collector = _WORKER
    path, display, screen = job
    facts = facts_from_path(path, display, screen=screen)
    encoded = dump(facts)
    cache.put_encoded(facts.sha, encoded)
    collector.after_file()
    return encoded


class Indexer:
    """Indexes files as they become known, with one process pool for the run.

    ``add`` files at any time (also while iterating ``results``): misses go
    to the pool at once (or are parsed in this process with one worker), and
    cache hits are loaded while the workers parse: with one file edited, its
    parse overlaps loading the other 239 (measured: 0.4 s of a 2.7 s check).
    ``results`` yields ``(file, facts)`` in completion order until nothing is
    pending, so a caller following imports submits new files without a pool
    per wave of imports (on all of vLLM this measured the same as waves).
    """

    def __init__(self, cache: FactCache, stats: IndexStats, *, jobs: int | None = None,
                 progress: Progress | None = None) -> None:
        self.cache, self.stats, self.progress = cache, stats, progress
        self.workers = jobs or os.cpu_count() or 1
        self._ready: list[tuple[SourceFile, FileFacts]] = []
        self._hits: list[tuple[SourceFile, str]] = []  # (file, sha) in the cache, not loaded yet
        self._misses: list[tuple[SourceFile, int]] = []  # (file, size)
        self._running: dict[Future, SourceFile] = {}
        self._backlog: list[tuple[SourceFile, int]] = []  # misses not yet submitted
        self._pool: ProcessPoolExecutor | None = None
        self._screen = False  # workers start unscreened; see _recover
        self._known = self._done = 0

    def add(self, files: Iterable[SourceFile]) -> None:
        """Queue files for indexing; never raises on bad input."""
        for sf in files:
            self._known += 1
            try:
                data = read_regular(sf.path)
            except OSError as exc:
                self._ready.append((sf, FileFacts(sf.rel, "", problem=ProblemFact(
                    0, f"cannot read: {exc.strerror}"))))
                continue
            sha = content_sha(data)
            if self.cache.has(sha):
                self._hits.append((sf, sha))
            else:
                self._misses.append((sf, len(data)))

    def start(self) -> None:
        """Start parsing what is queued now, before the caller goes on with
        other work (the main process imports the linker while workers parse)."""
        self._dispatch()

    def results(self):
        """``(file, facts)`` for every file added, including ones added while
        this runs, as each is ready."""
        try:
            while True:
                self._dispatch()
                if self._running:
                    self._collect(block=False)  # keep the workers fed
                if not self._ready and self._hits:
                    self._load_hit()
                if self._ready:
                    sf, facts = self._ready.pop()
                    self._count(facts)
                    yield sf, facts
                elif self._running:
                    self._collect()
                elif not (self._backlog or self._misses or self._hits):
                    return
                # else: a rejected cache entry or a recovered pool: dispatch again
        finally:
            if self._pool is not None:
                self._pool.shutdown(cancel_futures=True)
                _POOLS.discard(self._pool)
                self._pool = None

    def _load_hit(self) -> None:
        sf, sha = self._hits.pop()
        facts = self.cache.get(sha, sf.rel)
        if facts is None:  # truncated, foreign or stale: parse it again
            self._misses.append((sf, 0))
        else:
            self.stats.cached += 1
            self._ready.append((sf, facts))

    def _count(self, facts: FileFacts) -> None:
        self._done += 1
        self.stats.lines += facts.lines
        self.stats.problems += facts.problem is not None
        if self.progress:
            self.progress(self._done, self._known, self.stats.cached)

    def _dispatch(self) -> None:
        misses, self._misses = self._misses, []
        if misses and self._pool is None and self.workers <= 1:
            from kvflowmap.index.parse import facts_from_path

            for sf, _ in misses:  # in this process: always screened
                facts = facts_from_path(str(sf.path), sf.rel)
                self.cache.put(facts)
                self._parsed(sf, facts)
            return
        if misses:  # largest first so one big file does not finish last on its own
            self._backlog = sorted([*self._backlog, *misses], key=lambda m: -m[1])
        if self._backlog and self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self.workers, initializer=_start_worker,
                                             initargs=(self.cache,))
            _POOLS.add(self._pool)
        # A few files in flight per worker keep it busy; ``wait`` costs the
        # number in flight, so all 3,000 of vLLM at once made collecting quadratic.
        while self._backlog and len(self._running) < IN_FLIGHT_PER_WORKER * self.workers:
            sf, _ = self._backlog.pop(0)
            assert self._pool is not None  # started above: the backlog is not empty
            self._running[self._pool.submit(_parse_job, (str(sf.path), sf.rel, self._screen))] = sf

    def _collect(self, block: bool = True) -> None:
        done, _ = wait(list(self._running), timeout=None if block else 0,
                       return_when=FIRST_COMPLETED)
        try:
            for fut in sorted(done, key=lambda f: self._running[f].rel):
                sf = self._running[fut]
                facts = facts_codec.decode(fut.result())
                del self._running[fut]
                self._parsed(sf, facts)
        except BrokenProcessPool:
            self._recover()

    def _recover(self) -> None:
        """A worker died (LibCST's native parser on pathological nesting):
        redo everything unfinished, screened, in a fresh pool."""
        assert self._pool is not None
        self._pool.shutdown(cancel_futures=True)
        _POOLS.discard(self._pool)
        self._pool = None
        self._screen = True
        self._backlog.extend((sf, 0) for sf in self._running.values())
        self._running.clear()

    def _parsed(self, sf: SourceFile, facts: FileFacts) -> None:
        facts.path = sf.rel
        self.stats.parsed += 1
        self._ready.append((sf, facts))


def index_files(files: Iterable[SourceFile], cache: FactCache, stats: IndexStats,
                *, jobs: int | None = None, progress: Progress | None = None
                ) -> dict[str, FileFacts]:
    """Facts for each file, keyed by module name. Never raises on bad input."""
    indexer = Indexer(cache, stats, jobs=jobs, progress=progress)
    indexer.add(files)
    return {sf.module: facts for sf, facts in indexer.results()}
