"""Source text of statements and the small text tests ``paired`` relies on.

The facts keep dotted chains, not whole expressions: ``self.release(tuple(r.lease
for r in results))`` has no argument chain and ``self._owned[k] = lease`` keeps
the key but not the value. To tell whether a statement *mentions* an acquired
value, ``paired`` reads the statement's own source lines (static reading, the
code is never imported) and looks for the name as a whole word.
"""

from __future__ import annotations

import re
from functools import lru_cache

from kvflowmap.facts import Stmt
from kvflowmap.index.extract import LOG_LEVELS
from kvflowmap.index.readfile import read_regular
from kvflowmap.lifecycle.effects import is_logging

_STRING = re.compile(r"""("[^"\\]*(?:\\.[^"\\]*)*"|'[^'\\]*(?:\\.[^'\\]*)*')""")
_ASSIGN = re.compile(r"(?<![=!<>:+\-*/%&|^@])=(?!=)")
MAX_LINES = 60


@lru_cache(maxsize=256)
def _lines(path: str) -> tuple[str, ...]:
    try:
        return tuple(read_regular(path).decode("utf-8", errors="replace").splitlines())
    except OSError:
        return ()


def clear_cache() -> None:
    """Forget cached file contents (tests rewrite files under the same path)."""
    _lines.cache_clear()


def strip_strings(text: str) -> str:
    """``text`` with string literals emptied, so names inside strings and
    brackets inside strings do not count."""
    return _STRING.sub("''", text)


def statement_text(path: str, stmt: Stmt) -> str:
    """The code of ``stmt``: the recorded header text for compound statements,
    the source lines (up to balanced brackets) for simple ones."""
    if stmt.kind in ("if", "while", "for", "with", "except", "case", "assert", "raise"):
        return strip_strings(stmt.text or "")
    lines = _lines(path)
    out: list[str] = []
    depth = 0
    for i in range(stmt.line - 1, min(len(lines), stmt.line - 1 + MAX_LINES)):
        code = strip_strings(lines[i]).split("#", 1)[0]
        out.append(code)
        depth += sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}")
        if depth <= 0 and not code.rstrip().endswith("\\"):
            break
    text = " ".join(s.strip() for s in out)
    if stmt.kind == "return" and not text.lstrip().startswith("return"):
        return strip_strings(stmt.text or "")
    return text


def rhs(text: str) -> str:
    """The right-hand side of an assignment statement (whole text if none)."""
    parts = _ASSIGN.split(text, maxsplit=1)
    return parts[1] if len(parts) == 2 else text


_DECREMENT = re.compile(r"^\s*[\w.()\[\]]+\s*-\s*\d+\s*$")


# Calls whose result still holds their arguments: container builders, record
# copies. Other calls (``len(x)``, ``reconcile(x)``) compute something new.
WRAPPERS = {"tuple", "list", "set", "frozenset", "dict", "sorted", "reversed", "iter", "zip",
            "enumerate", "replace", "copy", "deepcopy", "chain", "from_iterable",
            # container insertions: the container now holds the argument
            "append", "appendleft", "extend", "add", "update", "insert", "setdefault", "put"}


def holding_text(text: str) -> str:
    """``text`` with the arguments of calls that do not hold them removed:
    ``n = len(leases)`` does not make ``n`` a lease, ``t = tuple(leases)`` and
    ``r = Ready(leases)`` (a constructor, capitalised) do."""
    out, i = [], 0
    while i < len(text):
        m = _CALL.search(text, i)
        if m is None:
            out.append(text[i:])
            break
        name = m.group(1).rpartition(".")[2]
        out.append(text[i:m.end()])
        end = _closing(text, m.end() - 1)
        if name in WRAPPERS or name[:1].isupper():
            i = m.end()
            continue
        out.append(")")
        i = end + 1
    return "".join(out)


_CALL = re.compile(r"([A-Za-z_][\w.]*)\s*\(")


