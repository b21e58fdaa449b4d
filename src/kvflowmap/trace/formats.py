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
from functools import cached_property

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

    source: str  # the pattern's text
    prefix: str  # literal text before the first placeholder
    placeholders: int
    literal_chars: int  # how much fixed text it has: more is a more specific match

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        """The compiled pattern, compiled when first used: a run meets a few
        dozen of the hundreds of logging calls, and compiling all of them
        took a quarter of a second."""
        return re.compile(self.source, re.DOTALL)


def conversions(message: str) -> list[str]:
    """The printf conversions of ``message`` in order (``s``, ``d``, ``%``...)."""
    return [m.group("conv") for m in _PRINTF.finditer(message)]


def printf_style(message: str) -> bool:
    """Whether ``message`` has a ``%`` conversion (then ``{}`` is literal text)."""
    return any(m.group("conv") != "%" for m in _PRINTF.finditer(message))


def _tokens(message: str, nargs: int) -> tuple[list[str], list[str]]:
    """(literals, conversions): ``len(literals) == len(conversions) + 1``;
    literal i precedes placeholder i (``%%``, ``{{`` already unescaped)."""
    if nargs != 0 and printf_style(message):
        tokens: re.Pattern[str] | None = _PRINTF
    elif "{" in message:
        tokens = _BRACES
    else:
        tokens = None
    literals: list[str] = []
    convs: list[str] = []
    text = ""
    pos = 0
    if tokens is not None:
        for m in tokens.finditer(message):
            text += message[pos:m.start()]
            tok = m.group(0)
            pos = m.end()
            if tok in ("%%", "{{", "}}"):
                text += tok[0]
                continue
            literals.append(text)
            text = ""
            convs.append((m.groupdict().get("conv") if tokens is _PRINTF else None) or "s")
    literals.append(text + message[pos:])
    return literals, convs


def compile_format(message: str, nargs: int = -1) -> Format:
    """The pattern of a logging call's message. ``nargs`` is the number of
    arguments after the message (-1: unknown); with none, ``logging`` prints
    the message as written, ``%`` included."""
    literals, convs = _tokens(message, nargs)
    parts: list[str] = []
    for lit, conv in zip(literals, convs[:len(literals)], strict=False):
        parts += [re.escape(lit), _GROUP.get(conv, _ANY)]
    # Trailing blanks are often lost (a stripped line, an editor): optional.
    parts.append(re.escape(literals[-1].rstrip()) + r"\s*\Z")
    fixed = "".join(literals)
    return Format("".join(parts), literals[0] if convs else fixed, len(convs), len(fixed.strip()))


def id_pattern(message: str, nargs: int, keep: tuple[int, ...]) -> re.Pattern[str] | None:
    """A shorter pattern for a line already placed by file and line: it
    captures only the placeholders ``keep`` (the request ids) and stops
    after the text that follows the last of them, so the rest of a long
    message is not scanned. None when that text is empty (the full pattern
    is needed to bound the value)."""
    literals, convs = _tokens(message, nargs)
    last = max(keep) if keep else -1
    if last >= len(convs):
        return None
    parts = [re.escape(literals[0])]
    for i in range(last + 1):
        group = _GROUP.get(convs[i], _ANY)
        parts.append(group if i in keep else "(?:" + group[1:])
        parts.append(re.escape(literals[i + 1]))
    if last >= 0 and not literals[last + 1].strip():
        return None
    return re.compile("".join(parts), re.DOTALL)


def first_word(text: str) -> str:
    """The first whitespace-separated word of ``text`` (empty when none):
    the key the matcher groups patterns by."""
    parts = text.split(None, 1)
    return parts[0] if parts else ""


# (literal prefix, its length, the literal after each placeholder up to the
# last one taken (None for the last: it runs to the end of the message),
# the placeholders that must be whole numbers): see ``splitter``
Splitter = tuple[str, int, tuple[str | None, ...], tuple[int, ...]]
_STRING = frozenset("sra")
_INTEGER = frozenset("diu")


def splitter(message: str, nargs: int, upto: int, full: bool) -> Splitter | None:
    """The values of a message's placeholders 0..``upto`` taken out with
    ``str.startswith``/``str.find`` instead of a regular expression: each
    value runs to the first occurrence of the literal after it (``full``:
    the last runs to the end of the message, trailing blanks dropped). That
    is the answer the pattern (``id_pattern``, or the full one when
    ``full``) gives whenever this way finds one: its groups are lazy, so
    the pattern takes the first occurrence of each literal that lets the
    rest match, and this way tries only the first, failing (the caller then
    asks the pattern) where the pattern might go on. None when it cannot
    stand in: a placeholder that is neither a string nor a whole number, an
    empty literal between two values, or one that starts like a number."""
    literals, convs = _tokens(message, nargs)
    if upto < 0 or upto >= len(convs):
        return None
    if full and (upto != len(convs) - 1 or literals[-1].strip()):
        return None
    seps: list[str | None] = []
    digits: list[int] = []
    for i in range(upto + 1):
        conv = convs[i]
        if conv in _INTEGER:
            digits.append(i)
        elif conv not in _STRING:
            return None
        if full and i == upto:
            seps.append(None)
            continue
        sep = literals[i + 1]
        if not sep or sep[0] in "+-0123456789" or (full and i == upto):
            return None
        seps.append(sep)
    return literals[0], len(literals[0]), tuple(seps), tuple(digits)


def split_values(sp: Splitter, msg: str) -> list[str] | None:
    """The values ``sp`` (``splitter``) takes out of ``msg``; None when
    this way finds none (the pattern may still)."""
    prefix, pos, seps, digits = sp
    if not msg.startswith(prefix):
        return None
    vals = []
    for sep in seps:
        if sep is None:
            vals.append(msg[pos:].rstrip())
            break
        j = msg.find(sep, pos)
        if j < 0:
            return None
        vals.append(msg[pos:j])
        pos = j + len(sep)
    for i in digits:
        v = vals[i]
        if not (v.isdecimal() or (v[:1] in "+-" and v[1:].isdecimal())):
            return None
    return vals
