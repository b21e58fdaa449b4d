"""``kvflowmap compat`` from the command line on miniature releases: the
formats, ``--check`` of a committed table, and the release resolution."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.compat_releases import CONNECTOR, install_release, write_tree
from kvflowmap.cli import cli, main
from kvflowmap.compat.releases import _as_range, pinned_range, resolve_releases


@pytest.fixture()
def env(tmp_path: Path) -> tuple[Path, Path]:
    for v in ("0.1.0", "0.2.0"):
        install_release(tmp_path / "cache", v)
    return tmp_path / "cache", write_tree(tmp_path / "src", CONNECTOR) / "toyconn"


def _run(args: list[str]):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_text_and_json(env: tuple[Path, Path]) -> None:
    cache, src = env
    r = _run(["compat", str(src), "--vllm", "0.1.0,0.2.0", "--cache-dir", str(cache)])
    assert r.exit_code == 0
    assert "OldConnector" in r.output and "FAIL" in r.output and "ok (guarded)" in r.output
    assert "toyconn/bad.py:12: error: vLLM 0.2.0: OldConnector" in r.output
    r = _run(["compat", str(src), "--vllm", "0.1.0,0.2.0", "--cache-dir", str(cache),
              "-f", "json"])
    data = json.loads(r.output)
    assert data["releases"] == ["0.1.0", "0.2.0"]
    assert data["classes"]["toyconn.bad.OldConnector"]["0.2.0"]["status"] == "fail"


def test_markdown_check(env: tuple[Path, Path], tmp_path: Path) -> None:
    cache, src = env
    args = ["compat", str(src), "--vllm", "0.1.0,0.2.0", "--cache-dir", str(cache)]
    table = tmp_path / "README.md"
    assert _run([*args, "-o", str(table)]).exit_code == 0
    assert table.read_text().startswith("<!-- kvflowmap compat -->")  # the suffix picks markdown
    md = _run([*args, "-f", "markdown"]).output
    assert md.startswith("<!-- kvflowmap compat -->") and "| `OldConnector` | ✅ | ❌ (" in md
    table.write_text(f"# toyconn\n\nSupport:\n\n{md}\nMore text.\n")
    assert _run([*args, "--check", str(table)]).exit_code == 0
    table.write_text(table.read_text().replace("❌", "✅"))
    r = CliRunner().invoke(cli, [*args, "--check", str(table)])
    assert r.exit_code == 1 and "stale" in r.output


def test_sarif_has_newest_release_only(env: tuple[Path, Path]) -> None:
    cache, src = env
    r = _run(["compat", str(src), "--vllm", "0.1.0,0.2.0", "--cache-dir", str(cache),
              "-f", "sarif"])
    results = json.loads(r.output)["runs"][0]["results"]
    assert results and all("vLLM 0.2.0" in x["message"]["text"] for x in results)
    assert {"compat/ann", "compat/abstract"} <= {x["ruleId"] for x in results}


def test_diff_command(env: tuple[Path, Path]) -> None:
    cache, _ = env
    r = _run(["compat", "--diff", "vllm==0.1.0", "vllm==0.2.0", "--cache-dir", str(cache),
              "-f", "json"])
    changes = json.loads(r.output)["changes"]
    hp = [c for c in changes if c["subject"] == "KVConnectorBase_V1.handle_preemptions"]
    assert hp[0]["old"].endswith("preempted_req_ids: set[str])")
    text = _run(["compat", "--diff", "vllm==0.1.0", "vllm==0.2.0", "--cache-dir", str(cache)])
    assert "KVConnectorBase_V1.handle_preemptions" in text.output


def test_consecutive_diffs_of_a_list(env: tuple[Path, Path], tmp_path: Path) -> None:
    cache, _ = env
    install_release(cache, "0.3.0")  # the same API as 0.2.0
    r = _run(["compat", "--vllm", "0.1.0,0.2.0,0.3.0", "--cache-dir", str(cache), "-f", "json"])
    pairs = json.loads(r.output)["pairs"]
    assert [(p["from"], p["to"]) for p in pairs] == [("0.1.0", "0.2.0"), ("0.2.0", "0.3.0")]
    assert pairs[0]["changes"] and not pairs[1]["changes"]
    md = _run(["compat", "--vllm", "0.1.0,0.2.0,0.3.0", "--cache-dir", str(cache),
               "-f", "markdown"]).output
    assert "## vLLM 0.1.0 -> 0.2.0" in md and "## vLLM 0.2.0 -> 0.3.0" in md


def test_usage_errors(env: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    cache, src = env
    assert main(["compat", str(src), "--cache-dir", str(cache)]) == 2
    assert "--vllm" in capsys.readouterr().err
    assert main(["compat", str(src), "--vllm-from-pins", "--cache-dir", str(cache)]) == 2
    assert "--vllm-from-pins in a project whose metadata requires vllm" in capsys.readouterr().err
    (src.parent / "pyproject.toml").write_text('[project]\nname = "toyconn"\n')
    assert main(["compat", str(src), "--vllm-from-pins", "--cache-dir", str(cache)]) == 2
    assert "no vllm requirement" in capsys.readouterr().err


def test_release_resolution(tmp_path: Path) -> None:
    available = ["0.27.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.30.1", "0.34.0"]
    assert resolve_releases("0.28.0..0.30.1", "vllm", available) == ["0.28.0", "0.29.0",
                                                                      "0.30.1"]
    assert resolve_releases("0.27.0..", "vllm", available)[0] == "0.27.1"  # newest patch
    assert resolve_releases("0.30.0, 0.28.0", "vllm") == ["0.28.0", "0.30.0"]
    assert _as_range(">=0.28,<0.31") == "0.28..0.30.999"
    assert _as_range("==0.30.0") == "0.30.0"
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "c"\ndependencies = ["torch", "vllm>=0.28.0,<=0.30.0"]\n')
    assert pinned_range(tmp_path, "vllm") == "0.28.0..0.30.0"
