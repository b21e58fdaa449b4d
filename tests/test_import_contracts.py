"""The package's layers hold: ``lint-imports`` with the contracts in
pyproject.toml (rule kinds import no CLI, console, source loading or API; the
lifecycle model imports no rule kind; the index is below everything else; the
rule kinds are independent of each other; and the layers, from the CLI down
to the facts, each importing only from those below it)."""

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


def test_the_layers_contract_is_declared_top_down() -> None:
    import tomllib

    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"][
        "contracts"]
    layers = next(c["layers"] for c in contracts if c["type"] == "layers")
    order = [name for layer in layers for name in layer.replace(" ", "").split(":")]
    for upper, lower in (("kvflowmap.cli", "kvflowmap.commands"),
                         ("kvflowmap.commands", "kvflowmap.docs"),
                         ("kvflowmap.docs", "kvflowmap.check"),
                         ("kvflowmap.check", "kvflowmap.lifecycle"),
                         ("kvflowmap.lifecycle", "kvflowmap.graph"),
                         ("kvflowmap.graph", "kvflowmap.model"),
                         ("kvflowmap.model", "kvflowmap.index"),
                         ("kvflowmap.index", "kvflowmap.facts")):
        assert order.index(upper) < order.index(lower), (upper, lower)
