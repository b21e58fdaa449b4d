"""The package type-checks: ``mypy src/kvflowmap`` reports no errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_clean() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "src/kvflowmap", "--ignore-missing-imports"],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert proc.returncode == 0, f"mypy found errors:\n{proc.stdout}{proc.stderr}"
