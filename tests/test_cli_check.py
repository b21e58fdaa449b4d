"""`kvflowmap check` end to end: exit codes, formats, filters, suppressions, baseline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvflowmap.check.stubs import stub_root
from kvflowmap.cli import main

HANGS = '''
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Hangs(KVConnectorBase_V1):
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return 16, True{suppress}

    def start_load_kv(self, forward_context, **kwargs):
        pass
'''
CLEAN = '''
def helper():
    return 1
'''
RULE = ["--select", "kvc-async-load-has-reporter"]


@pytest.fixture
def repo(tree):
    def make(suppress: str = "") -> Path:
        root = tree({"conn/__init__.py": "", "conn/hangs.py": HANGS.format(suppress=suppress),
                     "conn/clean.py": CLEAN})
        (root / "pyproject.toml").write_text(
            f'[tool.kvflowmap]\nsources = ["conn"]\ncontext = ["{stub_root()}"]\n')
        return root
    return make


def run(root: Path, monkeypatch, *args: str) -> int:
    monkeypatch.chdir(root)
    return main(["check", *args])


def test_finding_exits_1_and_json_names_it(repo, monkeypatch, capsys) -> None:
    root = repo()
    assert run(root, monkeypatch, *RULE, "-f", "json", "-q") == 1
    data = json.loads(capsys.readouterr().out)
    (f,) = data["findings"]
    assert f["rule"] == "kvc-async-load-has-reporter" and f["file"] == "conn/hangs.py"
    assert f["line"] == 6 and f["path"] and f["fingerprint"]
    assert data["summary"]["total"] == 1


def test_text_and_sarif_and_github(repo, monkeypatch, capsys, tmp_path) -> None:
    root = repo()
    assert run(root, monkeypatch, *RULE) == 1
    assert "kvc-async-load-has-reporter" in capsys.readouterr().out
    out = tmp_path / "r.sarif"
    assert run(root, monkeypatch, *RULE, "-f", "sarif", "-o", str(out), "-q") == 1
    sarif = json.loads(out.read_text())
    assert sarif["version"] == "2.1.0" and sarif["runs"][0]["results"][0]["codeFlows"]
    assert run(root, monkeypatch, *RULE, "-f", "github", "-q") == 1
    assert capsys.readouterr().out.startswith("::error file=")


def test_github_annotations_name_files_from_the_checkout(tree, monkeypatch, capsys) -> None:
    """A package under ``src/``: the annotation names ``src/conn/hangs.py``
    (what GitHub attaches to), not the root-relative ``conn/hangs.py``."""
    root = tree({"src/conn/__init__.py": "", "src/conn/hangs.py": HANGS.format(suppress="")})
    (root / "pyproject.toml").write_text(
        f'[tool.kvflowmap]\nsources = ["src"]\ncontext = ["{stub_root()}"]\n')
    assert run(root, monkeypatch, *RULE, "-f", "github", "-q") == 1
    assert capsys.readouterr().out.startswith("::error file=src/conn/hangs.py,")
    # SARIF too: GitHub's upload joins URIs to the checkout and ignores uriBaseId
    assert run(root, monkeypatch, *RULE, "-f", "sarif", "--output", "r.sarif", "-q") == 1
    result = json.loads((root / "r.sarif").read_text())["runs"][0]["results"][0]
    loc = result["locations"][0]["physicalLocation"]["artifactLocation"]
    assert loc == {"uri": "src/conn/hangs.py"}
    # and the text and JSON reports name the same path, with the same fingerprint
    assert run(root, monkeypatch, *RULE, "-o", "r.json", "-q") == 1
    found = json.loads((root / "r.json").read_text())["findings"][0]
    assert found["file"] == "src/conn/hangs.py"
    # the steps of its path too: a reader opens them from the same place
    assert found["path"] and {st["file"] for st in found["path"]} == {"src/conn/hangs.py"}
    # kvflowmap's own JSON is not SARIF: a .sarif file only takes -f sarif
    assert run(root, monkeypatch, *RULE, "-f", "json", "-o", "r2.sarif", "-q") == 2
    assert found["fingerprint"] == result["partialFingerprints"]["kvflowmap/v1"]
    assert run(root, monkeypatch, *RULE, "-q") == 1
    assert "\nsrc/conn/hangs.py:6:1  error" in capsys.readouterr().out


def test_files_given_filter_what_is_reported(repo, monkeypatch) -> None:
    root = repo()
    assert run(root, monkeypatch, *RULE, "conn/clean.py", "-q") == 0
    assert run(root, monkeypatch, *RULE, "conn/hangs.py", "-q") == 1


def test_fail_on_and_unknown_rule(repo, monkeypatch, capsys) -> None:
    root = repo()
    assert run(root, monkeypatch, "--select", "no-such-rule", "-q") == 2
    assert "no-such-rule" in capsys.readouterr().err


def test_malformed_rule_file_exits_2_with_file_and_line(repo, monkeypatch, capsys, tmp_path) -> None:
    bad = tmp_path / "rules" / "x.yaml"
    bad.parent.mkdir()
    bad.write_text("id: x\ntitle: t\nseverity: fatal\nkind: reach\n")
    assert run(repo(), monkeypatch, "--rules", str(bad.parent), "-q") == 2
    err = capsys.readouterr().err
    assert "x.yaml:3" in err and "severity" in err


def test_inline_suppression(repo, monkeypatch, capsys) -> None:
    root = repo("  # kvflowmap: ignore[kvc-async-load-has-reporter] -- reported by a plugin")
    assert run(root, monkeypatch, *RULE, "-q") == 0
    capsys.readouterr()
    root = repo("  # kvflowmap: ignore[kvc-async-load-has-reporter]")
    assert run(root, monkeypatch, *RULE, "-q", "-f", "json", "--fail-on", "warning") == 1
    rules = {f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert rules == {"bad-suppression"}


def test_baseline_reports_only_new_findings(repo, monkeypatch, tmp_path) -> None:
    root = repo()
    base = tmp_path / "baseline.json"
    assert run(root, monkeypatch, *RULE, "--write-baseline", str(base), "-q") == 1
    assert run(root, monkeypatch, *RULE, "--baseline", str(base), "-q") == 0
    (root / "conn/more.py").write_text(HANGS.format(suppress="").replace("Hangs", "Hangs2"))
    assert run(root, monkeypatch, *RULE, "--baseline", str(base), "-q") == 1


def test_warm_run_reuses_the_result(repo, monkeypatch, capsys) -> None:
    root = repo()
    assert run(root, monkeypatch, *RULE, "-v") == 1
    capsys.readouterr()
    assert run(root, monkeypatch, *RULE, "-v") == 1
    assert "result reused" in capsys.readouterr().err
    (root / "conn/clean.py").write_text(CLEAN + "\n\ndef other():\n    return 2\n")
    assert run(root, monkeypatch, *RULE, "-v") == 1
    err = capsys.readouterr().err
    assert "result reused" not in err and "files parsed 1," in err


CONNECTOR = '''
import queue
import threading

from conn.helpers import send


class Sender:
    def __init__(self):
        self._q = queue.Queue()
        self._done = set()
        threading.Thread(target=self._run, daemon=True).start()

    def request_finished(self, request, block_ids):
        self._q.put(request.request_id)
        return True, None

    def _run(self):
        while True:
            req_id = self._q.get()
            send(req_id)
            self._done.add(req_id)
'''
HELPER_SAFE = '''
import logging


def send(req_id):
    try:
        _post(req_id)
    except Exception:
        logging.getLogger(__name__).exception("send failed")


def _post(req_id):
    raise RuntimeError(req_id)
'''
HELPER_RAISES = '''
def send(req_id):
    _post(req_id)


def _post(req_id):
    raise RuntimeError(req_id)
'''


def test_a_changed_helper_reports_what_it_causes_in_its_caller(tree, monkeypatch) -> None:
    """pre-commit passes only the changed file: a finding the change causes in
    an unchanged caller is still reported."""
    for helper, want in ((HELPER_SAFE, 0), (HELPER_RAISES, 1)):
        root = tree({"conn/__init__.py": "", "conn/connector.py": CONNECTOR,
                     "conn/helpers.py": helper})
        (root / "pyproject.toml").write_text(
            f'[tool.kvflowmap]\nsources = ["conn"]\ncontext = ["{stub_root()}"]\n')
        assert run(root, monkeypatch, "--select", "kvc-thread-loop-survives",
                   "conn/helpers.py", "-q") == want, helper


@pytest.mark.parametrize("args", [["where", "Hangs"], ["path", "Hangs.get_num_new_matched_tokens",
                                                       "Hangs.start_load_kv"],
                                  ["states", "-f", "json"], ["docs", "-o", "pages"]])
def test_queries_reuse_their_answer(repo, monkeypatch, capsys, args) -> None:
    root = repo()
    monkeypatch.chdir(root)
    first = main([*args, "-v"])
    out1, err1 = capsys.readouterr()
    assert "result reused" not in err1
    assert main([*args, "-v"]) == first
    out2, err2 = capsys.readouterr()
    assert "result reused" in err2 and out2 == out1 and (out1 or args[0] == "docs")
    (root / "conn/clean.py").write_text(CLEAN + "\n\ndef other():\n    return 2\n")
    assert main([*args, "-v"]) == first
    assert "result reused" not in capsys.readouterr().err


def test_a_new_process_reuses_the_stored_result(repo) -> None:
    # a fresh interpreter loads the memo before any rule kind is imported: the
    # stored classes must load there too (in-process runs have them loaded)
    import subprocess
    import sys

    root = repo()
    cmd = [sys.executable, "-m", "kvflowmap", "check", *RULE, "-v"]
    first = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=300)
    again = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=300)
    assert first.returncode == again.returncode == 1
    assert "result reused" not in first.stderr and "result reused" in again.stderr
    assert again.stdout == first.stdout


def test_a_dying_loop_names_the_raise_below_it(tree, monkeypatch, capsys) -> None:
    """The finding is at the loop's call; its path goes on to the explicit
    ``raise`` the exception starts from, two calls down."""
    root = tree({"conn/__init__.py": "", "conn/connector.py": CONNECTOR,
                 "conn/helpers.py": HELPER_RAISES})
    (root / "pyproject.toml").write_text(
        f'[tool.kvflowmap]\nsources = ["conn"]\ncontext = ["{stub_root()}"]\n')
    assert run(root, monkeypatch, "--select", "kvc-thread-loop-survives", "-f", "json") == 1
    (found,) = json.loads(capsys.readouterr().out)["findings"]
    last = found["path"][-1]
    # (the fixture's first, empty line is not in the file)
    assert (last["file"], last["line"], last["function"]) == ("conn/helpers.py", 6,
                                                              "conn.helpers._post")
    assert "`raise` reaches the loop" in last["note"]
