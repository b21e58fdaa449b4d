"""Run rules over an analysis: dispatch to kinds, contain their failures."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kvflowmap.check.context import CheckContext
from kvflowmap.check.forked import can_fork, run_groups
from kvflowmap.check.guard import internal_error
from kvflowmap.check.kinds.registry import options_for, spec_for
from kvflowmap.check.model import Finding, Rule

if TYPE_CHECKING:
    from kvflowmap.api import Analysis

# Relative cost of a rule kind, to balance the groups run in parallel
# (measured on PegaFlow + vLLM: paired rules 0.05-0.19 s each, the others
# 0.01-0.08 s).
_COST = {"paired": 3}


def run_rules(analysis: Analysis, rules: Iterable[Rule]) -> list[Finding]:
    """Every finding of every rule, sorted; a crashing rule becomes a finding.

    The model's memos give the same answers in any order of queries
    (``model.cycles``), so the rules can be split into two groups, one run in
    a forked child, with the same findings as one after the other."""
    rules = list(rules)

    def run_group(group: list[Rule]) -> list[Finding]:
        out: list[Finding] = []
        for rule in group:
            ctx = CheckContext(analysis, rule)
            try:
                out.extend(spec_for(rule.kind, rule.params).check(ctx, options_for(rule)))
            except Exception as exc:  # a bug in a kind must not stop the run
                out.append(internal_error(rule, "", exc))
        return out

    groups = _split(rules) if can_fork() and len(rules) > 1 else [rules]
    findings = [f for part in run_groups(groups, run_group) for f in part]
    # a host is vLLM's code driving the subject: analysed, never reported
    hosts = host_paths(analysis)
    findings = [f for f in findings if f.abspath not in hosts]
    unique = {(f.rule, f.file, f.line, f.column, f.message): f for f in findings}
    return sorted(unique.values(), key=Finding.sort_key)


def host_paths(analysis: Analysis) -> set[str]:
    """Absolute paths of the host modules (``sources.hosts``) analysed."""
    model = analysis.linker.model
    return {str(sf.path) for m in model.facts if (sf := model.source(m)) is not None and sf.host}


def _split(rules: list[Rule]) -> list[list[Rule]]:
    """Two groups of about equal cost, always split the same way (by cost,
    then id, each rule to the cheaper group)."""
    groups: list[list[Rule]] = [[], []]
    cost = [0, 0]
    for rule in sorted(rules, key=lambda r: (-_COST.get(r.kind, 1), r.id)):
        i = 0 if cost[0] <= cost[1] else 1
        groups[i].append(rule)
        cost[i] += _COST.get(rule.kind, 1)
    return [g for g in groups if g]
