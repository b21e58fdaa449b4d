"""Glue between the CLI and the navigation queries: run one, print or write
its output, and turn outcomes into exit codes (0 found, 1 ambiguous or no
path, 2 a name that matches nothing).

The queries' modules (networkx, the lifecycle model, LibCST behind it) are
imported inside the functions that run them: a warm run reuses the stored
answer and imports none of them (0.35 s of a 0.8 s warm ``where``)."""

from __future__ import annotations

import shutil
import sys

import click

from typing import TYPE_CHECKING

from kvflowmap.commands.output import write_output

if TYPE_CHECKING:
    from kvflowmap.api import Analysis


def _emit(text: str | bytes, out: str | None) -> None:
    data = text.encode("utf-8") if isinstance(text, str) else text
    if out:
        write_output(out, data)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()


Answer = tuple[bytes, int]  # output and exit code: plain data, memoised like check's result


def answer(req, config, rep, key: tuple, compute, out: str | None = None) -> int:
    """Run a query for a prepared request (``cli.prepare``), or reuse its
    stored answer when no input changed (``memo_run.run_memoised``); print or
    write it; its exit code."""
    from kvflowmap.commands.memo_run import run_memoised

    data, code = run_memoised(req, config, rep, key, compute)
    _emit(data, out)
    return code


def where_answer(analysis: "Analysis", name: str, fmt: str) -> Answer:
    """``kvflowmap where NAME``."""
    from kvflowmap.graph.select import SelectError
    from kvflowmap.nav import where_render
    from kvflowmap.nav.statelinks import with_state_links
    from kvflowmap.nav.where import Ambiguous, where

    try:
        result = where(with_state_links(analysis.linker), name, analysis.linker.model,
                       analysis.linker.classes)
    except SelectError as exc:
        raise click.UsageError(str(exc)) from exc
    text = where_render.where_json(result) if fmt == "json" else where_render.where_text(result)
    return text.encode("utf-8"), 1 if isinstance(result, Ambiguous) else 0


def path_answer(analysis: "Analysis", a: str, b: str, max_paths: int, fmt: str,
                calls_only: bool) -> Answer:
    """``kvflowmap path A B``."""
    from kvflowmap.graph.select import SelectError
    from kvflowmap.nav import paths
    from kvflowmap.nav.statelinks import with_state_links

    if max_paths < 1:
        raise click.UsageError("--max must be 1 or more")
    kinds = paths.CONTROL_KINDS if calls_only else paths.ALL_KINDS
    try:
        result = paths.find_paths(with_state_links(analysis.linker), a, b, max_paths, kinds)
    except SelectError as exc:
        raise click.UsageError(str(exc)) from exc
    text = paths.paths_json(result) if fmt == "json" else paths.paths_text(result)
    return text.encode("utf-8"), 1 if isinstance(result, paths.NoPath) else 0


def states_width(fmt: str, out: str | None) -> int | None:
    """The terminal width the text table fits (None: a file or a pipe)."""
    if fmt == "svg" and not out:
        raise click.UsageError("--format svg needs --out FILE")
    return None if out or not sys.stdout.isatty() else shutil.get_terminal_size()[0]


def states_answer(analysis: "Analysis", fmt: str, width: int | None) -> Answer:
    """``kvflowmap states``."""
    from kvflowmap.nav import states
    from kvflowmap.render.dot import RenderError, render

    sm = states.state_machine(analysis.linker)
    if fmt == "svg":
        try:
            return render(states.states_dot(sm, title="Request lifecycle"), "svg"), 0
        except RenderError as exc:
            raise click.ClickException(str(exc)) from exc
    text = {"json": states.states_json, "mermaid": states.states_mermaid}.get(
        fmt, lambda m: states.states_text(m, width=width))(sm)
    return text.encode("utf-8"), 0
