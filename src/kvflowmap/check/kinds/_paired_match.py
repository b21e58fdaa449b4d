"""Name patterns and the small syntactic matches ``paired`` makes on text."""

from __future__ import annotations

import fnmatch
import re
from functools import lru_cache

from kvflowmap.index.text import split_commas

_WRAP = re.compile(r"^(list|tuple|sorted|set|reversed|enumerate|zip)\((.*)\)$", re.S)
_KWARG = re.compile(r"^\w+\s*=(?!=)")
_COMP_SOURCE = re.compile(r"\bfor\s+[\w\s,()]+?\s+in\s+(?:reversed\(|sorted\(|list\()?([A-Za-z_][\w.]*)")


@lru_cache(maxsize=256)
def _compiled(patterns: tuple[str, ...]) -> tuple[re.Pattern[str] | None, re.Pattern[str] | None]:
    """(regex for dot-free patterns, regex for dotted ones): one match per list."""
    plain = [fnmatch.translate(p) for p in patterns if "." not in p]
    dotted = [fnmatch.translate(p) for p in patterns if "." in p]
    return (re.compile("|".join(plain)) if plain else None,
            re.compile("|".join(dotted)) if dotted else None)


def call_matches(patterns: tuple[str, ...], callee: str | None, fqns: list[str]) -> bool:
    """A pattern without a dot matches the called name; with a dot, the callee
    chain as written or any resolved fully qualified name."""
    if not callee or not patterns:
        return False
    plain, dotted = _compiled(patterns)
    if plain is not None and plain.match(callee.rpartition(".")[2].rstrip("()")):
        return True
    return dotted is not None and (bool(dotted.match(callee)) or
                                   any(dotted.match(f) for f in fqns))


def chain_matches(patterns: tuple[str, ...], chain: str) -> bool:
    """A pattern without a dot matches the last attribute; with one, the chain."""
    plain, dotted = _compiled(patterns)
    return bool((plain is not None and plain.match(chain.rpartition(".")[2])) or
                (dotted is not None and dotted.match(chain)))


def loop_pairs(target: str, iterable: str) -> list[tuple[str, str]]:
    """Which loop variable takes its items from which expression:
    ``for x in xs`` -> [(x, xs)]; ``for i, (a, b) in enumerate(zip(p, q))``
    -> [(i, ''), (a, p), (b, q)]. Unknown shapes pair nothing."""
    target, iterable = _unparen(target.strip()), iterable.strip()
    m = _WRAP.match(iterable)
    if m and m.group(1) == "enumerate":
        parts = _targets(target)
        args = [a for a in _args(m.group(2)) if not _KWARG.match(a)]
        return [(parts[0], "")] + loop_pairs(parts[1], args[0]) if len(parts) == 2 and args else []
    if m and m.group(1) == "zip":
        parts = [_unparen(p) for p in _targets(target)]
        args = [a for a in _args(m.group(2)) if not _KWARG.match(a)]
        return [(p, a) for p, a in zip(parts, args, strict=True) if "," not in p] if len(parts) == len(args) else []
    if m:
        return loop_pairs(target, m.group(2))
    return [] if "," in target else [(target, iterable)]


def comprehension_sources(text: str) -> set[str]:
    """Names iterated over by comprehensions in ``text``:
    ``[pool.blocks[b] for b in block_ids]`` is made from ``block_ids``."""
    return {m.group(1) for m in _COMP_SOURCE.finditer(text)}


def _unparen(text: str) -> str:
    text = text.strip()
    while text.startswith("(") and text.endswith(")"):
        text = text[1:-1].strip()
    return text


def _targets(text: str) -> list[str]:
    return [t for t in split_commas(text) if t]


def _args(text: str) -> list[str]:
    return [a.strip() for a in split_commas(text) if a.strip()]
