"""One trace run: logs in, report out."""

from __future__ import annotations

import gc
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kvflowmap.render import links
from kvflowmap.trace.code import CodeIndex
from kvflowmap.trace.diagnose import outcome_of, problems_of
from kvflowmap.trace.match import Matcher
from kvflowmap.trace.parse import ParseStats, read_records
from kvflowmap.trace.report import build_report
from kvflowmap.trace.story import Tracer, seconds

_TIME = re.compile(r"(?:(\d{4})-)?(?:(\d\d)-(\d\d)[ T])?(\d\d:\d\d:\d\d)")


def parse_time(text: str, default_day: str = "") -> float:
    """``--since``/``--until``: ``MM-DD HH:MM:SS``, ``YYYY-MM-DD HH:MM:SS``
    or ``HH:MM:SS`` (on ``default_day``, ``MM-DD``; else a time of day);
    seconds as ``story.seconds`` counts them. ValueError when unreadable."""
    m = _TIME.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"cannot read the time {text!r}: use MM-DD HH:MM:SS or HH:MM:SS")
    day = f"{m.group(2)}-{m.group(3)}" if m.group(2) else (default_day or "01-01")
    hh, mm, ss = (int(x) for x in m.group(4).split(":"))
    month, dd = int(day[:2]), int(day[3:5])
    if hh > 23 or mm > 59 or ss > 59 or not 1 <= month <= 12 or not 1 <= dd <= 31:
        raise ValueError(f"no such time {text!r}: use MM-DD HH:MM:SS or HH:MM:SS")
    t = seconds(f"{day} {m.group(4)}")
    if t is None:
        raise ValueError(f"cannot read the time {text!r}")
    return t


def trace(code: CodeIndex, logs: list[str], request: str | None = None,
          since: str | None = None, until: str | None = None,
          templates: links.Templates | None = None,
          progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Read ``logs`` (paths, ``-`` for stdin) against ``code``; the report."""
    with _collector_paused():
        # in a function of its own: the stories are freed when it returns,
        # before the collector is back (it would walk them all once more)
        return _trace(code, logs, request, since, until, templates, progress)


def _trace(code: CodeIndex, logs: list[str], request: str | None, since: str | None,
           until: str | None, templates: links.Templates | None,
           progress: Callable[[int], None] | None) -> dict[str, Any]:
    matcher = Matcher(code)
    stats = ParseStats()
    # a time without a day (HH:MM:SS) is a time of day on every day of the log
    time_of_day = bool(since and not _has_day(since) or until and not _has_day(until))
    lo, hi = (parse_time(x) if x else None for x in (since, until))
    if time_of_day:
        lo, hi = (x % 86400 if x is not None else None for x in (lo, hi))
    tracer = Tracer(code, matcher, request, lo, hi,
                    settled=lambda s: None if problems_of(s, code) else outcome_of(s, code),
                    time_of_day=time_of_day)
    feed = tracer.feed
    shown = 0
    for batch in read_records(logs, stats):
        feed(batch)
        if progress is not None and stats.lines - shown >= 1 << 16:
            shown = stats.lines
            progress(shown)
    tracer.finish()
    return build_report(tracer, stats, code, templates, logs)


# young objects (allocations less deallocations) between two collections
# while a log is read; a run's live objects stay below it in practice
_COLLECT_EVERY = 1 << 20


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector all but paused while the logs are
    read. By default it runs every 700 allocations and now and then walks
    every object alive; a run keeps tens of thousands of stories and their
    lines, and makes a few objects a line, so that cost a quarter of the
    run. What a run makes has no reference cycles (reference counting frees
    it all); should some ever appear, a collection still runs once a
    million objects have piled up."""
    old = gc.get_threshold()
    gc.set_threshold(_COLLECT_EVERY, 1000, 1000)
    try:
        yield
    finally:
        gc.set_threshold(*old)


def _has_day(text: str) -> bool:
    return bool(re.match(r"\s*(\d{4}-)?\d\d-\d\d", text))
