"""Tests for kvflowmap.sources.config."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kvflowmap.sources.config import ProjectConfig, load_config
from kvflowmap.sources.errors import ConfigError, SourceError

FULL = """
[project]
name = "demo"

[tool.kvflowmap]
sources = ["src", "/abs/elsewhere"]
context = ["../vllm"]
releases = ["vllm==0.33.0", "pegaflow-llm==0.25.1"]
exclude = ["*/tests/*"]
link_template = "https://example.org/blob/main/{path}#L{line}"
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_full_table_is_read_and_paths_resolved_from_the_pyproject(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proj = tmp_path / "proj"
    pyproject = write(proj / "pyproject.toml", FULL)
    monkeypatch.chdir(tmp_path)  # relative paths must not depend on the cwd
    cfg = load_config(proj)
    assert cfg == ProjectConfig(
        path=pyproject.resolve(),
        sources=(str((proj / "src").resolve()), "/abs/elsewhere"),
        context=(str((tmp_path / "vllm").resolve()),),
        releases=("vllm==0.33.0", "pegaflow-llm==0.25.1"),
        exclude=("*/tests/*",),
        link_template="https://example.org/blob/main/{path}#L{line}",
    )


def test_search_goes_up_and_skips_pyprojects_without_the_table(tmp_path: Path) -> None:
    outer = write(tmp_path / "pyproject.toml", '[tool.kvflowmap]\nsources = ["a"]\n')
    write(tmp_path / "inner" / "pyproject.toml", '[project]\nname = "inner"\n')
    deep = tmp_path / "inner" / "pkg" / "sub"
    deep.mkdir(parents=True)
    cfg = load_config(deep)
    assert cfg.path == outer.resolve()
    assert cfg.sources == (str((tmp_path / "a").resolve()),)


def test_nearest_table_wins(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.kvflowmap]\nsources = ["outer"]\n')
    inner = write(tmp_path / "inner" / "pyproject.toml",
                  '[tool.kvflowmap]\nexclude = ["x"]\n')
    cfg = load_config(tmp_path / "inner")
    assert cfg.path == inner.resolve()
    assert cfg.sources == () and cfg.exclude == ("x",)


def test_start_may_be_a_file(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.kvflowmap]\n")
    module = write(tmp_path / "pkg" / "mod.py", "")
    cfg = load_config(module)
    assert cfg.path == (tmp_path / "pyproject.toml").resolve()
    assert cfg.sources == ()


def test_no_table_anywhere_gives_empty_config(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.other]\nx = 1\n')
    cfg = load_config(tmp_path)
    assert cfg == ProjectConfig()
    assert cfg.path is None and cfg.link_template is None


def test_all_errors_are_reported_at_once(tmp_path: Path) -> None:
    pyproject = write(tmp_path / "pyproject.toml", """
[tool.kvflowmap]
sources = "src"
context = ["ok", 3]
releases = ["vllm>=0.3", "ok==1.0"]
exclude = []
link_template = 5
sorces = ["typo"]
""")
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    exc = err.value
    assert isinstance(exc, SourceError)
    assert exc.path == pyproject.resolve()
    assert len(exc.errors) == 5, exc.errors
    msg = str(exc)
    assert str(pyproject.resolve()) in msg and "[tool.kvflowmap]" in msg
    assert "sources: expected a list of strings" in msg and "got a string" in msg
    assert "context[1]: expected a string, got an integer" in msg
    assert "releases[0]: 'vllm>=0.3' is not NAME==VERSION" in msg
    assert "link_template: expected a string" in msg
    assert "unknown key 'sorces'" in msg
    assert "known keys: context, exclude, link_template, link_templates, releases, sources" in msg


def test_table_that_is_not_a_table(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool]\nkvflowmap = 1\n")
    with pytest.raises(ConfigError, match="expected a table, got an integer"):
        load_config(tmp_path)


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    pyproject = write(tmp_path / "pyproject.toml", "[tool.kvflowmap\nsources = [\n")
    with pytest.raises(ConfigError, match="not valid TOML") as err:
        load_config(tmp_path)
    assert str(pyproject.resolve()) in str(err.value)


def test_config_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        ProjectConfig().sources = ("x",)  # type: ignore[misc]


def test_context_may_name_the_shipped_stub_vllm(tmp_path: Path) -> None:
    """``kvflowmap:stub-vllm`` is the stub vLLM shipped with the rules, so a
    project copied anywhere (the toy example) needs no path into this repo."""
    from kvflowmap.check.stubs import stub_root

    write(tmp_path / "pyproject.toml",
          '[tool.kvflowmap]\nsources = ["src"]\ncontext = ["kvflowmap:stub-vllm", "ctx"]\n')
    cfg = load_config(tmp_path)
    assert cfg.context == (str(stub_root()), str((tmp_path / "ctx").resolve()))
    assert (stub_root() / "vllm").is_dir()
