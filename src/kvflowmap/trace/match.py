"""A record to the logging call that wrote it.

First by ``[file.py:LINE]`` against the analysed sources (``exact``: the
file's base name and the line agree and the message fits the call's format).
Otherwise by the format strings (``moved``: the same message from another
line, so the log is from another release), tried only for the calls whose
literal prefix starts the message (grouped by its first word). Otherwise
``unknown``. The placeholders' values come out of the pattern's groups;
request ids are the values of arguments that are request ids by name, or
values shaped like the ids seen so far.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from dataclasses import dataclass

from kvflowmap.trace.code import CodeIndex, Marker
from kvflowmap.trace.formats import (Format, Splitter, compile_format, first_word, id_pattern,
                                     splitter)
from kvflowmap.trace.parse import Record

EXACT, MOVED, UNKNOWN = "exact", "moved", "unknown"
_QUOTED = re.compile(r"'([^']*)'|\"([^\"]*)\"")
# a dict's string key and, when a string, its value: {'k': 'v', 'n': 3}
_PAIR = re.compile(r"""['"]([^'"]*)['"]\s*:\s*(?:'([^']*)'|"([^"]*)")?""")
ID_FIELDS = frozenset({"request_id", "req_id"})  # vLLM's names of a request's id in a record
_SHAPE = re.compile(r"[0-9a-fA-F]{4,}|\d+")
NOT_PLAIN = "[{(sdf'\"N"  # a value starting so may be a collection or None: split_ids reads it
_MAX_SHAPES = 64
_LEARN = 20_000
# A logging call at a place, ready for a message: (call, pattern, whether
# it is the short id pattern, the group holding its one request id (0 when
# it has none or several: ``ids_of`` works them out), the groups of the
# related ids, the values' splitter (``formats.splitter``, None: use the
# pattern) with the positions of the id and the related ids among them)
Exact = tuple[Marker, "re.Pattern[str]", bool, int, tuple[int, ...], "Splitter | None", int,
              tuple[int, ...]]


@functools.lru_cache(maxsize=4096)
def _full(message: str, nargs: int) -> re.Pattern[str]:
    return compile_format(message, nargs).pattern


@dataclass(slots=True)  # not frozen: a frozen __init__ costs a microsecond a line
class Match:
    """How a record was matched: kind, the logging call (None: unknown), the
    pattern's match and the message. With ``partial`` the match is the short
    id pattern's (``formats.id_pattern``); the placeholders' values are then
    taken out only when asked, since most lines need only their request id."""

    kind: str
    marker: Marker | None
    found: re.Match[str] | None = None
    text: str = ""
    partial: bool = False

    @property
    def values(self) -> tuple[str, ...]:
        return values_of(self.marker, self.found, self.partial, self.text)


_GUESS_MISSES = 256  # lines of a marker with no id by shape before it is no longer searched


def values_of(marker: Marker | None, found: re.Match[str] | None, partial: bool,
              text: str) -> tuple[str, ...]:
    """The placeholders' values of a line ``text`` matched by ``marker``'s
    pattern as ``found`` (``partial``: by its short id pattern; None: its
    values were split out by ``formats.split_values``; the full pattern is
    applied now in both cases)."""
    if marker is None:
        return ()
    if found is not None and not partial:
        return found.groups()
    pattern = _full(marker.message, marker.nargs)
    got = pattern.match(text) or pattern.match(text.partition("\n")[0])
    return got.groups() if got is not None else ()


def _shape(value: str) -> str:
    """``cmpl-3f2a91-0`` -> ``cmpl-x-x``: the look of an id without its digits."""
    return _SHAPE.sub("x", value)


def ids_in(found: re.Match[str], groups: tuple[int, ...]) -> list[str]:
    """The ids in the groups ``groups`` of ``found`` (see ``split_ids``)."""
    ids: list[str] = []
    for g in groups:
        v = found.group(g)
        # the common case, one plain id, without split_ids' checks
        ids += [v] if v and v[0] not in NOT_PLAIN else split_ids(v)
    return ids


