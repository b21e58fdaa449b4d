"""``formats.splitter``: where it gives values, they are the pattern's (the
short id pattern's, or the full one's), on messages built to trip it
(separators inside values, numbers that are not, blanks at the end)."""

from __future__ import annotations

import random

import pytest

from kvflowmap.trace.formats import compile_format, id_pattern, split_values, splitter

CASES = [  # (format, nargs, placeholders kept)
    ("[X] D queued req=%s remote_req=%s url=%s rank=%d", 4, (0, 1)),
    ("[X] chunk req=%s n=%d target=%s done", 3, (0, 2)),
    ("%s is still in WAITING state.", 1, (0,)),
    ("Finished recving KV transfer for request %s", 1, (0,)),
    ("req %r took %d ms", 2, (0,)),
    ("finished {} after {} steps", 2, (0,)),
]
PIECES = ["cmpl-1", "a b", "x remote_req=y", " ", "", "12", "-3", "+4", "1.5", "٣", "²", "\n tb",
          "url=", " rank=", "done", "ms", " after ", " steps", "state.", "'q'"]


def _messages(fmt: str, n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    literals = [p for p in fmt.replace("%s", "\0").replace("%d", "\0").replace("%r", "\0")
                .replace("{}", "\0").split("\0")]
    out = []
    for _ in range(n):
        parts = [literals[0]]
        for lit in literals[1:]:
            parts += ["".join(rnd.choice(PIECES) for _ in range(rnd.randint(0, 3))), lit]
        msg = "".join(parts)
        if rnd.random() < 0.2:
            msg += rnd.choice(["  ", " tail", "\nTraceback", ""])
        out.append(msg)
    return out


@pytest.mark.parametrize(("fmt", "nargs", "keep"), CASES)
def test_split_values_are_the_patterns_groups(fmt: str, nargs: int, keep: tuple[int, ...]) -> None:
    short = id_pattern(fmt, nargs, keep)
    full = short is None
    pattern = compile_format(fmt, nargs).pattern if full else short
    assert pattern is not None
    sp = splitter(fmt, nargs, max(keep), full=full)
    assert sp is not None
    agreed = split = 0
    for msg in _messages(fmt, 3000, sum(map(ord, fmt))):
        got = pattern.match(msg)
        vals = split_values(sp, msg)
        if vals is None:
            continue  # the pattern is asked then
        split += 1
        assert got is not None, msg
        # the full pattern has a group per placeholder, the short one per kept one
        assert (vals if full else [vals[i] for i in keep]) == list(got.groups()), msg
        agreed += 1
    assert split > 100 and agreed == split  # the messages do reach the values


def test_what_the_splitter_does_not_stand_in_for() -> None:
    assert splitter("a %s b %.2f c %s d", 3, 2, full=False) is None  # a float before the id
    assert splitter("a %s%s b", 2, 1, full=False) is None  # nothing between two values
    assert splitter("a %d5 b %s c", 2, 1, full=False) is None  # a literal that starts like a number
    assert splitter("a %s b", 1, 0, full=True) is None  # text after the last value: not full
    assert splitter("a %s b %s", 2, 0, full=True) is None  # a value after the one kept
    sp = splitter("req=%s n=%d x", 2, 1, full=False)
    assert sp is not None
    assert split_values(sp, "req=r1 n=12 x") == ["r1", "12"]
    assert split_values(sp, "req=r1 n=1a x") is None  # not a number: the pattern decides
    assert split_values(sp, "other") is None
