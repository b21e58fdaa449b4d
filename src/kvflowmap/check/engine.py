"""Run rules over an analysis: dispatch to kinds, contain their failures."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kvflowmap.api import Analysis
from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import internal_error
from kvflowmap.check.kinds import conforms, forbid, paired, reach, returns, states
from kvflowmap.check.model import Finding, Rule

# The rule kinds, by the name rule files use. Each module has check(ctx).
KINDS: dict[str, Callable[[CheckContext], list[Finding]]] = {
    "reach": reach.check,
    "paired": paired.check,
    "conforms": conforms.check,
    "forbid": forbid.check,
    "returns": returns.check,
    "states": states.check,
}



def run_rules(analysis: Analysis, rules: Iterable[Rule]) -> list[Finding]:
    """Every finding of every rule, sorted; a crashing rule becomes a finding."""
    findings: list[Finding] = []
    for rule in rules:
        ctx = CheckContext(analysis, rule)
        try:
            findings.extend(KINDS[rule.kind](ctx))
        except Exception as exc:  # a bug in a kind must not stop the run
            findings.append(internal_error(rule, "", exc))
    unique = {(f.rule, f.file, f.line, f.column, f.message): f for f in findings}
    return sorted(unique.values(), key=Finding.sort_key)
