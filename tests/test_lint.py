"""The code passes ruff's pyflakes and bugbear rules (``[tool.ruff]`` in pyproject)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_ruff_pyflakes_and_bugbear_are_clean() -> None:
    exe = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    proc = subprocess.run([exe, "check", "--no-cache", "src", "tests", "bench"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"ruff found problems:\n{proc.stdout}{proc.stderr}"
