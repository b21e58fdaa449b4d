"""The whole check as data: rules -> findings -> file filter -> suppressions -> baseline."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from kvflowmap.api import Analysis
from kvflowmap.check.baseline import filter_new
from kvflowmap.check.engine import run_rules
from kvflowmap.check.model import CheckOutcome, Finding, Rule
from kvflowmap.check.suppress import apply_suppressions


def subject_files(analysis: Analysis) -> list[str]:
    """Absolute paths of the subject files that were analysed."""
    model = analysis.linker.model
    out = []
    for module in model.facts:
        sf = model.source(module)
        if sf is not None and sf.subject and not sf.host:
            out.append(str(sf.path))
    return sorted(out)


def _functions_in(analysis: Analysis, paths: set[str]) -> set[str]:
    """FQNs of the functions defined in the files ``paths``."""
    model = analysis.linker.model
    mods = {m for m in model.facts if (sf := model.source(m)) is not None and str(sf.path) in paths}
    return {fqn for fqn, d in model.defs.items() if d.module in mods}


def _caused_by(analysis: Analysis, f: Finding, touched: set[str]) -> bool:
    """A finding elsewhere that the given files can cause: its path goes through
    one of their functions, or its function calls one (``pre-commit`` passes only
    the changed ``helpers.py``; the lease its release helper no longer releases
    is reported in the unchanged caller)."""
    if not touched:
        return False
    if any(s.function in touched for s in f.path):
        return True
    graph = analysis.graph
    if f.function not in graph:
        return False
    return any(callee in touched for _, callee, kind in graph.out_edges(f.function, data="kind")
               if kind in ("call", "dispatch"))


def run_check(analysis: Analysis, rules: Sequence[Rule], *, known_rule_ids: Collection[str],
              only_files: Collection[str] | None = None,
              baseline: set[str] | None = None) -> CheckOutcome:
    """Run ``rules`` and apply the file filter, suppressions and baseline."""
    findings = run_rules(analysis, rules)
    files = subject_files(analysis)
    if only_files is not None:
        wanted = set(only_files)
        touched = _functions_in(analysis, wanted)
        findings = [f for f in findings if f.abspath in wanted or _caused_by(analysis, f, touched)]
        files = [f for f in files if f in wanted]
    roots = {r.label: str(r.path) for r in analysis.roots}
    kept, suppressed, problems = apply_suppressions(
        findings, known_rule_ids, files, roots=roots, active_rule_ids=[r.id for r in rules])
    outcome = CheckOutcome(sorted(kept + problems, key=Finding.sort_key), suppressed)
    return apply_baseline(outcome, baseline) if baseline is not None else outcome


def apply_baseline(outcome: CheckOutcome, baseline: set[str]) -> CheckOutcome:
    """Move findings whose fingerprint is in ``baseline`` to ``known``."""
    new, known = filter_new(outcome.findings, baseline)
    return CheckOutcome(new, outcome.suppressed, outcome.known + known)
