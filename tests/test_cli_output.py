"""One output convention on every command: ``-o/--output FILE`` (``--out``
accepted, not shown), the format from ``--format`` or else the suffix, and a
usage error (exit 2) for a suffix that names none or a format that does not
fit it."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest

from kvflowmap.check.stubs import stub_root
from kvflowmap.cli import CHECK_SUFFIXES, GRAPH_SUFFIXES, TEXT_SUFFIXES, cli, main, out_format

CONN = '''
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Conn(KVConnectorBase_V1):
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return 0, False
'''


@pytest.fixture
def repo(tree, monkeypatch) -> Path:
    root = tree({"conn/__init__.py": "", "conn/c.py": CONN})
    (root / "pyproject.toml").write_text(
        f'[tool.kvflowmap]\nsources = ["conn"]\ncontext = ["{stub_root()}"]\n')
    monkeypatch.chdir(root)
    return root


def test_format_from_suffix_or_given_and_mismatch_is_an_error() -> None:
    assert out_format("flow.svg", None, GRAPH_SUFFIXES, None) == "svg"
    assert out_format(None, None, GRAPH_SUFFIXES, None) is None  # graph's stdout picks
    assert out_format("calls.json", "pycg-json", GRAPH_SUFFIXES, None) == "pycg-json"
    assert out_format("report.json", "sarif", CHECK_SUFFIXES, "text") == "sarif"
    assert out_format("report.sarif", None, CHECK_SUFFIXES, "text") == "sarif"
    assert out_format("flow.md", "mermaid", GRAPH_SUFFIXES, None) == "mermaid"  # unknown: as given
    with pytest.raises(click.UsageError, match="does not fit"):
        out_format("flow.svg", "png", GRAPH_SUFFIXES, None)
    with pytest.raises(click.UsageError, match="does not fit"):
        out_format("where.txt", "json", TEXT_SUFFIXES, "text")
    with pytest.raises(click.UsageError, match="cannot tell the format"):
        out_format("where.out", None, TEXT_SUFFIXES, "text")


@pytest.mark.parametrize("args", [["where", "Conn"], ["lifecycle"], ["check"],
                                  ["path", "Scheduler.schedule",
                                   "Conn.get_num_new_matched_tokens"]])
def test_a_json_suffix_writes_json(repo, args) -> None:
    assert main([*args, "-o", "out.json"]) in (0, 1)
    json.loads((repo / "out.json").read_text())
    assert main([*args, "--output", "out.txt"]) in (0, 1)
    text = (repo / "out.txt").read_text()
    assert text and not text.lstrip().startswith("{")


@pytest.mark.parametrize("args", [["where", "Conn", "-f", "json", "-o", "w.txt"],
                                  ["check", "-f", "sarif", "-o", "r.txt"],
                                  ["graph", "-f", "png", "-o", "flow.svg"],
                                  ["lifecycle", "-o", "l.yaml"]])
def test_a_format_that_does_not_fit_the_file_is_a_usage_error(repo, args, capsys) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "does not fit" in err or "cannot tell the format" in err
    assert not (repo / args[-1]).exists()


def test_every_writing_command_shows_dash_o_and_hides_out() -> None:
    ctx = click.Context(cli)
    for name in ("graph", "check", "where", "path", "states", "lifecycle", "docs", "trace",
                 "compat", "catalogue"):
        cmd = cli.get_command(ctx, name)
        assert cmd is not None
        help_text = cmd.get_help(click.Context(cmd, info_name=name))
        assert "-o, --output" in help_text, name
        assert "--out " not in help_text and "--out," not in help_text, name


def test_out_still_works_and_catalogue_takes_dash_o(tmp_path) -> None:
    assert main(["catalogue", "-o", str(tmp_path / "rules.md")]) == 0
    assert main(["catalogue", "--out", str(tmp_path / "rules.md"), "--check"]) == 0


def test_exit_codes_are_in_the_help(capsys) -> None:
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    for code in ("0 ", "1 ", "2 ", "3 ", "130", "141", "143"):
        assert f"\n    {code}" in text, code
    assert "NO_COLOR" in text


@pytest.mark.parametrize("args", [["where", "Conn"], ["docs", "-o", "pages"], ["states"],
                                  ["lifecycle"], ["check"]])
def test_a_warm_run_imports_no_analysis(repo, args) -> None:
    """A repeated question costs what a warm check costs: the stored answer is
    printed without importing networkx or LibCST (0.35 s of imports)."""
    import subprocess
    import sys

    probe = ("import sys; from kvflowmap.cli import main; rc = main(sys.argv[1:]); "
             "print('LOADED', sorted(m for m in ('networkx', 'libcst') if m in sys.modules))")
    cmd = [sys.executable, "-c", probe, *args, "-v"]
    subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=300, check=False)
    again = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=300,
                           check=False)
    assert "result reused" in again.stderr, again.stderr
    assert "LOADED []" in again.stdout, again.stdout[-300:]
