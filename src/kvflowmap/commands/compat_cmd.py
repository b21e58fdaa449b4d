"""``kvflowmap compat``: options to a run (``kvflowmap.compat.run``), then
the output in the chosen format, or ``--check`` against a committed table."""

from __future__ import annotations

import json
from pathlib import Path

import click

from kvflowmap.compat.output_data import (diff_json, diff_markdown, matrix_json,
                                          matrix_markdown, matrix_sarif, stale)
from kvflowmap.compat.output_text import diff_text, matrix_text
from kvflowmap.compat.run import pick_releases, run_diff, run_matrix
from kvflowmap.compat.surface_cache import SurfaceStore
from kvflowmap.index.cache import default_cache_dir
from kvflowmap.protocol import load_protocol

SUFFIXES = {".txt": "text", ".json": "json", ".md": "markdown", ".sarif": "sarif"}


def store_for(cache_dir: str | None, no_cache: bool) -> SurfaceStore:
    """The surface store over the user cache (releases are always kept there)."""
    root = Path(cache_dir) if cache_dir else default_cache_dir()
    return SurfaceStore(root, load_protocol(), use_cache=not no_cache)


def diff_output(store: SurfaceStore, refs: tuple[str, str], fmt: str) -> str:
    """The text of ``--diff A B`` in ``fmt``."""
    a, b, changes = run_diff(store, *refs)
    if fmt == "json":
        return diff_json(a.version, b.version, changes)
    if fmt == "markdown":
        return diff_markdown(a.version, b.version, changes)
    if fmt == "sarif":
        raise click.UsageError("--diff has no SARIF form (it has no findings): use json")
    return diff_text(a.version, b.version, changes)


def range_diff_output(store: SurfaceStore, vllm: str, fmt: str) -> str:
    """The diffs of each consecutive pair of the releases ``vllm`` names."""
    versions = pick_releases(store, vllm, [])
    if len(versions) < 2:
        raise click.UsageError(f"--vllm {vllm} names fewer than two releases to compare")
    pairs = list(zip(versions, versions[1:], strict=False))
    if fmt == "json":
        out = [json.loads(diff_output(store, pair, "json")) for pair in pairs]
        return json.dumps({"pairs": out}, indent=2, sort_keys=True) + "\n"
    heads = "## " if fmt == "markdown" else ""
    return "\n".join(f"{heads}vLLM {a} -> {b}\n\n{diff_output(store, (a, b), fmt)}"
                     for a, b in pairs)


def matrix_output(store: SurfaceStore, sources: list[Path], vllm: str | None,
                  from_pins: bool, classes: list[str], fmt: str, notes: bool) -> str:
    """The text of the matrix in ``fmt``."""
    if not vllm and not from_pins:
        raise click.UsageError("give --vllm A..B (or A,B,C), --vllm-from-pins, or --diff A B")
    versions = pick_releases(store, vllm, sources)
    m = run_matrix(store, sources, versions, classes or None)
    if fmt == "json":
        return matrix_json(m)
    if fmt == "markdown":
        return matrix_markdown(m)
    if fmt == "sarif":
        return matrix_sarif(m)
    return matrix_text(m, notes=notes)


def check_file(expected: str, path: str) -> int:
    """0 when ``path`` holds ``expected`` (or its marked block does), else 1."""
    try:
        committed = Path(path).read_text("utf-8")
    except OSError as exc:
        click.echo(f"{path}: cannot read: {exc.strerror or exc}", err=True)
        return 1
    if stale(expected, committed):
        click.echo(f"{path}: the compat table is stale; regenerate it with "
                   "`kvflowmap compat ... -f markdown` and paste it", err=True)
        return 1
    return 0
