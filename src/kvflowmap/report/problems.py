"""Files that could not be analysed, as report data: a report that omits them
looks green while part of the code was never checked."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# ``/abs/path/file.py:12: syntax error: ...`` (the analysis's per-file warnings)
_FILE_LINE = re.compile(r"^(?P<file>[^:\n]+\.py):(?P<line>\d+): (?P<message>.*)$", re.S)


@dataclass(frozen=True)
class Problem:
    """One analysis warning: a file and line when it names one."""

    message: str
    file: str | None = None
    line: int = 0


def problems(warnings: Iterable[str]) -> list[Problem]:
    """The analysis warnings as problems, in their order."""
    out = []
    for w in warnings:
        m = _FILE_LINE.match(w)
        if m:
            out.append(Problem(m["message"], m["file"], int(m["line"])))
        else:
            out.append(Problem(w))
    return out
