"""Memos whose answers do not depend on the order of queries.

Evaluating a value can ask for itself again (``a = b`` ... ``b = a``, an
import cycle, a class hierarchy that loops). The inner query gets a default
(nothing) to stop the cycle. An answer computed while such a query was in
progress further up the stack is partial: stored, it would make a later
question's answer depend on what was asked first. So it is not stored; the
outermost query of the cycle stores its (complete) answer, and the inner
ones are computed again when they are asked on their own. A query cut short
by a depth limit is partial the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

V = TypeVar("V")
_MISSING = object()
_TOP = 1 << 62


class CycleGuard:
    """The queries in progress, shared by memos whose computations call each other."""

    def __init__(self) -> None:
        self._onstack: dict[Hashable, int] = {}
        self._low = _TOP  # the lowest stack position the current query read

    def cut(self) -> None:
        """The current query's answer is partial (a depth limit was hit)."""
        self._low = -1

    def memoised(self, memo: dict, key: Hashable, compute: Callable[[], V], default: V,
                 tag: str = "") -> V:
        """``memo[key]``, computing it with ``compute()`` when missing. Within
        a cycle the repeated query gets ``default``. ``tag`` tells apart the
        keys of different memos sharing this guard."""
        found = memo.get(key, _MISSING)
        if found is not _MISSING:
            return found  # type: ignore[no-any-return]
        at = self._onstack.get((tag, key))
        if at is not None:  # in progress further up: a cycle
            self._low = min(self._low, at)
            return default
        here = self._onstack[(tag, key)] = len(self._onstack)
        outer_low, self._low = self._low, _TOP
        try:
            result = compute()
        finally:
            del self._onstack[(tag, key)]
        if self._low >= here:  # read nothing in progress below it (itself at most)
            memo[key] = result
            self._low = outer_low
        else:
            self._low = min(outer_low, self._low)
        return result
