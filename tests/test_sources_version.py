"""Tests for kvflowmap.sources.version."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvflowmap.sources.version import detect_version, version_literal


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def meta(name: str, version: str) -> str:
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nLong description\n"


@pytest.mark.parametrize("package", ["pega-flow", "pega_flow", "PEGA.flow"])
def test_dist_info_name_is_normalized(tmp_path: Path, package: str) -> None:
    write(tmp_path / "Pega_Flow-1.2.dist-info" / "METADATA", meta("Pega-Flow", "1.2"))
    assert detect_version(tmp_path, package) == "1.2"


def test_import_name_found_through_record(tmp_path: Path) -> None:
    # pegaflow-llm's wheel has no top_level.txt; RECORD says it owns pegaflow/.
    info = tmp_path / "pegaflow_llm-0.25.1.dist-info"
    write(info / "METADATA", meta("pegaflow-llm", "0.25.1"))
    write(info / "RECORD", "pegaflow/__init__.py,sha256=x,1\npegaflow/connector/w.py,,\n")
    write(tmp_path / "other-9.dist-info" / "METADATA", meta("other", "9"))
    write(tmp_path / "other-9.dist-info" / "RECORD", "pegaflowish/__init__.py,,\n")
    assert detect_version(tmp_path, "pegaflow") == "0.25.1"


def test_import_name_found_through_top_level(tmp_path: Path) -> None:
    info = tmp_path / "PyYAML-6.0.dist-info"
    write(info / "METADATA", meta("PyYAML", "6.0"))
    write(info / "top_level.txt", "_yaml\nyaml\n")
    assert detect_version(tmp_path, "yaml") == "6.0"


def test_own_dist_wins_over_a_dist_vendoring_the_package(tmp_path: Path) -> None:
    write(tmp_path / "bundle-5.0.dist-info" / "METADATA", meta("bundle", "5.0"))
    write(tmp_path / "bundle-5.0.dist-info" / "top_level.txt", "vllm\n")
    write(tmp_path / "vllm-0.33.0.dist-info" / "METADATA", meta("vllm", "0.33.0"))
    assert detect_version(tmp_path, "vllm") == "0.33.0"


def test_egg_info_dir_and_file(tmp_path: Path) -> None:
    write(tmp_path / "lmcache.egg-info" / "PKG-INFO", meta("lmcache", "0.5.6"))
    write(tmp_path / "oldpkg-1.0-py2.7.egg-info", meta("oldpkg", "1.0"))
    assert detect_version(tmp_path, "lmcache") == "0.5.6"
    assert detect_version(tmp_path, "oldpkg") == "1.0"


def test_sdist_pkg_info_above_src(tmp_path: Path) -> None:
    write(tmp_path / "PKG-INFO", meta("tinypkg", "2.0"))
    (tmp_path / "src" / "tinypkg").mkdir(parents=True)
    assert detect_version(tmp_path / "src", "tinypkg") == "2.0"
    assert detect_version(tmp_path, "tinypkg") == "2.0"
    assert detect_version(tmp_path, "otherpkg") is None  # PKG-INFO names tinypkg


def test_version_file_is_parsed_not_executed(tmp_path: Path) -> None:
    write(tmp_path / "pkg" / "_version.py",
          "raise RuntimeError('executed')\n__version__ = version = '1.4.0'\n")
    assert detect_version(tmp_path, "pkg") == "1.4.0"


def test_version_py_and_single_module(tmp_path: Path) -> None:
    write(tmp_path / "a" / "version.py", "version = '2.0'\n")
    write(tmp_path / "b" / "__init__.py", "__version__ = '3.0'\n")
    write(tmp_path / "c.py", "__version__ = '4.0'\n")
    assert detect_version(tmp_path, "a") == "2.0"
    assert detect_version(tmp_path, "b") == "3.0"
    assert detect_version(tmp_path, "c") == "4.0"


def test_metadata_beats_version_file(tmp_path: Path) -> None:
    write(tmp_path / "pkg-2.0.dist-info" / "METADATA", meta("pkg", "2.0"))
    write(tmp_path / "pkg" / "_version.py", "__version__ = '0.0.dev0'\n")
    assert detect_version(tmp_path, "pkg") == "2.0"


def test_nothing_found(tmp_path: Path) -> None:
    write(tmp_path / "pkg" / "__init__.py", "from ._v import __version__\n")
    assert detect_version(tmp_path, "pkg") is None
    assert detect_version(tmp_path / "missing", "pkg") is None


@pytest.mark.parametrize("source,expected", [
    ("__version__ = '1.0'\n", "1.0"),
    ("version = '1.0'\n__version__ = '2.0'\n", "2.0"),
    ("__version__: str = '0.5.6'\n", "0.5.6"),
    ("__version__ = version = '3.1'\n", "3.1"),
    ("__version__ = get_version()\n", None),
    ("def f():\n    __version__ = '9'\n", None),
    ("if True:\n    __version__ = '9'\n", None),
    ("__version__ = (1, 0)\n", None),
    ("this is not python(\n", None),
])
def test_version_literal(source: str, expected: str | None) -> None:
    assert version_literal(source) == expected
