"""The package's layers hold: ``lint-imports`` with the contracts in
pyproject.toml (rule kinds import no CLI, console, source loading or API; the
lifecycle model imports no rule kind; the index is below everything else; the
rule kinds are independent of each other)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept() -> None:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    proc = subprocess.run([exe, "--no-cache"], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, f"an import contract is broken:\n{proc.stdout}{proc.stderr}"
    assert " 0 broken" in proc.stdout
