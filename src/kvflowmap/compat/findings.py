"""The result of ``compat``: per connector class and release, a cell with
its status and the findings that explain it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Status of a cell, worst last: the order ``status`` picks from.
STATUSES = ("ok", "guarded", "warn", "fail")
_VERSION = re.compile(r"\d+\.\d+(\.\d+)*")
_OF_SEVERITY = {"error": "fail", "warning": "warn", "guarded": "guarded", "note": "ok"}


@dataclass(frozen=True)
class Finding:
    """One way a connector class fits (or does not fit) one release."""

    cls: str  # FQN of the connector class
    release: str  # vLLM version
    severity: str  # error | warning | note | guarded
    kind: str  # signature | annotation | removed-member | abstract | not-called | ...
    message: str
    where: str  # connector file:line
    base_where: str | None = None  # release file:line

    def to_json(self) -> dict:
        """A JSON-ready dict."""
        return {"class": self.cls, "release": self.release, "severity": self.severity,
                "kind": self.kind, "message": self.message, "where": self.where,
                "base_where": self.base_where}


@dataclass
class Cell:
    """One connector class on one release."""

    cls: str
    release: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def status(self) -> str:
        """ok | guarded | warn | fail: the worst of its findings."""
        worst = 0
        for f in self.findings:
            worst = max(worst, STATUSES.index(_OF_SEVERITY.get(f.severity, "ok")))
        return STATUSES[worst]


@dataclass
class Matrix:
    """Connector classes × releases."""

    releases: list[str]
    classes: list[str]
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)

    def cell(self, cls: str, release: str) -> Cell:
        """The cell of ``cls`` on ``release`` (made empty on first use)."""
        return self.cells.setdefault((cls, release), Cell(cls, release))

    def findings(self, release: str | None = None) -> list[Finding]:
        """All findings, or those of one release, in a stable order."""
        return [f for k in self.classes for r in self.releases if release in (None, r)
                for f in self.cell(k, r).findings]

    def to_json(self) -> dict:
        """A JSON-ready dict: releases, classes, and per class the status and
        findings of each release."""
        return {"releases": self.releases,
                "classes": {k: {r: {"status": self.cell(k, r).status,
                                    "findings": [f.to_json() for f in self.cell(k, r).findings]}
                                for r in self.releases} for k in self.classes}}

    def grouped(self, severities: tuple[str, ...]) -> list[list[Finding]]:
        """Findings of these severities, the same finding on several releases
        as one group (same class, kind, place and message but for versions),
        in the order of the matrix."""
        groups: dict[tuple[str, str, str, str], list[Finding]] = {}
        for k in self.classes:
            for r in self.releases:
                for f in self.cell(k, r).findings:
                    if f.severity in severities:
                        key = (k, f.kind, f.where, _VERSION.sub("", f.message))
                        groups.setdefault(key, []).append(f)
        return list(groups.values())
