"""Source lines of reported files, read once per report (text and SARIF)."""

from __future__ import annotations

import io
import tokenize

from kvflowmap.index.readfile import read_regular


class SourceLines:
    """Source lines by absolute path, read once; unreadable files give no lines."""

    def __init__(self) -> None:
        self._lines: dict[str, list[str]] = {}

    def lines(self, abspath: str) -> list[str]:
        """Every line of the file ([] when it cannot be read)."""
        if abspath not in self._lines:
            self._lines[abspath] = _read_lines(abspath) if abspath else []
        return self._lines[abspath]

    def line(self, abspath: str, number: int) -> str | None:
        lines = self.lines(abspath) if number >= 1 else []
        return lines[number - 1] if number <= len(lines) else None


def _read_lines(abspath: str) -> list[str]:
    """The file's lines decoded as Python source would be; [] when unreadable."""
    try:
        data = read_regular(abspath)  # a FIFO or device would block an open()
    except OSError:
        return []
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        encoding = "utf-8"
    try:
        text = data.decode(encoding, errors="replace")
    except LookupError:
        text = data.decode("utf-8", errors="replace")
    return text.splitlines()
