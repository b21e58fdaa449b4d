"""``--format sarif``: SARIF 2.1.0 for code-scanning services and IDEs.

One run; ``tool.driver`` carries the rule metadata; each result has its
location relative to a named root (``originalUriBaseIds``), the enclosing
function as a logical location, the explaining path as a ``codeFlow`` and
the stable fingerprint in ``partialFingerprints``."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from kvflowmap import __version__
from kvflowmap.check.model import Finding, Rule, Step
from kvflowmap.problems import Problem
from kvflowmap.report.json_out import ordered
from kvflowmap.report.sources import SourceLines
from kvflowmap.report.step_roots import step_root

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = ("https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/"
                "sarif-schema-2.1.0.json")
# Where people learn about the tool; replace when the project has a public home.
INFORMATION_URI = "https://github.com/kvflowmap/kvflowmap"
FINGERPRINT_KEY = "kvflowmap/v1"
LINE_HASH_KEY = "primaryLocationLineHash"  # GitHub matches results across commits by it
MAX_DESCRIPTION = 1024  # GitHub's limit on a rule's fullDescription
LEVELS = {"error": "error", "warning": "warning", "note": "note"}

# Rule ids the tool itself reports, which no rule file declares.
BUILTIN_RULES = {
    "internal-error": ("A rule failed on a file", "error",
                       "A rule kind raised an exception; the run went on without its result "
                       "for this file. Please report it with the message."),
    "bad-suppression": ("Malformed or useless inline suppression", "warning",
                        "A `# kvflowmap: ignore[rule-id] -- reason` comment must name known "
                        "rules, give a reason and suppress a finding."),
}


def _text(value: str, fallback: str) -> str:
    return value.strip() or fallback


def rule_name(title: str, rule_id: str) -> str:
    """SARIF's human rule name, not the id: the title in UpperCamelCase
    (``The probe is a probe`` -> ``TheProbeIsAProbe``)."""
    words = re.findall(r"[A-Za-z0-9]+", title) or re.findall(r"[A-Za-z0-9]+", rule_id)
    return "".join(w[:1].upper() + w[1:] for w in words) or rule_id


def _shortened(text: str, limit: int = MAX_DESCRIPTION) -> str:
    """``text`` cut at a word boundary to at most ``limit`` characters."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return text[:limit - 1].rsplit(" ", 1)[0] + "…"


def rule_descriptor(rule: Rule) -> dict[str, Any]:
    """A ``reportingDescriptor`` for one rule file."""
    help_text = _text(rule.help, rule.title)
    markdown = f"**{rule.title}**\n\n{_text(rule.rationale, rule.title)}\n\n{help_text}"
    return {
        "id": rule.id,
        "name": rule_name(rule.title, rule.id),
        "shortDescription": {"text": _text(rule.title, rule.id)},
        "fullDescription": {"text": _shortened(_text(rule.rationale, rule.title or rule.id))},
        "help": {"text": help_text or rule.id, "markdown": markdown},
        "defaultConfiguration": {"level": LEVELS.get(rule.severity, "warning")},
        "properties": {"tags": sorted({t for t in (rule.pack, rule.kind) if t})},
    }


def _builtin_descriptor(rule_id: str, severity: str) -> dict[str, Any]:
    title, level, text = BUILTIN_RULES.get(rule_id, (rule_id, severity, rule_id))
    return {
        "id": rule_id, "name": rule_name(title, rule_id),
        "shortDescription": {"text": title}, "fullDescription": {"text": _shortened(text)},
        "help": {"text": text, "markdown": text},
        "defaultConfiguration": {"level": LEVELS.get(level, "warning")},
        "properties": {"tags": ["kvflowmap"]},
    }


def _descriptors(rules: Iterable[Rule], findings: list[Finding]) -> list[dict[str, Any]]:
    """Every given rule plus any rule id only findings mention, sorted by id."""
    by_id = {r.id: rule_descriptor(r) for r in rules}
    for f in findings:
        if f.rule not in by_id:
            by_id[f.rule] = _builtin_descriptor(f.rule, f.severity)
    return [by_id[k] for k in sorted(by_id)]


class _Locator:
    """Artifact locations: a URI relative to the working directory for a file
    under it, else relative under a root's base id when the root is known,
    else an absolute file URI, else the bare relative path."""

    def __init__(self, roots: Mapping[str, str]) -> None:
        self.roots = dict(roots)

    def artifact(self, file: str, root: str, abspath: str = "") -> dict[str, Any]:
        rel = file.replace(os.sep, "/")
        if root in self.roots and rel:
            # under the working directory (the checkout a workflow runs in):
            # relative to it, as GitHub's upload joins URIs to the checkout
            # root and ignores uriBaseId (``src/conn/hangs.py``)
            full = Path(os.path.abspath(os.path.join(self.roots[root], rel)))
            try:
                here = full.relative_to(Path.cwd().resolve()).as_posix()
            except ValueError:
                return {"uri": quote(rel, safe="/"), "uriBaseId": root}
            return {"uri": quote(here, safe="/")}
        if abspath:
            return {"uri": _file_uri(abspath)}
        return {"uri": quote(rel or ".", safe="/")}

    def root_of(self, step: Step, finding: Finding) -> str:
        """The root a step's file lies in (``step_roots.step_root``)."""
        return step_root(step, finding, self.roots)

    def base_ids(self) -> dict[str, Any]:
        return {label: {"uri": _file_uri(path).rstrip("/") + "/"}
                for label, path in sorted(self.roots.items())}


