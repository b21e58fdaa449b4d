"""Read ``[tool.kvflowmap]`` from the nearest pyproject.toml that has it.

Example::

    [tool.kvflowmap]
    sources = ["src"]                  # the code under analysis
    context = ["../vllm"]              # code it calls into, analysed as context
                                       # ("kvflowmap:stub-vllm": the shipped stub vLLM)
    releases = ["vllm==0.33.0"]        # context fetched from the package index
    exclude = ["*/tests/*"]            # glob patterns of files to skip
    link_template = "https://example.org/blob/main/{path}#L{line}"
    link_templates = {vllm = "https://github.com/vllm-project/vllm/blob/v{version}/{file}#L{line}"}

The whole table is validated up front and every problem is reported in one
error, so a user fixes the file in one pass.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvflowmap.sources.errors import ConfigError, SourceError
from kvflowmap.sources.release_spec import parse_spec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

TABLE = "[tool.kvflowmap]"


@dataclass(frozen=True)
class ProjectConfig:
    """Project settings; the defaults are what an absent table means."""

    path: Path | None = None  # the pyproject.toml read, None when none had the table
    sources: tuple[str, ...] = ()  # absolute paths
    context: tuple[str, ...] = ()  # absolute paths
    releases: tuple[str, ...] = ()  # validated NAME==VERSION specs
    exclude: tuple[str, ...] = ()  # glob patterns, as written
    link_template: str | None = None
    # root name (vllm, pegaflow) -> its link template
    link_templates: dict[str, str] | None = None


def load_config(start: Path) -> ProjectConfig:
    """Config of the first pyproject.toml with ``[tool.kvflowmap]`` above ``start``.

    ``start`` is a file or directory; pyproject files without the table are
    passed over. Returns an empty ProjectConfig when no file has the table.
    Raises ConfigError naming the file and every invalid key.
    """
    start = Path(start).resolve()
    here = start if start.is_dir() else start.parent
    for directory in (here, *here.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            table = _read_table(candidate)
            if table is not None:
                return _build(candidate, table)
    return ProjectConfig()


def _read_table(path: Path) -> Any:
    """The raw ``[tool.kvflowmap]`` value of ``path``, or None when absent."""
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}", path=path,
                          errors=[str(exc)]) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc}", path=path,
                          errors=[str(exc)]) from None
    tool = data.get("tool")
    return tool.get("kvflowmap") if isinstance(tool, dict) else None


# Each checker returns (value, errors); the value is unused when errors exist.
Checker = Callable[[str, Any, Path], tuple[Any, list[str]]]


def _type_name(value: Any) -> str:
    return {str: "a string", bool: "a boolean", int: "an integer", float: "a number",
            list: "a list", dict: "a table"}.get(type(value), type(value).__name__)


def _strings(key: str, value: Any, base: Path) -> tuple[tuple[str, ...], list[str]]:
    if not isinstance(value, list):
        return (), [f"{key}: expected a list of strings, e.g. {key} = [\"...\"], "
                    f"got {_type_name(value)}"]
    errors = [f"{key}[{i}]: expected a string, got {_type_name(v)}"
              for i, v in enumerate(value) if not isinstance(v, str)]
    return tuple(value), errors


# A context entry naming the stub vLLM shipped with kvflowmap's rules, so that a
# project (the toy example copied anywhere) needs no path into this repository.
STUB_VLLM = "kvflowmap:stub-vllm"
_STUB_ROOT = Path(__file__).resolve().parent.parent / "rules" / "stubs"


def _paths(key: str, value: Any, base: Path) -> tuple[tuple[str, ...], list[str]]:
    items, errors = _strings(key, value, base)
    if errors:
        return (), errors
    # Relative to the pyproject's directory, not the cwd: the same config must
    # mean the same files wherever kvflowmap is run from.
    return tuple(str(_STUB_ROOT) if key == "context" and p == STUB_VLLM else
                 str((base / Path(p).expanduser()).resolve()) for p in items), []


def _specs(key: str, value: Any, base: Path) -> tuple[tuple[str, ...], list[str]]:
    items, errors = _strings(key, value, base)
    if errors:
        return (), errors
    for i, item in enumerate(items):
        try:
            parse_spec(item)
        except SourceError:
            errors.append(f"{key}[{i}]: {item!r} is not NAME==VERSION, "
                          "e.g. \"vllm==0.33.0\"")
    return items, errors


def _opt_str(key: str, value: Any, base: Path) -> tuple[str | None, list[str]]:
    if isinstance(value, str):
        return value, []
    return None, [f"{key}: expected a string, got {_type_name(value)}"]


def _str_table(key: str, value: Any, base: Path) -> tuple[dict[str, str] | None, list[str]]:
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return {str(k): v for k, v in value.items()}, []
    return None, [f"{key}: expected a table of strings (root name = URL template), "
                  f"got {_type_name(value)}"]


KEYS: dict[str, Checker] = {
    "sources": _paths,
    "context": _paths,
    "releases": _specs,
    "exclude": _strings,
    "link_template": _opt_str,
    "link_templates": _str_table,
}


def _build(path: Path, table: Any) -> ProjectConfig:
    """Validate every key of the table; raise one ConfigError listing all."""
    if not isinstance(table, dict):
        errors = [f"expected a table, got {_type_name(table)}"]
        table = {}
    else:
        errors = []
    values: dict[str, Any] = {}
    for key in sorted(table):
        checker = KEYS.get(key)
        if checker is None:
            errors.append(f"unknown key {key!r}; known keys: {', '.join(sorted(KEYS))}")
            continue
        values[key], key_errors = checker(key, table[key], path.parent)
        errors += key_errors
    if errors:
        lines = "".join(f"\n  - {e}" for e in errors)
        raise ConfigError(f"{path}: invalid {TABLE}:{lines}", path=path, errors=errors)
    return ProjectConfig(path=path, **values)
