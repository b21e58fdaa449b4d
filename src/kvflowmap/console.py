"""Messages, progress and timings on stderr (rich lives here, not in analysis)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class Reporter:
    """Writes to stderr; ``quiet`` keeps only errors, ``verbose`` adds timings."""

    def __init__(self, *, quiet: bool = False, verbose: bool = False) -> None:
        self.quiet = quiet
        self.verbose = verbose
        self.err = Console(stderr=True, highlight=False, soft_wrap=True)

    def info(self, text: str) -> None:
        if self.verbose and not self.quiet:
            self.err.print(text, markup=False)

    def note(self, text: str) -> None:
        if not self.quiet:
            self.err.print(text, markup=False)

    def warn(self, text: str) -> None:
        if not self.quiet:
            self.err.print(f"warning: {text}", markup=False, style="yellow")

    def error(self, text: str) -> None:
        self.err.print(f"error: {text}", markup=False, style="red")

    @contextlib.contextmanager
    def progress(self) -> Iterator:
        """A progress callback (done, total, cached); a bar only on a terminal."""
        if self.quiet or not sys.stderr.isatty():
            yield None
            return
        with Progress(TextColumn("indexing"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("{task.fields[cached]} from cache"), TimeElapsedColumn(),
                      console=self.err, transient=True) as bar:
            task = bar.add_task("index", total=None, cached=0)

            def update(done: int, total: int, cached: int) -> None:
                bar.update(task, completed=done, total=total, cached=cached)

            yield update

    def timings(self, timings: dict[str, float], stats) -> None:
        if not self.verbose or self.quiet:
            return
        phases = ", ".join(f"{k} {v:.2f}s" for k, v in timings.items())
        self.err.print(f"time: {phases}; files parsed {stats.parsed}, from cache {stats.cached}, "
                       f"{stats.lines} lines", markup=False)
