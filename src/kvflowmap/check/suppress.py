"""Inline suppressions: ``# kvflowmap: ignore[rule-id, other-id] -- reason``.

A suppression comment applies to findings on its own line, or, when it is
alone on its line, to findings on the next line. A suppression without a
reason, naming an unknown rule, or suppressing nothing is itself reported
as a ``bad-suppression`` finding."""

from __future__ import annotations

import dataclasses
import difflib
import io
import os
import re
import tokenize
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kvflowmap.check.model import Finding
from kvflowmap.index.readfile import read_regular

BAD_SUPPRESSION = "bad-suppression"
MARKER = re.compile(r"#\s*kvflowmap\s*:\s*ignore\b(?P<rest>.*)$")
BRACKETS = re.compile(r"^\s*\[(?P<ids>[^\]]*)\](?P<tail>.*)$")
MARKER_ANYWHERE = re.compile(r"#\s*kvflowmap\s*:\s*ignore\b")
REASON = re.compile(r"^\s*--(?P<reason>.*)$")
FORM = "# kvflowmap: ignore[rule-id] -- reason"


@dataclass(frozen=True)
class Suppression:
    """One suppression comment. ``own_line``: the comment is alone on its
    line, so it also covers the next line. ``malformed`` explains a comment
    that has the marker but not the expected form."""

    line: int
    column: int
    rule_ids: tuple[str, ...]
    reason: str
    own_line: bool
    malformed: str = ""

    def covers(self, line: int) -> bool:
        """Whether a finding on ``line`` is covered by this comment."""
        return line == self.line or (self.own_line and line == self.line + 1)


def _parse_comment(comment: str, line: int, column: int, own_line: bool) -> Suppression | None:
    """A suppression from one comment's text, or None when it has no marker."""
    m = MARKER.search(comment)
    if not m:
        return None
    col = column + m.start()
    b = BRACKETS.match(m.group("rest"))
    if not b:
        return Suppression(line, col, (), "", own_line, f"names no rule: write `{FORM}`")
    ids = tuple(dict.fromkeys(i.strip() for i in b.group("ids").split(",") if i.strip()))
    r = REASON.match(b.group("tail"))
    reason = r.group("reason").strip() if r else ""
    problem = "" if ids else f"names no rule: write `{FORM}`"
    return Suppression(line, col, ids, reason, own_line, problem)


def _comments_tokenize(text: str) -> list[tuple[str, int, int, bool]]:
    """(comment, line, 1-based column, alone on its line) for every comment token."""
    lines = io.StringIO(text).readlines()  # split exactly as tokenize reads
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            own = row <= len(lines) and not lines[row - 1][:col].strip()
            out.append((tok.string, row, col + 1, own))
    return out


def _comments_regex(text: str) -> list[tuple[str, int, int, bool]]:
    """Fallback for files that do not tokenize: any ``#`` starting the marker."""
    out = []
    for row, line in enumerate(io.StringIO(text).readlines(), 1):
        m = MARKER.search(line)
        if m:
            out.append((line[m.start():], row, m.start() + 1, not line[:m.start()].strip()))
    return out


def parse_suppressions(text: str) -> list[Suppression]:
    """Every suppression comment in a file's source text, in line order.

    Comments are found with :mod:`tokenize`, so the marker inside a string
    does not count; a file that does not tokenize is scanned line by line."""
    if not MARKER_ANYWHERE.search(text):
        return []  # most files: no tokenizing needed
    try:
        comments = _comments_tokenize(text)
    except (tokenize.TokenError, SyntaxError):
        comments = _comments_regex(text)
    found = (_parse_comment(c, row, col, own) for c, row, col, own in comments)
    return [s for s in found if s is not None]


def read_suppressions(abspath: str) -> list[Suppression]:
    """The suppressions of the file at ``abspath``; none if it cannot be read."""
    try:
        data = read_regular(abspath)  # a FIFO named like a source would block an open()
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding, errors="replace")
    except (OSError, SyntaxError, LookupError):
        return []
    return parse_suppressions(text)


def _key(path: str) -> str:
    return os.path.normcase(os.path.realpath(path)) if path else ""


