"""Tests for kvflowmap.sources.installed.

Fake distributions are made in a tmp dir put on sys.path: importlib.metadata
finds their dist-info there. Their packages raise on import, so a test fails
loudly if installed_root ever imports what it locates.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import kvflowmap
from kvflowmap.sources.errors import SourceError
from kvflowmap.sources.installed import installed_root

BOOM = "raise RuntimeError('imported by kvflowmap')\n"


def fake_dist(site: Path, name: str, version: str, record: list[str],
              extra: dict[str, str] | None = None) -> Path:
    """A dist-info in ``site`` listing ``record`` as its files."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text("".join(f"{r},,\n" for r in record))
    for fname, text in (extra or {}).items():
        (info / fname).write_text(text)
    return info


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "site"
    d.mkdir()
    monkeypatch.syspath_prepend(str(d))
    return d


def test_regular_install(site: Path) -> None:
    (site / "fakepkg").mkdir()
    (site / "fakepkg" / "__init__.py").write_text(BOOM)
    fake_dist(site, "fakepkg", "1.5", ["fakepkg/__init__.py"])
    assert installed_root("fakepkg") == (site, "1.5")
    assert "fakepkg" not in sys.modules


def test_import_name_maps_to_its_distribution(site: Path) -> None:
    (site / "pegaflow").mkdir()
    (site / "pegaflow" / "__init__.py").write_text(BOOM)
    fake_dist(site, "pegaflow_llm", "0.25.1", ["pegaflow/__init__.py"])
    assert installed_root("pegaflow") == (site, "0.25.1")
    assert installed_root("pegaflow-llm") == (site, "0.25.1")


def test_import_name_owned_by_two_distributions_is_ambiguous(site: Path) -> None:
    fake_dist(site, "dup_a", "1", ["sharedtop/a.py"])
    fake_dist(site, "dup_b", "1", ["sharedtop/b.py"])
    with pytest.raises(SourceError, match="dup_a, dup_b"):
        installed_root("sharedtop")


def test_missing_files_are_reported(site: Path) -> None:
    fake_dist(site, "ghostpkg", "2.0", ["ghostpkg/__init__.py"])
    with pytest.raises(SourceError, match="ghostpkg 2.0 is installed but none of its "
                                          "Python files exist"):
        installed_root("ghostpkg")


def test_not_installed() -> None:
    with pytest.raises(SourceError, match="'no-such-dist-kvflowmap' is not installed"):
        installed_root("no-such-dist-kvflowmap")


def test_editable_pth(site: Path, tmp_path: Path) -> None:
    src = tmp_path / "project" / "src"
    (src / "edpkg").mkdir(parents=True)
    (src / "edpkg" / "__init__.py").write_text(BOOM)
    (site / "__editable__.edpkg-0.3.pth").write_text(f"import os\n{tmp_path}\n{src}\n")
    fake_dist(site, "edpkg", "0.3", ["__editable__.edpkg-0.3.pth"],
              {"top_level.txt": "edpkg\n"})
    # tmp_path itself is listed first but holds no edpkg: it must be skipped.
    assert installed_root("edpkg") == (src, "0.3")


def test_editable_setuptools_finder(site: Path, tmp_path: Path) -> None:
    pkg = tmp_path / "flat" / "finpkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(BOOM)
    finder = "__editable___finpkg_1_0_finder.py"
    (site / finder).write_text(f"{BOOM}MAPPING: dict[str, str] = {{'finpkg': {str(pkg)!r}}}\n")
    fake_dist(site, "finpkg", "1.0", [finder])
    assert installed_root("finpkg") == (pkg.parent, "1.0")


def test_editable_direct_url(site: Path, tmp_path: Path) -> None:
    project = tmp_path / "durproj"
    (project / "src" / "durpkg").mkdir(parents=True)
    fake_dist(site, "durpkg", "0.9", ["durpkg-0.9.dist-info/METADATA"],
              {"direct_url.json": json.dumps(
                  {"url": project.as_uri(), "dir_info": {"editable": True}})})
    assert installed_root("durpkg") == (project / "src", "0.9")


def test_kvflowmap_itself() -> None:
    root, version = installed_root("kvflowmap")
    assert version == kvflowmap.__version__
    assert (root / "kvflowmap" / "sources" / "installed.py").is_file()
