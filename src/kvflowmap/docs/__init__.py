"""``kvflowmap docs``: onboarding pages generated from the analysed code.

Every page is a pure function of the :class:`~kvflowmap.api.Analysis` (and
the rules and link settings), so two runs over the same sources give the same
bytes and ``--check`` can tell when committed pages are stale. Pages hold
names, line numbers and log messages of the analysed code, never its source
lines.
"""

from kvflowmap.docs.write import DocsOptions, check_pages, generate, write_pages

__all__ = ["DocsOptions", "check_pages", "generate", "write_pages"]