class _Files:
    """Suppressions and display names per file, each file read once."""

    def __init__(self, roots: Mapping[str, str]) -> None:
        self.roots = {label: os.path.realpath(p) for label, p in roots.items()}
        self._sups: dict[str, list[Suppression]] = {}
        self.names: dict[str, tuple[str, str, str]] = {}  # key -> (root, rel, abspath)

    def suppressions(self, key: str) -> list[Suppression]:
        if key not in self._sups:
            self._sups[key] = read_suppressions(key) if key else []
        return self._sups[key]

    def name(self, key: str, abspath: str) -> tuple[str, str, str]:
        """(root label, path relative to it, abspath) for reporting on a file."""
        if key not in self.names:
            self.names[key] = self._relative(key, abspath)
        return self.names[key]

    def _relative(self, key: str, abspath: str) -> tuple[str, str, str]:
        for label, root in sorted(self.roots.items()):
            if key.startswith(root.rstrip(os.sep) + os.sep):
                return label, os.path.relpath(key, root).replace(os.sep, "/"), abspath
        return "", abspath, abspath


def _problem(where: tuple[str, str, str], sup: Suppression, kind: str, rule_id: str,
             message: str) -> Finding:
    root, rel, abspath = where
    return Finding(rule=BAD_SUPPRESSION, severity="warning", message=message, file=rel,
                   line=sup.line, column=sup.column, function="", root=root, abspath=abspath,
                   anchor=f"{rel}|{kind}|{rule_id}")


def _unknown_message(rule_id: str, known: set[str]) -> str:
    close = difflib.get_close_matches(rule_id, sorted(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else "; `kvflowmap rules` lists them"
    return f"suppression names unknown rule {rule_id!r}{hint}"


def _check_comment(where: tuple[str, str, str], sup: Suppression, known: set[str],
                   active: set[str], used: set[str], analysed: bool) -> list[Finding]:
    """The problems of one suppression comment."""
    if sup.malformed:
        return [_problem(where, sup, "malformed", "", f"suppression {sup.malformed}")]
    out = []
    if not sup.reason:
        out.append(_problem(where, sup, "no-reason", ",".join(sup.rule_ids),
                            f"suppression of {', '.join(sup.rule_ids)} gives no reason: "
                            f"add `-- why this is acceptable` after the brackets"))
    for rule_id in sup.rule_ids:
        if rule_id not in known:
            out.append(_problem(where, sup, "unknown", rule_id, _unknown_message(rule_id, known)))
        elif analysed and rule_id in active and rule_id not in used:
            out.append(_problem(where, sup, "unused", rule_id,
                                f"suppression of {rule_id!r} suppresses nothing here: "
                                f"remove it"))
    return out


def _suppress(f: Finding, sup: Suppression) -> Finding:
    return dataclasses.replace(f, suppressed=True, extra=(*f.extra, ("suppression", sup.reason)))


def apply_suppressions(findings: Iterable[Finding], known_rule_ids: Iterable[str],
                       files: Iterable[str] = (), *, roots: Mapping[str, str] | None = None,
                       active_rule_ids: Iterable[str] | None = None,
                       ) -> tuple[list[Finding], list[Finding], list[Finding]]:
    """Split findings by inline suppressions: returns (kept, suppressed, problems).

    ``files``: absolute paths of the files analysed; only their suppressions
    can be reported as suppressing nothing (and only for ids among
    ``active_rule_ids``, the rules that ran; default: all known ids).
    ``roots`` (label -> absolute path) names problem locations relative to
    a root. Suppressed findings carry ``suppressed=True`` and the reason in
    ``extra`` under ``"suppression"``; ``bad-suppression`` findings are never
    suppressed."""
    known = set(known_rule_ids)
    active = known if active_rule_ids is None else set(active_rule_ids)
    table = _Files(roots or {})
    kept: list[Finding] = []
    suppressed: list[Finding] = []
    used: dict[tuple[str, int], set[str]] = {}
    for f in findings:
        key = _key(f.abspath)
        if key:
            table.names.setdefault(key, (f.root, f.file, f.abspath))
        hit = None if f.rule == BAD_SUPPRESSION else next(
            (s for s in table.suppressions(key) if s.covers(f.line) and f.rule in s.rule_ids), None)
        if hit is None:
            kept.append(f)
            continue
        suppressed.append(_suppress(f, hit))
        used.setdefault((key, hit.line), set()).add(f.rule)
    analysed = {_key(p): p for p in files}
    problems: list[Finding] = []
    for key in sorted(set(table.names) | set(analysed)):
        where = table.name(key, analysed.get(key, key))
        for sup in table.suppressions(key):
            problems.extend(_check_comment(where, sup, known, active,
                                           used.get((key, sup.line), set()), key in analysed))
    return kept, suppressed, sorted(problems, key=Finding.sort_key)
