"""What an analysis could not do, as data: a file it could not read or
parse (with its line), or a warning about the protocol. Reports list them so
that a green result with skipped files is visibly partial."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One analysis warning; ``file`` and ``line`` when it is about a file."""

    message: str
    file: str | None = None
    line: int = 0

    @property
    def text(self) -> str:
        """``path:line: message`` for a file, else the message."""
        return f"{self.file}:{self.line}: {self.message}" if self.file else self.message
