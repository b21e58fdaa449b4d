"""``run_examples``: rule examples and annotated fixtures, judged per line.

The real kinds are not used: a fake ``returns`` kind flags every function
named ``bad_*`` (see ``flag_bad_functions`` in test_rule_loader)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.test_rule_loader import FLAG, NoOptions, fake_engine, write

from kvflowmap.check.loader import load_rules
from kvflowmap.check.kinds.spec import KindSpec
from kvflowmap.check.selftest import format_report, markers, run_examples

RULE = """\
id: {id}
title: No bad functions
severity: error
rationale: Bad functions are bad.
kind: returns
help: Rename it.
examples:
{examples}
"""

GOOD_EXAMPLES = """\
  - bad: |
      def fine():
          pass


      def bad_one():  # expect: {id}
          pass
    note: marked
  - bad:
      files:
        example.py: |
          from example_helpers import bad_helper
        example_helpers.py: |
          def bad_helper():
              pass
  - good: |
      def good_one():  # ok: {id}
          pass
"""

BROKEN_EXAMPLES = """\
  - bad: |
      def bad_one():
          pass  # expect: {id}
  - bad: |
      def fine():
          pass
  - good: |
      def bad_two():
          pass
"""


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """One fact cache for the module: the stub vLLM is parsed once."""
    return tmp_path_factory.mktemp("selftest-cache")


@pytest.fixture
def engine(monkeypatch):
    def crash(ctx, opts):
        raise RuntimeError("kind exploded")

    kinds = {"returns": FLAG, "states": KindSpec(NoOptions, crash, "Reads: nothing.")}
    with fake_engine(monkeypatch, kinds) as eng:
        yield eng


def make_rule(tmp_path: Path, rule_id: str, examples: str, kind: str = "returns"):
    text = RULE.format(id=rule_id, examples=examples.format(id=rule_id))
    write(tmp_path, f"rules/demo/{rule_id}.yaml", text.replace("kind: returns", f"kind: {kind}"))
    rules, errors = load_rules([tmp_path / "rules" / "demo" / f"{rule_id}.yaml"])
    assert errors == [], [str(e) for e in errors]
    return rules[0]


def test_passing_examples(tmp_path, engine, cache):
    rule = make_rule(tmp_path, "t-good", GOOD_EXAMPLES)
    report = run_examples([rule], cache_dir=cache)
    assert report.failures == []
    assert report.ok
    s = report.stats["t-good"]
    assert (s.passed, s.failed, s.tp, s.fp, s.missed) == (3, 0, 2, 0, 0)


def test_failing_examples_say_why(tmp_path, engine, cache):
    rule = make_rule(tmp_path, "t-broken", BROKEN_EXAMPLES)
    report = run_examples([rule], cache_dir=cache)
    s = report.stats["t-broken"]
    assert (s.passed, s.failed) == (0, 3)
    assert (s.tp, s.fp, s.missed) == (0, 2, 2)
    first, second, third = report.failures
    assert first.startswith("t-broken: bad example 1: no finding at example.py:2 (# expect); "
                            "finding at example.py:1, a line without `# expect`")
    assert "got: example.py:1 example.bad_one is bad" in first
    assert second == ("t-broken: bad example 2: no finding of the rule in the example; "
                      "the rule found nothing")
    assert third.startswith("t-broken: good example 3: unexpected finding at example.py:1")
    assert not report.ok


def test_crashing_kind_fails_its_examples(tmp_path, engine, cache):
    rule = make_rule(tmp_path, "t-crash", GOOD_EXAMPLES, kind="states")
    report = run_examples([rule], cache_dir=cache)
    assert report.stats["t-crash"].failed == 3
    assert all("rule t-crash failed" in f and "kind exploded" in f for f in report.failures)


def test_example_with_syntax_error_fails(tmp_path, engine, cache):
    rule = make_rule(tmp_path, "t-syntax", GOOD_EXAMPLES.replace(
        "def good_one():  # ok: {id}", "def good_one(:"))
    report = run_examples([rule], cache_dir=cache)
    [failure] = report.failures
    assert failure.startswith("t-syntax: good example 3: does not analyse cleanly:")


def test_fixture_dirs_count_tp_fp_missed(tmp_path, engine, cache):
    rule = make_rule(tmp_path, "t-fix", GOOD_EXAMPLES)
    fixtures = tmp_path / "fixtures"
    write(fixtures, "pkg/__init__.py", "")
    write(fixtures, "pkg/a.py", (
        "def bad_a():  # expect: t-fix\n"
        "    pass\n"
        "def bad_b():\n"  # a false positive: the file is annotated for t-fix
        "    pass\n"
        "def good():  # expect: t-fix\n"  # a miss
        "    pass\n"
        "def other():  # expect: t-nope\n"
        "    pass\n"))
    write(fixtures, "pkg/unannotated.py", "def bad_x():\n    pass\n")  # not counted
    report = run_examples([rule], [fixtures], cache_dir=cache)
    s = report.stats["t-fix"]
    assert (s.tp, s.fp, s.missed) == (2 + 1, 1, 1)
    fixture_failures = [f for f in report.failures if f.startswith("pkg/")]
    assert fixture_failures == [
        "pkg/a.py:7: annotation names unknown rule 't-nope'",
        "pkg/a.py:3: false positive of t-fix: pkg.a.bad_b is bad",
        "pkg/a.py:5: t-fix missed (# expect)",
    ]


def test_markers_parse_several_ids(tmp_path):
    f = write(tmp_path, "m.py", "x = 1  # expect: a-b, c  # ok: d\ny = 2 # nothing\n")
    [(key, marks)] = markers(f).items()
    assert key[1] == 1 and marks == {"expect": {"a-b", "c"}, "ok": {"d"}}


def test_format_report_table(tmp_path, engine, cache):
    good = make_rule(tmp_path, "t-good", GOOD_EXAMPLES)
    broken = make_rule(tmp_path, "t-broken", BROKEN_EXAMPLES)
    text = format_report(run_examples([good, broken], cache_dir=cache))
    lines = text.splitlines()
    assert lines[0].split() == ["rule", "examples", "tp", "fp", "missed"]
    assert lines[2].split() == ["t-broken", "0/3", "0", "2", "2"]
    assert lines[3].split() == ["t-good", "3/3", "2", "0", "0"]
    assert "2 rules: 3 examples passed, 3 failed; 2 true positives, 2 false positives, " \
           "2 missed" in text
    assert "3 failures:" in text


def test_test_rules_command_exit_codes(tmp_path, engine, cache, capsys):
    from kvflowmap.commands.rules_cmd import cmd_test_rules, split_test_dirs

    make_rule(tmp_path, "t-good", GOOD_EXAMPLES)
    rules_dir = tmp_path / "rules"
    write(rules_dir, "demo/fixtures/pkg/a.py", "def bad_a():  # expect: t-good\n    pass\n")
    extra = write(tmp_path, "more/m.py", "def bad_m():  # expect: t-good\n    pass\n").parent
    assert split_test_dirs([rules_dir, extra]) == ([rules_dir], [extra, rules_dir / "demo" /
                                                                 "fixtures"])
    assert cmd_test_rules([rules_dir, extra], cache_dir=cache) == 0
    assert capsys.readouterr().out.splitlines()[2].split() == ["t-good", "3/3", "4", "0", "0"]
    make_rule(tmp_path, "t-broken", BROKEN_EXAMPLES)
    assert cmd_test_rules([rules_dir], cache_dir=cache) == 1
    write(rules_dir, "demo/zz.yaml", "id: [\n")
    assert cmd_test_rules([rules_dir], cache_dir=cache) == 2
    assert "zz.yaml" in capsys.readouterr().err
