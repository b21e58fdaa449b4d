"""The result of ``graph``, kept light so a reused result loads without LibCST."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GraphResult:
    """What ``graph`` writes, computed once (and reused when nothing changed)."""

    data: bytes
    fmt: str
    note: str
    unresolved: tuple[str, ...]
