"""Every rule starts from the same analysis state.

The evaluator, the call resolver and the model memoise what they compute,
and a memo filled while a cycle is being evaluated (``a = b`` ... ``b = a``)
keeps what the cycle guard saw at the time: what a later question gets can
depend on what was asked before. So that a rule's findings never depend on
which rules ran before it in the same process -- and rules can run in
parallel processes with the same result as one after the other -- each rule
runs on the memos as linking left them.
"""

from __future__ import annotations


class MemoSnapshot:
    """The linker's memos as they are now, restorable after each rule."""

    def __init__(self, linker) -> None:
        self._memos: list[dict] = [linker.values._memo, linker.values._self_memo,
                                   linker.calls._memo, linker.model._lookup_memo,
                                   linker.model._star_memo, linker.classes._mro]
        self._saved = [dict(m) for m in self._memos]

    def restore(self) -> None:
        """Put every memo back as it was when the snapshot was taken."""
        for memo, saved in zip(self._memos, self._saved, strict=True):
            if len(memo) != len(saved):  # memos only grow: same size, same content
                memo.clear()
                memo.update(saved)
