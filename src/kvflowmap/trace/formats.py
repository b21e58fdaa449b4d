"""A logging call's format string as a regular expression.

``%s``/``%r``/``%d``/``%.2f`` (printf style, as ``logging`` applies it) and
``{}`` (the parts of an f-string, as the indexer records them; ``{name}`` of a
``str.format`` call) become capture groups, so a line written by another
release of the same code still matches. The literal text before the first
placeholder is the pattern's *prefix*: the matcher groups patterns by it so
that one line is tried against a few patterns, not all of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# printf-style conversion, as ``%``-formatting accepts it
_PRINTF = re.compile(r"%(?:\((?P<key>[^)]*)\))?[#0\- +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?"
                     r"(?P<conv>[diouxXeEfFgGcrsa%])")
_BRACES = re.compile(r"\{\{|\}\}|\{[^{}]*\}")

_GROUP = {
    "d": r"([-+]?\d+)", "i": r"([-+]?\d+)", "u": r"([-+]?\d+)",
    "o": r"([-+]?[0-7]+)", "x": r"([-+]?[0-9a-f]+)", "X": r"([-+]?[0-9A-F]+)",
    "e": r"([-+]?(?:[\d.]+(?:e[-+]?\d+)?|inf|nan))", "E": r"([-+]?(?:[\d.]+(?:E[-+]?\d+)?|INF|NAN))",
    "f": r"([-+]?(?:[\d.]+|inf|nan))", "F": r"([-+]?(?:[\d.]+|INF|NAN))",
    "g": r"([-+]?(?:[\d.]+(?:e[-+]?\d+)?|inf|nan))", "G": r"([-+]?(?:[\d.]+(?:E[-+]?\d+)?|INF|NAN))",
    "c": r"(.)",
}
_ANY = r"(.*?)"  # %s, %r, %a, {}: anything, as short as the literals after it allow


@dataclass(frozen=True)
class Format:
    """A format string compiled: its pattern, literal prefix and placeholder count."""

    pattern: re.Pattern[str]
    prefix: str  # literal text before the first placeholder
    placeholders: int
    literal_chars: int  # how much fixed text it has: more is a more specific match


def printf_style(message: str) -> bool:
    """Whether ``message`` has a ``%`` conversion (then ``{}`` is literal text)."""
    return any(m.group("conv") != "%" for m in _PRINTF.finditer(message))


def compile_format(message: str, nargs: int = -1) -> Format:
    """The pattern of a logging call's message. ``nargs`` is the number of
    arguments after the message (-1: unknown); with none, ``logging`` prints
    the message as written, ``%`` included."""
    parts: list[str] = []
    literal: list[str] = []
    prefix: str | None = None
    count = 0
    pos = 0
    if nargs != 0 and printf_style(message):
        tokens = _PRINTF
    elif "{" in message:
        tokens = _BRACES
    else:
        tokens = None
    if tokens is not None:
        for m in tokens.finditer(message):
            text = message[pos:m.start()]
            tok = m.group(0)
            if tok in ("%%", "{{", "}}"):
                text += tok[0]
                parts.append(re.escape(text))
                literal.append(text)
                pos = m.end()
                continue
            parts.append(re.escape(text))
            literal.append(text)
            if prefix is None:
                prefix = "".join(literal)
            conv = m.groupdict().get("conv") if tokens is _PRINTF else None
            parts.append(_GROUP.get(conv or "s", _ANY))
            count += 1
            pos = m.end()
    tail = message[pos:]
    literal.append(tail)
    # Trailing blanks are often lost (a stripped line, an editor): optional.
    parts.append(re.escape(tail.rstrip()) + r"\s*\Z")
    fixed = "".join(literal)
    return Format(re.compile("".join(parts), re.DOTALL), fixed if prefix is None else prefix,
                  count, len(fixed.strip()))


def first_word(text: str) -> str:
    """The first whitespace-separated word of ``text`` (empty when none):
    the key the matcher groups patterns by."""
    parts = text.split(None, 1)
    return parts[0] if parts else ""
