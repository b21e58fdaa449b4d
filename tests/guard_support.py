"""Shared by the tests that take each guard of a rule out: the numbers of
the rule's own examples that fail (an empty list when all pass)."""

from __future__ import annotations

from pathlib import Path

from kvflowmap.check.loader import default_rule_dirs, load_rules
from kvflowmap.check.selftest import check_example


def failing_examples(rule_id: str, tmp_path: Path) -> list[int]:
    """Numbers (from 1) of ``rule_id``'s examples that do not behave."""
    rule = next(r for r in load_rules(default_rule_dirs())[0] if r.id == rule_id)
    return [n for n, ex in enumerate(rule.examples, 1)
            if check_example(rule, n, ex, tmp_path / "work", tmp_path / "cache")]
