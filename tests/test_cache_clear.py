"""`kvflowmap cache clear` deletes facts and run results, and says so only
when it did: an entry it cannot delete is an error naming it (exit 2)."""

from __future__ import annotations

import shutil
from pathlib import Path

from kvflowmap.cli import main


def _fill(root: Path) -> None:
    for part in ("facts/ab", "runs", "compat", "releases/x"):
        (root / part).mkdir(parents=True)
        (root / part / "entry.pkl").write_bytes(b"x")


def test_clear_removes_facts_and_runs_keeps_releases(tmp_path: Path, capsys) -> None:
    _fill(tmp_path)
    assert main(["cache", "clear", "--cache-dir", str(tmp_path)]) == 0
    assert "cleared facts, runs, compat" in capsys.readouterr().out
    assert not (tmp_path / "facts").exists() and not (tmp_path / "runs").exists()
    assert not (tmp_path / "compat").exists()
    assert (tmp_path / "releases/x/entry.pkl").exists()


def test_an_entry_that_cannot_be_deleted_is_an_error(tmp_path: Path, monkeypatch,
                                                      capsys) -> None:
    _fill(tmp_path)

    def refuse(path, onerror=None, **kwargs):  # what a read-only cache does
        err = PermissionError(13, "Permission denied")
        onerror(Path.unlink, str(Path(path) / "entry.pkl"), (PermissionError, err, None))

    monkeypatch.setattr(shutil, "rmtree", refuse)
    assert main(["cache", "clear", "--cache-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "could not clear the cache" in err and "Permission denied" in err
    assert "cleared" not in err


def test_fetch_into_an_unwritable_cache_is_an_error_naming_it(tmp_path: Path, capsys) -> None:
    blocked = tmp_path / "a-file"  # a cache root under a regular file: unwritable even for root
    blocked.write_text("")
    assert main(["fetch", "pegaflow-llm==0.25.1", "--cache-dir", str(blocked / "cache")]) == 2
    err = capsys.readouterr().err
    assert "cannot store the release under" in err and "Traceback" not in err