def _file_uri(path: str) -> str:
    return Path(os.path.abspath(path)).as_uri()


def _physical(artifact: dict[str, Any], line: int, column: int | None,
              text: list[str] | None = None) -> dict[str, Any]:
    region: dict[str, Any] = {"startLine": max(1, line), "endLine": max(1, line)}
    if column is not None:
        region["startColumn"] = max(1, column)
    text = text or []
    if 0 < line <= len(text):
        # the finding names a statement's line: the region ends with it
        region["endColumn"] = len(text[line - 1]) + 1
        region["snippet"] = {"text": text[line - 1]}
    return {"artifactLocation": artifact, "region": region}


def _line_hash(f: Finding, text: list[str]) -> str | None:
    """GitHub's ``primaryLocationLineHash``: a hash of the finding's source
    line (whitespace-normalised) and which occurrence of that text in the
    file it is, so the result follows the line when others move."""
    if not 0 < f.line <= len(text):
        return None
    norm = [" ".join(t.split()) for t in text]
    n = norm[:f.line].count(norm[f.line - 1])
    return hashlib.sha256(norm[f.line - 1].encode()).hexdigest()[:16] + f":{n}"


def _logical(function: str) -> list[dict[str, Any]]:
    return [{"fullyQualifiedName": function, "kind": "function"}] if function else []


def _code_flow(f: Finding, loc: _Locator) -> dict[str, Any]:
    steps = []
    for step in f.path:
        location: dict[str, Any] = {
            "physicalLocation": _physical(loc.artifact(step.file, loc.root_of(step, f)),
                                          step.line, None),
            "message": {"text": step.note or step.function or f"{step.file}:{step.line}"},
        }
        if step.function:
            location["logicalLocations"] = _logical(step.function)
        steps.append({"location": location})
    return {"threadFlows": [{"locations": steps}]}


def _result(f: Finding, index: dict[str, int], loc: _Locator,
            sources: SourceLines) -> dict[str, Any]:
    text = sources.lines(f.abspath)
    location: dict[str, Any] = {
        "physicalLocation": _physical(loc.artifact(f.file, f.root, f.abspath), f.line, f.column,
                                      text)}
    if f.function:
        location["logicalLocations"] = _logical(f.function)
    result: dict[str, Any] = {
        "ruleId": f.rule, "ruleIndex": index[f.rule],
        "level": LEVELS.get(f.severity, "warning"),
        "message": {"text": f.message or f.rule},
        "locations": [location],
        "partialFingerprints": {FINGERPRINT_KEY: f.fingerprint},
    }
    if (line_hash := _line_hash(f, text)) is not None:
        result["partialFingerprints"][LINE_HASH_KEY] = line_hash
    if f.path:
        result["codeFlows"] = [_code_flow(f, loc)]
    if f.suppressed:
        suppression = {"kind": "inSource"}
        reason = dict(f.extra).get("suppression", "")
        if reason:
            suppression["justification"] = reason
        result["suppressions"] = [suppression]
    return result


def _notification(p: Problem) -> dict[str, Any]:
    """A SARIF notification for one file the analysis skipped or warned about."""
    out: dict[str, Any] = {"level": "warning", "message": {"text": p.message}}
    if p.file:
        region = {"startLine": p.line} if p.line > 0 else {}
        out["locations"] = [{"physicalLocation": {
            "artifactLocation": {"uri": Path(p.file).as_uri() if Path(p.file).is_absolute()
                                 else p.file}, **({"region": region} if region else {})}}]
    return out


def render_sarif(findings: Iterable[Finding], rules: Iterable[Rule],
                 roots: Mapping[str, str], problems: Iterable[Problem] = ()) -> str:
    """A SARIF 2.1.0 log with one run (``roots``: root label -> absolute path).
    What the analysis could not read (``problems``) goes into the run's
    invocation as tool execution notifications."""
    items = ordered(findings)
    descriptors = _descriptors(rules, items)
    index = {d["id"]: i for i, d in enumerate(descriptors)}
    loc = _Locator(roots)
    sources = SourceLines()
    run: dict[str, Any] = {
        "tool": {"driver": {"name": "kvflowmap", "version": __version__,
                            "informationUri": INFORMATION_URI, "rules": descriptors}},
        "columnKind": "unicodeCodePoints",
        # one category per tool: GitHub keeps this run's results apart from other analyses'
        "automationDetails": {"id": "kvflowmap/check/"},
        "results": [_result(f, index, loc, sources) for f in items],
        "invocations": [{"executionSuccessful": True,
                         "toolExecutionNotifications": [
                             _notification(p) for p in problems]}],
    }
    if loc.roots:
        run["originalUriBaseIds"] = loc.base_ids()
    log = {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}
    return json.dumps(log, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
