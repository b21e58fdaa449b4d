"""Errors raised while locating or reading the code to analyse."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


class SourceError(Exception):
    """A source (path, installed distribution, release, config) is unusable.

    The message is written for the user: it says what was asked for, what went
    wrong and, where possible, what to do about it.
    """


class ConfigError(SourceError):
    """``[tool.kvflowmap]`` in a pyproject.toml is invalid.

    ``errors`` holds every problem found, so callers (and tests) need not parse
    the message; the message lists them all at once.
    """

    def __init__(self, message: str, *, path: Path | None = None,
                 errors: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.path = path
        self.errors = tuple(errors)
