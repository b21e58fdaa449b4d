"""``kvflowmap test-rules``: run each rule on its own examples and on
annotated fixture files, and count true/false positives and misses.

Annotations are comments on the line they talk about::

    self._pending[req_id] = req   # expect: pf-pending-load-released
    return 0, False               # ok: kvc-probe-return-shape

A bad example passes when every ``# expect`` line of the rule has a finding
of it and no other line has one (without ``# expect`` markers: when the rule
finds anything in the example); a good example passes when the rule finds
nothing in it. In fixture files, for each rule a file annotates, a finding on
an ``# expect`` line is a true positive, a finding on any other line a false
positive, and an ``# expect`` line without a finding a miss.

Each example is analysed alone (its own import root, the stub vLLM as
context). Measured: the first analysis parses the stub (~0.7 s), and with the
stub's facts in a shared cache each further example costs ~40 ms. One batched
analysis of 40 examples takes ~0.15 s, but batching is not correct in
general: examples reuse module names (``example``, ``pegaflow.*``, which
``applies_to`` globs match) and dispatch/bridge edges join every connector
class in one analysis, so one example's code could hide or cause another's
findings. So: one analysis per example, one shared fact cache per run.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kvflowmap.check.model import Example, Finding, Rule

MARKER = re.compile(r"#\s*(expect|ok)\s*:\s*([a-z0-9][a-z0-9-]*(?:\s*,\s*[a-z0-9][a-z0-9-]*)*)")
INTERNAL = "internal-error"
Marks = dict[tuple[str, int], dict[str, set[str]]]  # (abs file, line) -> {expect|ok: ids}


@dataclass
class RuleStats:
    """Counts for one rule over its examples and the fixture files."""

    rule: str
    tp: int = 0
    fp: int = 0
    missed: int = 0
    passed: int = 0
    failed: int = 0


@dataclass
class SelfTestReport:
    """Per-rule counts and a message per failure."""

    stats: dict[str, RuleStats] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when every example passed and no fixture line was wrong."""
        return not self.failures


def run_examples(rules: Sequence[Rule], extra_dirs: Sequence[Path] = (),
                 cache_dir: Path | None = None) -> SelfTestReport:
    """Run every rule on its examples, then all rules on each fixture root in
    ``extra_dirs``. ``cache_dir``: fact cache (default: a temporary one)."""
    t0 = time.perf_counter()
    report = SelfTestReport({r.id: RuleStats(r.id) for r in rules})
    with tempfile.TemporaryDirectory(prefix="kvflowmap-selftest-") as tmp:
        cache = Path(cache_dir) if cache_dir else Path(tmp) / "cache"
        for rule in rules:
            for n, example in enumerate(rule.examples, 1):
                root = _write_example(Path(tmp) / f"{rule.id}-{n}", example)
                _judge_example(report, rule, n, example, root, cache)
        for d in extra_dirs:
            _judge_fixtures(report, rules, Path(d), cache)
    report.seconds = time.perf_counter() - t0
    return report


def check_example(rule: Rule, n: int, example: Example, workdir: Path,
                  cache: Path) -> list[str]:
    """The failures of example ``n`` (1-based, among all of the rule's
    examples) of one rule, analysed alone under ``workdir``; empty: it passed."""
    report = SelfTestReport({rule.id: RuleStats(rule.id)})
    root = _write_example(Path(workdir) / f"{rule.id}-{n}", example)
    _judge_example(report, rule, n, example, root, Path(cache))
    return report.failures


def format_report(report: SelfTestReport) -> str:
    """A table of per-rule counts, then the failures."""
    head = ("rule", "examples", "tp", "fp", "missed")
    rows = [(s.rule, f"{s.passed}/{s.passed + s.failed}", str(s.tp), str(s.fp), str(s.missed))
            for s in sorted(report.stats.values(), key=lambda s: s.rule)]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    fmt = lambda row: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)  # noqa: E731
                                for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip()
    lines = [fmt(head), fmt(tuple("-" * w for w in widths)), *map(fmt, rows)]
    total = [sum(getattr(s, k) for s in report.stats.values())
             for k in ("passed", "failed", "tp", "fp", "missed")]
    lines.append(f"\n{len(report.stats)} rules: {total[0]} examples passed, {total[1]} failed; "
                 f"{total[2]} true positives, {total[3]} false positives, {total[4]} missed "
                 f"({report.seconds:.1f}s)")
    if report.failures:
        lines += ["", f"{len(report.failures)} failures:", *(f"  - {f}" for f in report.failures)]
    return "\n".join(lines)


def markers(path: Path) -> Marks:
    """``# expect: ID`` / ``# ok: ID`` annotations of one file."""
    out: Marks = {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return out
    for lineno, line in enumerate(text.splitlines(), 1):
        for m in MARKER.finditer(line):
            ids = {i.strip() for i in m.group(2).split(",")}
            out.setdefault((_key(path), lineno), {}).setdefault(m.group(1), set()).update(ids)
    return out


# -- running -----------------------------------------------------------------

def _write_example(root: Path, example: Example) -> Path:
    for rel, code in example.files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code, encoding="utf-8")
    return root