def _closing(text: str, open_at: int) -> int:
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] in "([{":
            depth += 1
        elif text[j] in ")]}":
            depth -= 1
            if depth == 0:
                return j
    return len(text) - 1


def is_decrement(text: str) -> bool:
    """``d[k] = n - 1`` / ``d[k] -= 1``: a counted entry is updated, not added."""
    return "-=" in text or bool(_DECREMENT.match(rhs(text)))


def mentions(text: str, names: frozenset[str] | set[str]) -> bool:
    """Whether ``text`` uses any of ``names`` (dotted chains allowed) as a
    whole name, not as part of a longer one (``result`` is not in ``results``)."""
    return any(_word(n).search(text) for n in names)


@lru_cache(maxsize=4096)
def _word(name: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w.])" + re.escape(name) + r"(?!\w)")


def split_top(text: str, op: str) -> list[str]:
    """Split a test on a top-level boolean operator (`` and `` / `` or ``)."""
    parts, depth, start, i = [], 0, 0, 0
    sep = f" {op} "
    while i < len(text):
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            start = i + len(sep)
            i = start
            continue
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


# ``fd < 0`` / ``fd >= 0``: a file descriptor's sentinel (-1) holds nothing.
_EMPTY = (re.compile(r"^not\s+(?P<n>[\w.]+)$"), re.compile(r"^(?P<n>[\w.]+)\s+is\s+None$"),
          re.compile(r"^(?P<n>[\w.]+)\s*==\s*None$"), re.compile(r"^len\((?P<n>[\w.]+)\)\s*==\s*0$"),
          re.compile(r"^(?P<n>[\w.]+)\s*(<\s*0|==\s*-1)$"))
_FULL = (re.compile(r"^(?P<n>[\w.]+)$"), re.compile(r"^(?P<n>[\w.]+)\s+is\s+not\s+None$"),
         re.compile(r"^(?P<n>[\w.]+)\s*!=\s*None$"), re.compile(r"^len\((?P<n>[\w.]+)\)$"),
         re.compile(r"^(?P<n>[\w.]+)\s*(>=\s*0|!=\s*-1)$"),
         # false: the name was never bound, so it holds nothing
         re.compile(r"^[\"'](?P<n>\w+)[\"']\s+in\s+(locals|globals|vars)\(\)$"))


def emptiness(test: str) -> tuple[set[str], set[str]]:
    """Names a test proves empty on its true edge and on its false edge.

    ``x is None`` / ``not x``: x is empty when true. ``x`` / ``x is not None``:
    x is empty when false. ``a and b`` passes on the true edge what each
    conjunct proves and on the false edge what every conjunct's falsity
    proves; ``a or b`` the other way round; anything else proves nothing."""
    test = test.strip()
    if test.startswith("(") and test.endswith(")"):
        test = test[1:-1].strip()
    conj, disj = split_top(test, "and"), split_top(test, "or")
    if len(conj) > 1:
        # false: some conjunct is false, so only what each one's falsity proves
        # (``"x" in locals() and x is not None``)
        parts = [emptiness(c) for c in conj]
        return set().union(*(t for t, _ in parts)), set.intersection(*(f for _, f in parts))
    if len(disj) > 1:
        parts = [emptiness(d) for d in disj]
        return set.intersection(*(t for t, _ in parts)), set().union(*(f for _, f in parts))
    true = {m.group("n") for p in _EMPTY if (m := p.match(test))}
    false = {m.group("n") for p in _FULL if (m := p.match(test))}
    return true - {"True", "False"}, false - {"True", "False"}


def is_log_call(callee: str | None) -> bool:
    """``logger.debug(...)``, ``self._log.info(...)``, ``print``: a level
    method (the index's ``LOG_LEVELS``) on what ``lifecycle`` reads as a
    logger."""
    if not callee:
        return False
    return callee == "print" or (callee.rpartition(".")[2] in LOG_LEVELS and is_logging(callee))
