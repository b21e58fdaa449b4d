"""The rule catalogue: deterministic, and the committed docs/rules.md is current."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.test_rule_loader import VALID, fake_engine, write

from kvflowmap.check.catalogue import explain, render_catalogue, rule_file
from kvflowmap.check.loader import default_rule_dirs, load_rules
from kvflowmap.commands.rules_cmd import cmd_catalogue, cmd_explain, cmd_rules

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def engine(monkeypatch):
    with fake_engine(monkeypatch) as eng:
        yield eng


@pytest.fixture
def rules_dir(tmp_path, engine) -> Path:
    write(tmp_path, "rules/pegaflow/b.yaml", VALID)
    write(tmp_path, "rules/pegaflow/a.yaml", VALID.replace("pf-demo-rule", "pf-alpha")
          .replace("No bad functions", "Alpha | pipes"))
    write(tmp_path, "rules/vllm-kv-connector/c.yaml", VALID.replace("pf-demo-rule", "kvc-probe")
          .replace("params:\n  limit: 5\n", "").replace("def good_one", "def ``` fence"))
    return tmp_path / "rules"


def test_catalogue_is_deterministic_and_complete(rules_dir):
    rules, errors = load_rules([rules_dir])
    assert errors == []
    text = render_catalogue(rules)
    assert text == render_catalogue(list(reversed(rules)))
    assert str(rules_dir) not in text  # no machine-specific paths
    assert text.index("## Pack `pegaflow`") < text.index("## Pack `vllm-kv-connector`")
    assert "- [Pack `pegaflow`](#pack-pegaflow) (2 rules)" in text
    assert "| [`pf-alpha`](#pf-alpha) | warning | `returns` | Alpha \\| pipes |" in text
    assert text.index("### `pf-alpha`") < text.index("### `pf-demo-rule`")
    assert "| `limit` | an integer | `5` (default `3`) | A number. |" in text
    assert "| `name_regex` | a string | `\"^bad_\"` (default) | Function names to flag. |" in text
    assert "**Reads:** the names of the target functions." in text
    assert "`rules/pegaflow/b.yaml`" in text
    assert "**Applies to:** subclasses of `vllm.distributed.kv_transfer.kv_connector.v1.base." \
           "KVConnectorBase_V1`; classes matching `pegaflow.*` (subject code only)" in text
    assert "**Bad (flagged)** — flagged\n\n```python\ndef bad_one():\n    pass\n```" in text
    assert "`pkg/helpers.py`\n\n```python\nX = 1\n```" in text
    assert "````python\ndef ``` fence():" in text  # a longer fence around backticks
    assert text.endswith("Rename it.\n")


def test_explain_has_rationale_check_examples_help(rules_dir):
    rules, _ = load_rules([rules_dir])
    text = explain(next(r for r in rules if r.id == "pf-demo-rule"))
    assert text.startswith("# `pf-demo-rule`\n\n**No bad functions**")
    for part in ("## Why", "Bad functions are bad.", "## What is checked", "Kind `returns`",
                 "| `limit` | an integer | `5` (default `3`) |", "**Reads:**", "## Examples",
                 "def bad_one():", "## How to fix",
                 "Rename it."):
        assert part in text


def test_rule_file_is_relative_to_rules_folder():
    assert rule_file(Path("/a/b/rules/pegaflow/x.yaml")) == "rules/pegaflow/x.yaml"
    assert rule_file(Path("/a/b/x.yaml")) == "x.yaml"


def test_catalogue_command_writes_and_checks(rules_dir, tmp_path, capsys):
    out = tmp_path / "docs" / "rules.md"
    assert cmd_catalogue(out, check=True, rule_paths=[rules_dir]) == 1
    assert cmd_catalogue(out, check=False, rule_paths=[rules_dir]) == 0
    assert cmd_catalogue(out, check=True, rule_paths=[rules_dir]) == 0
    out.write_text(out.read_text() + "edit\n")
    assert cmd_catalogue(out, check=True, rule_paths=[rules_dir]) == 1
    assert "is stale" in capsys.readouterr().err


def test_rules_and_explain_commands(rules_dir, capsys):
    assert cmd_rules([rules_dir]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["id", "severity", "kind", "title"]
    assert lines[1].split()[:3] == ["pf-alpha", "warning", "returns"]
    assert cmd_rules([rules_dir], fmt="json") == 0
    assert '"id": "kvc-probe"' in capsys.readouterr().out
    assert cmd_explain("pf-demo-rule", [rules_dir]) == 0
    assert "## How to fix" in capsys.readouterr().out
    assert cmd_explain("pf-demo-rul", [rules_dir]) == 2
    assert "did you mean pf-demo-rule" in capsys.readouterr().err


def test_bad_rule_files_exit_2(tmp_path, engine, capsys):
    write(tmp_path, "rules/p/x.yaml", VALID.replace("severity: warning", "severity: fatal"))
    assert cmd_rules([tmp_path / "rules"]) == 2
    assert "x.yaml:3: key 'severity': expected one of error, warning, note" in \
        capsys.readouterr().err


def test_cli_registration(rules_dir, tmp_path):
    import click

    from kvflowmap.commands import rules_cmd

    group = click.Group("kvflowmap")
    rules_cmd.register(group)
    assert {"rules", "explain", "test-rules", "catalogue"} <= set(group.commands)
    out = tmp_path / "cat.md"
    code = group.main(["catalogue", "--out", str(out), "--rules", str(rules_dir)],
                      standalone_mode=False)
    assert code == 0 and out.read_text().startswith("# kvflowmap rules")
    assert group.main(["explain", "nope", "--rules", str(rules_dir)], standalone_mode=False) == 2


def test_committed_catalogue_is_current():
    """CI fails when docs/rules.md is stale: run `kvflowmap catalogue`."""
    rules, errors = load_rules(default_rule_dirs())
    assert errors == [], "\n".join(map(str, errors))
    committed = (REPO / "docs" / "rules.md").read_text(encoding="utf-8")
    assert committed == render_catalogue(rules), \
        "docs/rules.md is stale: run `kvflowmap catalogue --out docs/rules.md`"
