"""One trace run: logs in, report out."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kvflowmap.render import links
from kvflowmap.trace.code import CodeIndex
from kvflowmap.trace.diagnose import outcome_of, problems_of
from kvflowmap.trace.match import Matcher
from kvflowmap.trace.parse import ParseStats, records
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
    t = seconds(f"{day} {m.group(4)}")
    if t is None:
        raise ValueError(f"cannot read the time {text!r}")
    return t


def trace(code: CodeIndex, logs: list[str], request: str | None = None,
          since: str | None = None, until: str | None = None,
          templates: links.Templates | None = None,
          progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Read ``logs`` (paths, ``-`` for stdin) against ``code``; the report."""
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
    add = tracer.add
    n = 0
    for rec in records(logs, stats):
        add(rec)
        n += 1
        if progress is not None and not n & 0xFFFF:
            progress(stats.lines)
    return build_report(tracer, stats, code, templates, logs)


def _has_day(text: str) -> bool:
    return bool(re.match(r"\s*(\d{4}-)?\d\d-\d\d", text))
