"""``--format json``: findings and a summary as one deterministic JSON document."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from kvflowmap.check.model import SEVERITIES, Finding, Step
from kvflowmap.problems import Problem


def ordered(findings: Iterable[Finding]) -> list[Finding]:
    """Findings in report order: root, file, line, column, rule, message."""
    return sorted(findings, key=Finding.sort_key)


def summarize(findings: Iterable[Finding]) -> dict[str, Any]:
    """``{"total", "by_severity", "by_rule"}``; every severity is listed, even at 0."""
    items = list(findings)
    by_severity = {s: 0 for s in SEVERITIES}
    by_severity.update(Counter(f.severity for f in items))
    by_rule = dict(sorted(Counter(f.rule for f in items).items()))
    return {"total": len(items), "by_severity": by_severity, "by_rule": by_rule}


def step_dict(step: Step) -> dict[str, Any]:
    """One path step as plain data."""
    return {"file": step.file, "line": step.line, "function": step.function, "note": step.note}


def finding_dict(f: Finding) -> dict[str, Any]:
    """One finding as plain data (the keys of the JSON format, plus ``root``)."""
    return {
        "rule": f.rule, "severity": f.severity, "message": f.message,
        "file": f.file, "line": f.line, "column": f.column, "function": f.function,
        "root": f.root, "path": [step_dict(s) for s in f.path], "fingerprint": f.fingerprint,
    }


def render_json(findings: Iterable[Finding], extra_summary: Mapping[str, Any] | None = None,
                problems: Iterable[Problem] = ()) -> str:
    """The JSON report: ``{"findings": [...], "errors": [...], "summary": {...}}``
    with sorted keys.

    ``extra_summary`` is merged into the summary (e.g. counts of suppressed or
    baseline findings); it cannot replace ``total``, ``by_severity`` or
    ``by_rule``. ``errors`` lists what the analysis could not read or parse
    (``problems``), so a green report with skipped files is visibly partial."""
    items = ordered(findings)
    summary = dict(extra_summary or {})
    summary.update(summarize(items))
    errors = [{"file": p.file, "line": p.line, "message": p.message} for p in problems]
    doc = {"findings": [finding_dict(f) for f in items], "errors": errors, "summary": summary}
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
