"""Fewer garbage collections while a run builds millions of small objects.

A LibCST tree and the linked model are large object graphs that reference
counting frees (or that live to the end of the run); CPython's cyclic
collector walks them again and again without finding anything to free.
Measured: 9% off indexing in pool workers, linking and rules 1.5x faster
with it paused in the main process.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager

# A pool worker holds one file's tree at a time; the few cycles left (LibCST
# internals) are collected between files every this many files instead of
# during parsing, so worker memory stays flat.
COLLECT_EVERY = 50


class BetweenFiles:
    """The collector off, and run every ``COLLECT_EVERY`` files instead
    (``after_file`` is called by the worker after each file)."""

    def __init__(self) -> None:
        gc.disable()
        self.files = 0

    def after_file(self) -> None:
        self.files += 1
        if self.files % COLLECT_EVERY == 0:
            gc.collect()


@contextmanager
def collector_paused():
    """No cyclic collection during a block (a command run from the console):
    the model, graph and rule state are built once and kept to the end. The
    few cycles made are freed after the block, or never if the process exits
    first (measured peak on all of vLLM: 1.7 GiB, as with the collector on)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
