"""Plain data for rules and findings."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SEVERITIES = ("note", "warning", "error")


def severity_rank(severity: str) -> int:
    """note < warning < error."""
    return SEVERITIES.index(severity)


@dataclass(frozen=True)
class Example:
    """Code a rule must flag (bad) or accept (good). ``files`` maps module
    paths to sources; a single-file example is ``{"example.py": code}``."""

    kind: str  # bad | good
    files: dict[str, str]
    note: str = ""


@dataclass(frozen=True)
class AppliesTo:
    """Which classes/modules a rule looks at. Empty means everything analysed
    as subject. ``base_class``: subclasses (transitively) of these FQNs."""

    base_class: tuple[str, ...] = ()
    classes: tuple[str, ...] = ()  # fnmatch on class FQNs
    modules: tuple[str, ...] = ()  # fnmatch on module names
    include_context: bool = False  # also look at --context/--release code


@dataclass(frozen=True)
class Rule:
    """One rule file."""

    id: str
    title: str
    severity: str
    rationale: str
    kind: str
    params: dict[str, Any]
    applies_to: AppliesTo
    examples: tuple[Example, ...]
    help: str
    pack: str
    path: Path
    line: int = 1
    # The kind's ``Options`` built from ``params`` by the loader (None for a
    # rule made in code: the engine builds them when it runs the rule).
    options: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Step:
    """One step of the path that explains a finding."""

    file: str
    line: int
    function: str
    note: str


@dataclass(frozen=True)
class Finding:
    """A rule violation at one place, with the path that explains it.

    ``anchor`` is what the fingerprint hashes besides rule and function: a
    stable description of the site (e.g. the container and key), never a
    line number, so unrelated edits do not change it."""

    rule: str
    severity: str
    message: str
    file: str  # relative to its root
    line: int
    column: int
    function: str
    root: str = ""
    abspath: str = ""  # absolute path, for source lines and suppressions
    path: tuple[Step, ...] = ()
    anchor: str = ""
    suppressed: bool = False
    extra: tuple[tuple[str, str], ...] = field(default=())

    @property
    def fingerprint(self) -> str:
        key = "\0".join((self.rule, self.function, self.anchor or self.message))
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    def sort_key(self) -> tuple:
        return (self.root, self.file, self.line, self.column, self.rule, self.message)


@dataclass
class CheckOutcome:
    """What ``kvflowmap check`` reports and how it exits."""

    findings: list[Finding]  # reported: not suppressed, not in the baseline
    suppressed: list[Finding] = field(default_factory=list)
    known: list[Finding] = field(default_factory=list)  # matched the baseline

    def exit_code(self, fail_on: str) -> int:
        """1 when a reported finding is at or above ``fail_on``."""
        worst = max((severity_rank(f.severity) for f in self.findings), default=-1)
        return 1 if worst >= severity_rank(fail_on) else 0
