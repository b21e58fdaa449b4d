"""``check --diff-base REV``: findings the change causes are reported wherever
they land, findings already there at REV are not."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from kvflowmap.check.stubs import stub_root
from kvflowmap.cli import main

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

HELPERS = '''
class Recorder:
    def _record(self, req_id):
        self._pending.add(req_id)
'''

CONNECTOR = '''
from conn.helpers import Recorder


class Worker(Recorder):
    def __init__(self):
        self._pending = set()
        self._futures = {}

    def start_load_kv(self, forward_context, **kwargs):
        for req_id in forward_context.reqs:
            self._record(req_id)

    def get_finished(self, finished_req_ids):
        done = set()
        while self._pending:
            done.add(self._pending.pop())
        for req_id, fut in self._futures.items():
            if fut.done():
                done.add(req_id)  # known at HEAD: never taken out of _futures
        return None, done

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        self._futures[request.request_id] = self._submit(request)

    def _submit(self, request):
        raise NotImplementedError
'''


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=repo,
                   check=True, capture_output=True)


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch) -> Path:
    root = tmp_path / "repo"
    (root / "conn").mkdir(parents=True)
    (root / "conn" / "__init__.py").write_text("")
    (root / "conn" / "helpers.py").write_text(HELPERS)
    (root / "conn" / "connector.py").write_text(CONNECTOR)
    _git(root, "init", "-q", ".")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "base")
    monkeypatch.chdir(root)
    return root


def _check(capsys, *args: str) -> tuple[int, list[tuple[str, str]]]:
    try:
        rc = main(["check", *args, "--context", str(stub_root()), "--no-cache", "-f", "json"])
    except SystemExit as exc:
        rc = int(exc.code or 0)
    data = json.loads(capsys.readouterr().out)
    return rc, [(f["rule"], f["file"]) for f in data["findings"]]


def test_a_change_in_a_helper_is_caught_in_its_unchanged_caller(repo: Path, capsys) -> None:
    helpers = repo / "conn" / "helpers.py"
    helpers.write_text(HELPERS.replace("self._pending.add(req_id)", "pass"))
    # the changed file alone as the filter sees nothing: the finding is in connector.py
    _, filtered = _check(capsys, str(helpers))
    assert filtered == []
    rc, found = _check(capsys, "--diff-base", "HEAD", "--fail-on", "warning", str(helpers))
    assert found == [("kvc-request-state-balanced", "conn/connector.py")]
    assert rc == 1


def test_findings_already_committed_are_not_new(repo: Path, capsys) -> None:
    _, everything = _check(capsys, "conn")
    assert ("kvc-reported-ids-leave-pending", "conn/connector.py") in everything
    rc, found = _check(capsys, "--diff-base", "HEAD", "--fail-on", "warning", "conn")
    assert found == [] and rc == 0


def test_an_unknown_revision_is_a_usage_error(repo: Path, capsys) -> None:
    try:
        rc = main(["check", "--diff-base", "no-such-rev", "conn", "--context", str(stub_root()),
                   "--no-cache"])
    except SystemExit as exc:
        rc = int(exc.code or 0)
    assert rc == 2
    assert "--diff-base no-such-rev: no such commit" in capsys.readouterr().err
