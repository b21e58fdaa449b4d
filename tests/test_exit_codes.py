"""Exit codes never say "findings" (1) for a failure: an internal error is 3,
Ctrl-C 130, a closed output pipe 141, each with a message and no hang."""

from __future__ import annotations

import io

import pytest

from kvflowmap import cli
from kvflowmap.commands import rules_cmd


def _raise(exc: BaseException):
    def boom(*args, **kwargs):
        raise exc
    return boom


def test_internal_error_is_3_with_a_message(monkeypatch, capsys) -> None:
    monkeypatch.setattr(rules_cmd, "load_rules", _raise(RuntimeError("bug here")))
    assert cli.main(["rules"]) == cli.EXIT_INTERNAL == 3
    err = capsys.readouterr().err
    assert "internal error: RuntimeError: bug here" in err and "Traceback" in err


def test_ctrl_c_is_130(monkeypatch, capsys) -> None:
    monkeypatch.setattr(rules_cmd, "load_rules", _raise(KeyboardInterrupt()))
    assert cli.main(["rules"]) == 130
    assert "Traceback" not in capsys.readouterr().err


class _ClosedPipe(io.StringIO):
    def write(self, s: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_closed_pipe_is_141_and_silent(monkeypatch, capsys) -> None:
    monkeypatch.setattr("sys.stdout", _ClosedPipe())
    assert cli.main(["rules"]) == 141
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("args", [["rules", "--format", "nope"], ["explain", "no-such-rule"]])
def test_usage_errors_stay_2(args, capsys) -> None:
    assert cli.main(args) == 2


@pytest.mark.parametrize("args", [
    ["check", "--select", "kvc-async-load-has-reporter", "-o", "{blocked}/x.sarif",
     "-f", "sarif", "{src}"],
    ["check", "--select", "kvc-async-load-has-reporter", "--write-baseline",
     "{blocked}/b.json", "{src}"],
    ["catalogue", "--out", "{blocked}/rules.md"],
])
def test_unwritable_output_is_a_usage_error_naming_it(args, tree, tmp_path, capsys) -> None:
    root = tree({"pkg/__init__.py": "", "pkg/a.py": "def f():\n    return 1\n"})
    blocked = tmp_path / "a-file"  # a path under a regular file: unwritable even for root
    blocked.write_text("")
    argv = [a.format(src=root / "pkg", blocked=blocked) for a in args]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert f"cannot write {blocked}/" in err and "Traceback" not in err


def test_check_on_a_folder_without_python_is_an_error(tmp_path, monkeypatch, capsys) -> None:
    (tmp_path / "README.md").write_text("no code here\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["check", str(tmp_path)]) == 2
    assert "no Python files to analyse" in capsys.readouterr().err


def test_a_rule_typo_fails_before_any_indexing(tmp_path, monkeypatch, capsys) -> None:
    import kvflowmap.commands.memo_run as memo_run

    monkeypatch.setattr(memo_run, "analyse_reported",
                        lambda *a, **k: pytest.fail("indexed before validating --select"))
    (tmp_path / "a.py").write_text("def f():\n    return 1\n")
    assert cli.main(["check", "--select", "kvc-typo", str(tmp_path)]) == 2
    assert "unknown rule id 'kvc-typo'" in capsys.readouterr().err