def split_ids(value: str) -> list[str]:
    """The ids in one placeholder value: itself, or the quoted strings of a
    logged collection (``['a', 'b']``, ``{'a'}``, ``dict_keys(['a'])``); of
    a logged dict, its keys (a dict keyed by request), or, when it has a
    request id field (``{'request_id': 'a', 'engine_id': 'e'}``, a record
    about one request), that field's value."""
    value = value.strip()
    if value[:1] in "[{(" or value.startswith(("dict_keys(", "set(", "frozenset(")):
        if value[:1] == "{" and ":" in value:
            pairs = _PAIR.findall(value)
            if pairs:
                named = [a or b for k, a, b in pairs if k in ID_FIELDS and (a or b)]
                return named or [k for k, _, _ in pairs if k]
        return [a or b for a, b in _QUOTED.findall(value) if a or b]
    return [value] if value and value not in ("None", "''", "[]", "set()") else []


class Matcher:
    """Every logging call of a ``CodeIndex`` precompiled, keyed by (file
    base name, line) for exact matches and by the first word of the literal
    prefix for moved ones."""

    def __init__(self, code: CodeIndex) -> None:
        self.code = code
        self.formats: list[Format] = [compile_format(m.message, m.nargs) for m in code.markers]
        # per call: which groups of its short pattern for exact matches
        # (``id_pattern``, compiled when its place is first met) are the id
        # and the related-id placeholders
        self.id_groups: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
        for m in code.markers:
            keep = self._keep(m)
            self.id_groups.append((tuple(keep.index(i) + 1 for i in m.id_args),
                                   tuple(keep.index(i) + 1 for i in m.related_args)))
        self.by_place: dict[tuple[str, int], list[Marker]] = defaultdict(list)
        by_word: dict[str, list[Marker]] = defaultdict(list)
        self.by_module: dict[str, list[Marker]] = defaultdict(list)
        unkeyed: list[Marker] = []
        for m in code.markers:
            self.by_place[(m.file.rpartition("/")[2], m.line)].append(m)
            self.by_module[m.module].append(m)
            word = first_word(self.formats[m.id].prefix)
            # a prefix that stops inside its first word ("req=%s") keys nothing
            if word and self.formats[m.id].prefix.startswith(word + " "):
                by_word[word].append(m)
            else:
                unkeyed.append(m)

        def order(ms: list[Marker]) -> list[Marker]:
            return sorted(ms, key=lambda m: (-self.formats[m.id].literal_chars, m.id))

        self.by_word = {w: order(ms) for w, ms in by_word.items()}
        self.unkeyed = order(unkeyed)
        # "file:line" as logged (``Header.place``) -> its calls; read directly by
        # the tracer's loop, filled by ``exact_at``
        self.places: dict[str, list[Exact]] = {}
        self.id_shapes: set[str] = set()
        self._learning = _LEARN  # ids whose shapes are learnt; later ones only use them
        # marker -> its lines in a row whose values held no id of a learnt
        # shape (a dict of transfer params logged every step): past
        # _GUESS_MISSES the marker is no longer searched; -1: it named one
        self._guess_misses: dict[int, int] = {}

    def exact_at(self, file: str, line: int) -> list[Exact]:
        """The logging calls at ``[file:LINE]`` as logged, with the pattern
        to try on the message, worked out once per place."""
        place = f"{file}:{line}"
        cands = self.places.get(place)
        if cands is None:
            if len(self.places) > 1 << 16:
                self.places.clear()
            cands = self.places[place] = [
                self._exact(m) for m in self.by_place.get((file.rpartition("/")[2], line), ())]
        return cands

    @staticmethod
    def _keep(m: Marker) -> tuple[int, ...]:
        """The placeholders the short pattern of ``m`` captures."""
        return tuple(sorted({*m.id_args, *m.related_args}))

    def _exact(self, m: Marker) -> Exact:
        keep = self._keep(m)
        fast = id_pattern(m.message, m.nargs, keep)
        if fast is None:
            pattern, partial = self.formats[m.id].pattern, False
            id_at = tuple(i + 1 for i in m.id_args)
            related_at = tuple(i + 1 for i in m.related_args)
        else:
            pattern, partial = fast, True
            id_at, related_at = self.id_groups[m.id]
        n = pattern.groups
        id_group = id_at[0] if len(id_at) == 1 and id_at[0] <= n else 0
        related = tuple(g for g in related_at if g <= n)
        # the values by str.find, for a call with one id (the common line)
        sp = splitter(m.message, m.nargs, max(keep), full=not partial) if id_group else None
        return (m, pattern, partial, id_group, related, sp, m.id_args[0] if sp else 0,
                tuple(i for i in m.related_args if sp and i <= max(keep)))

    def match(self, rec: Record) -> Match:
        """The logging call that wrote ``rec``."""
        msg = rec.message
        if rec.line:
            for m, pattern, partial, *_ in self.exact_at(rec.file, rec.line):
                got = pattern.match(msg)
                if got is None and not partial and "\n" in msg:
                    got = pattern.match(msg.partition("\n")[0])
                if got is not None:
                    return Match(EXACT, m, got, msg, partial)
        return self.elsewhere(rec.line, rec.logger, msg)

    def elsewhere(self, line: int, logger: str, msg: str) -> Match:
        """A message no call at its logged place explains: by the calls of
        its logger's module, then by the format strings (moved), else unknown."""
        found = self._moved(line, logger, msg)
        if found is None and "\n" in msg:  # a traceback after the message
            found = self._moved(line, logger, msg.partition("\n")[0])
        return found or Match(UNKNOWN, None, None, msg)

    def _fit(self, m: Marker, msg: str) -> re.Match[str] | None:
        fmt = self.formats[m.id]
        got = fmt.pattern.match(msg)
        if got is None and "\n" in msg:
            got = fmt.pattern.match(msg.partition("\n")[0])
        return got

    def _moved(self, line: int, logger: str, msg: str) -> Match | None:
        if logger and logger in self.by_module:
            # JSON and plain logging name the module: its calls first
            for m in sorted(self.by_module[logger],
                            key=lambda m: -self.formats[m.id].literal_chars):
                got = self._fit(m, msg)
                if got is not None:
                    return Match(EXACT if not line or line == m.line else MOVED, m, got, msg)
        word = first_word(msg)
        for group in (self.by_word.get(word, ()), self.unkeyed):
            for m in group:
                fmt = self.formats[m.id]
                if not msg.startswith(fmt.prefix):
                    continue
                got = fmt.pattern.match(msg)
                if got is not None:
                    return Match(MOVED, m, got, msg)
        return None

    def request_ids(self, match: Match) -> tuple[list[str], list[str]]:
        """(the request ids a matched line is about, related ids such as a
        remote request's). Arguments named like ids come first; without any,
        values shaped like the ids seen so far."""
        if match.marker is None or match.found is None:
            return [], []
        return self.ids_of(match.marker, match.found, match.partial, match.text)

    @property
    def learning(self) -> bool:
        """Whether id shapes are still learnt (then every id goes through ``ids_of``)."""
        return self._learning > 0

    def ids_of(self, m: Marker, found: re.Match[str], partial: bool,
               text: str) -> tuple[list[str], list[str]]:
        """``request_ids`` of a line matched by ``m``'s pattern (``partial``:
        its short id pattern) as ``found``; ``text`` is the message."""
        if partial:
            id_at, related_at = self.id_groups[m.id]
            if id_at == (1,) and not related_at and not self._learning:
                v = found.group(1)  # the common case: one plain id, nothing related
                return ([v] if v and v[0] not in NOT_PLAIN else split_ids(v)), []
        else:
            id_at = tuple(i + 1 for i in m.id_args)
            related_at = tuple(i + 1 for i in m.related_args)
        n = found.re.groups
        ids: list[str] = []
        for g in id_at:
            if g <= n:
                v = found.group(g)
                # the common case, one plain id, without split_ids' checks
                ids += [v] if v and v[0] not in NOT_PLAIN else split_ids(v)
        related: list[str] = []
        for g in related_at:
            if g <= n:
                v = found.group(g)
                related += [v] if v and v[0] not in NOT_PLAIN else split_ids(v)
        if ids:
            if self._learning:
                self._learning -= 1
                for v in ids:
                    s = _shape(v)
                    if len(v) >= 6 and s != "x" and len(self.id_shapes) < _MAX_SHAPES:
                        self.id_shapes.add(s)  # digits alone are no id shape
        elif self.id_shapes and not m.id_args:
            misses = self._guess_misses.get(m.id, 0)
            if misses >= _GUESS_MISSES:
                return ids, related
            for v in values_of(m, found, partial, text):
                if len(v) < 6:  # no id in it (counts, flags): the common case
                    continue
                for part in split_ids(v):
                    # digits alone are no id shape (see the learning above)
                    if len(part) >= 6 and not part.isdigit() and _shape(part) in self.id_shapes:
                        ids.append(part)
            if misses >= 0:
                self._guess_misses[m.id] = -1 if ids else misses + 1
        return ids, related
