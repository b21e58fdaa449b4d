"""Every example of every shipped rule (bad and good, all kinds, ``reach``
and ``states`` included), one test each: what ``kvflowmap test-rules`` runs,
judged by the same code (``selftest.check_example``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvflowmap.check.loader import default_rule_dirs, load_rules
from kvflowmap.check.model import Example, Rule
from kvflowmap.check.selftest import check_example

RULES, ERRORS = load_rules(default_rule_dirs())


def _cases() -> list[tuple[Rule, int, Example]]:
    return [(rule, n, example) for rule in RULES
            for n, example in enumerate(rule.examples, 1)]


def _ids() -> list[str]:
    out = []
    for rule in RULES:
        seen: dict[str, int] = {}
        for example in rule.examples:
            out.append(f"{rule.id}/{example.kind}-{seen.get(example.kind, 0)}")
            seen[example.kind] = seen.get(example.kind, 0) + 1
    return out


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """One fact cache for the module: the stub vLLM is parsed once."""
    return tmp_path_factory.mktemp("examples-cache")


def test_shipped_rules_load_and_all_have_examples() -> None:
    assert ERRORS == [], "\n".join(map(str, ERRORS))
    assert RULES and all(any(e.kind == "bad" for e in r.examples) and
                         any(e.kind == "good" for e in r.examples) for r in RULES)


@pytest.mark.parametrize("rule,n,example", _cases(), ids=_ids())
def test_rule_example(rule: Rule, n: int, example: Example, tmp_path: Path, cache: Path) -> None:
    failures = check_example(rule, n, example, tmp_path, cache)
    assert not failures, "\n".join(failures)
