"""Baselines: record today's findings so that only new ones fail the check.

A baseline is a JSON file of finding fingerprints (hashes of rule, function
and anchor, never the line), so edits elsewhere in a file do not turn known
findings into new ones."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kvflowmap.check.model import Finding

BASELINE_VERSION = 1


class BaselineError(ValueError):
    """A baseline file that cannot be read; the message names the file."""


def baseline_entries(findings: Iterable[Finding]) -> list[dict[str, str]]:
    """The baseline records of ``findings``: unique, sorted by file, rule,
    function and fingerprint."""
    entries = {(f.file, f.rule, f.function, f.fingerprint, f.message) for f in findings}
    return [{"file": file, "rule": rule, "function": function, "fingerprint": fp,
             "message": message}
            for file, rule, function, fp, message in sorted(entries)]


def write_baseline(path: str | Path, findings: Iterable[Finding]) -> int:
    """Write the baseline of ``findings`` to ``path``; returns the number of entries."""
    entries = baseline_entries(findings)
    doc = {"tool": "kvflowmap", "version": BASELINE_VERSION, "findings": entries}
    text = json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:  # the caller reports it as a usage error naming the path
        raise ValueError(f"cannot write {path} (baseline): {exc.strerror or exc}") from exc
    return len(entries)


def _fail(path: Path, problem: str) -> BaselineError:
    return BaselineError(f"baseline {path}: {problem}; regenerate it with "
                         f"`kvflowmap check --write-baseline {path}`")


def _fingerprints(path: Path, doc: Any) -> set[str]:
    if not isinstance(doc, dict):
        raise _fail(path, "expected a JSON object with 'version' and 'findings'")
    if doc.get("version") != BASELINE_VERSION:
        raise _fail(path, f"unsupported version {doc.get('version')!r} "
                          f"(expected {BASELINE_VERSION})")
    entries = doc.get("findings")
    if not isinstance(entries, list):
        raise _fail(path, "'findings' must be a list")
    out: set[str] = set()
    for i, entry in enumerate(entries):
        fp = entry.get("fingerprint") if isinstance(entry, dict) else None
        if not isinstance(fp, str) or not fp:
            raise _fail(path, f"findings[{i}] has no 'fingerprint' string")
        out.add(fp)
    return out


def load_baseline(path: str | Path) -> set[str]:
    """The fingerprints recorded in the baseline at ``path``.

    Raises :class:`BaselineError` naming the file when it is missing,
    unreadable or malformed."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _fail(path, "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(path, f"cannot read it ({exc})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(path, f"not valid JSON (line {exc.lineno}, column {exc.colno}: "
                          f"{exc.msg})") from None
    return _fingerprints(path, doc)


def filter_new(findings: Iterable[Finding],
               baseline: set[str]) -> tuple[list[Finding], list[Finding]]:
    """Split ``findings`` into (new, known): known ones have a fingerprint in
    ``baseline``. Order is kept."""
    new: list[Finding] = []
    known: list[Finding] = []
    for f in findings:
        (known if f.fingerprint in baseline else new).append(f)
    return new, known
