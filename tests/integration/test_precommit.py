"""The pre-commit hook, from a clean `pre-commit run --all-files` in a new repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
STUBS = REPO / "rules" / "stubs"

CONNECTOR = '''
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class HangingConnector(KVConnectorBase_V1):
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return 16, True

    def start_load_kv(self, forward_context, **kwargs):
        pass
'''


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, text=True,
                          capture_output=True).stdout.strip()


@pytest.fixture()
def hook_repo(tmp_path: Path) -> str:
    """A clone of this repository with the working tree committed, so the hook
    pre-commit installs is the code under test."""
    clone = tmp_path / "kvflowmap-src"
    shutil.copytree(REPO, clone, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", "__pycache__", "*.egg-info", ".pytest_cache"))
    git(clone, "init", "-q")
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "snapshot")
    return str(clone)


def test_precommit_run_all_files(tmp_path: Path, hook_repo: str) -> None:
    if shutil.which("pre-commit") is None and not _has_module("pre_commit"):
        pytest.skip("pre-commit is not installed (pip install pre-commit)")
    sample = tmp_path / "sample"
    (sample / "src" / "hangconn").mkdir(parents=True)
    (sample / "src" / "hangconn" / "__init__.py").write_text("")
    (sample / "src" / "hangconn" / "connector.py").write_text(CONNECTOR.lstrip())
    (sample / "pyproject.toml").write_text(textwrap.dedent(f'''
        [tool.kvflowmap]
        sources = ["src"]
        context = ["{STUBS}"]
    '''))
    rev = git(Path(hook_repo), "rev-parse", "HEAD")
    (sample / ".pre-commit-config.yaml").write_text(textwrap.dedent(f'''
        repos:
          - repo: {hook_repo}
            rev: {rev}
            hooks:
              - id: kvflowmap-check
                args: [--select, kvc-async-load-has-reporter]
    '''))
    git(sample, "init", "-q")
    git(sample, "add", "-A")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pc-home")}
    cmd = [sys.executable, "-m", "pre_commit", "run", "--all-files"]
    run = subprocess.run(cmd, cwd=sample, env=env, text=True, capture_output=True, timeout=1200)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out  # the hanging connector is a finding
    assert "kvc-async-load-has-reporter" in out, out
    # Fixed connector: the hook passes.
    fixed = CONNECTOR.replace("return 16, True", "return 16, False")
    (sample / "src" / "hangconn" / "connector.py").write_text(fixed.lstrip())
    git(sample, "add", "-A")
    run = subprocess.run(cmd, cwd=sample, env=env, text=True, capture_output=True, timeout=1200)
    assert run.returncode == 0, run.stdout + run.stderr


def _has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None