def _analyse(root: Path, rules: Sequence[Rule], cache: Path) -> tuple[list[Finding], list[str]]:
    """Findings of ``rules`` on one import root (stub vLLM as context), and
    the parse problems of the root's own files."""
    from kvflowmap.api import Request, analyse
    from kvflowmap.check.engine import run_rules
    from kvflowmap.check.stubs import stub_root

    analysis = analyse(Request(sources=[str(root)], context=[str(stub_root())], cache_dir=cache))
    problems = [w for w in analysis.warnings if w.startswith((str(root), str(root.resolve())))]
    return run_rules(analysis, rules), problems


def _key(path: Path | str) -> str:
    return str(Path(path).resolve())


def _rel(key: str, root: Path) -> str:
    try:
        return Path(key).relative_to(root.resolve()).as_posix()
    except ValueError:
        return key


def _mine(findings: list[Finding], rule_id: str, files: set[str]) -> set[tuple[str, int]]:
    return {(_key(f.abspath), f.line) for f in findings
            if f.rule == rule_id and f.abspath and _key(f.abspath) in files}


def _describe(findings: list[Finding], rule_id: str, root: Path) -> str:
    got = [f"{_rel(_key(f.abspath), root) if f.abspath else f.file or '?'}:{f.line} {f.message}"
           for f in findings if f.rule in (rule_id, INTERNAL)]
    return "; got: " + " | ".join(got) if got else "; the rule found nothing"


# -- judging -----------------------------------------------------------------

def _judge_example(report: SelfTestReport, rule: Rule, n: int, example: Example, root: Path,
                   cache: Path) -> None:
    stats = report.stats[rule.id]
    label = f"{rule.id}: {example.kind} example {n}" + (f" ({example.note.strip()})"
                                                        if example.note.strip() else "")
    files = {_key(root / rel) for rel in example.files}
    try:
        findings, problems = _analyse(root, [rule], cache)
    except Exception as exc:  # a broken example or engine: report, go on
        stats.failed += 1
        report.failures.append(f"{label}: analysis failed: {type(exc).__name__}: {exc}")
        return
    marks: Marks = {}
    for rel in example.files:
        marks.update(markers(root / rel))
    problems += [f.message for f in findings if f.rule == INTERNAL]
    errors = [f"does not analyse cleanly: {p}" for p in problems]
    found = _mine(findings, rule.id, files)
    expect = {k for k, m in marks.items() if rule.id in m.get("expect", ())}
    ok_lines = {k for k, m in marks.items() if rule.id in m.get("ok", ())}
    if example.kind == "good":
        stats.fp += len(found)
        errors += [f"unexpected finding at {_rel(k, root)}:{line}" for k, line in sorted(found)]
        errors += ["a good example cannot carry `# expect` markers" for _ in expect][:1]
    elif expect:
        stats.tp += len(expect & found)
        stats.missed += len(expect - found)
        stats.fp += len(found - expect)
        errors += [f"no finding at {_rel(k, root)}:{line} (# expect)" for k, line in
                   sorted(expect - found)]
        errors += [f"finding at {_rel(k, root)}:{line}, a line without `# expect`"
                   for k, line in sorted(found - expect)]
    else:
        stats.tp += bool(found)
        stats.missed += not found
        stats.fp += len(found & ok_lines)
        errors += ["no finding of the rule in the example"] if not found else []
        errors += [f"finding on `# ok` line {_rel(k, root)}:{line}"
                   for k, line in sorted(found & ok_lines)]
    if errors:
        stats.failed += 1
        report.failures.append(f"{label}: {'; '.join(errors)}{_describe(findings, rule.id, root)}")
    else:
        stats.passed += 1


def _judge_fixtures(report: SelfTestReport, rules: Sequence[Rule], root: Path,
                    cache: Path) -> None:
    marks: Marks = {}
    for path in sorted(root.rglob("*.py")):
        marks.update(markers(path))
    try:
        findings, problems = _analyse(root, rules, cache)
    except Exception as exc:
        report.failures.append(f"{root}: analysis failed: {type(exc).__name__}: {exc}")
        return
    report.failures += [f"{root}: does not analyse cleanly: {p}" for p in problems]
    report.failures += [f"{root}: {f.message}" for f in findings if f.rule == INTERNAL]
    known = {r.id for r in rules}
    for (file, line), m in sorted(marks.items()):
        for rid in sorted((m.get("expect", set()) | m.get("ok", set())) - known):
            report.failures.append(f"{_rel(file, root)}:{line}: annotation names unknown rule "
                                   f"'{rid}'")
    for rule in rules:
        annotated = {k[0] for k, m in marks.items()
                     if rule.id in m.get("expect", set()) | m.get("ok", set())}
        found = _mine(findings, rule.id, annotated)
        expect = {k for k, m in marks.items() if rule.id in m.get("expect", ())}
        _count_fixture(report, rule.id, root, found, expect, findings)


def _count_fixture(report: SelfTestReport, rule_id: str, root: Path, found: set, expect: set,
                   findings: list[Finding]) -> None:
    stats = report.stats[rule_id]
    stats.tp += len(found & expect)
    stats.fp += len(found - expect)
    stats.missed += len(expect - found)
    messages = {(_key(f.abspath), f.line): f.message for f in findings
                if f.rule == rule_id and f.abspath}
    for file, line in sorted(found - expect):
        report.failures.append(f"{_rel(file, root)}:{line}: false positive of {rule_id}: "
                               f"{messages.get((file, line), '')}")
    for file, line in sorted(expect - found):
        report.failures.append(f"{_rel(file, root)}:{line}: {rule_id} missed (# expect)")
