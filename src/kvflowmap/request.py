"""What to analyse and how: plain data, cheap to import (no LibCST, no networkx)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kvflowmap.protocol import DEFAULT_PROTOCOL
from kvflowmap.sources.roots import Root, merge_roots, root_for



@dataclass
class Request:
    """What to analyse and how."""

    sources: Sequence[str] = ()
    context: Sequence[str] = ()
    release_roots: Sequence[tuple[Path, str]] = ()  # (import root, label)
    exclude: Sequence[str] = ()
    all_files: bool = False
    cache_dir: Path | None = None
    use_cache: bool = True
    jobs: int | None = None
    protocol_path: Path = DEFAULT_PROTOCOL


def make_roots(req: Request) -> list[Root]:
    """Subject roots first (they win module-name clashes), then context."""
    ex = tuple(req.exclude)
    roots = merge_roots([root_for(s, subject=True, exclude=ex) for s in req.sources])
    roots += [root_for(s, subject=False, exclude=ex) for s in req.context]
    roots += [root_for(str(p), subject=False, label=label, exclude=ex)
              for p, label in req.release_roots]
    return roots
