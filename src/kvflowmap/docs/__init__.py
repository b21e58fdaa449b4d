"""``kvflowmap docs``: onboarding pages generated from the analysed code.

Every page is a pure function of the :class:`~kvflowmap.api.Analysis` (and
the rules and link settings), so two runs over the same sources give the same
bytes and ``--check`` can tell when committed pages are stale. Pages hold
names, line numbers and log messages of the analysed code, never its source
lines.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DocsOptions", "check_pages", "generate", "write_pages"]


def __getattr__(name: str) -> Any:
    """``DocsOptions``, ``generate``... from ``docs.write``, imported when first
    asked for: importing ``kvflowmap.docs.pagefiles`` (a warm run) does not
    load the page generators and the analysis behind them."""
    if name in __all__:
        from kvflowmap.docs import write

        return getattr(write, name)
    raise AttributeError(f"module 'kvflowmap.docs' has no attribute {name!r}")
