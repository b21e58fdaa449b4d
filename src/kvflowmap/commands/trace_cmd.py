"""Glue between the CLI and ``kvflowmap.trace``: split the arguments into
logs and sources, get the code index (from the run memo when no source
changed), read the logs, write the chosen format."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from kvflowmap.commands.output import write_output
from kvflowmap.console import Reporter
from kvflowmap.request import Request
from kvflowmap.sources.config import ProjectConfig
from kvflowmap.trace.code import CodeIndex

TRACE_SUFFIXES = {".txt": "text", ".json": "json", ".mmd": "mermaid", ".mermaid": "mermaid",
                  ".md": "mermaid", ".html": "html", ".htm": "html"}


def split_arguments(args: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """(logs, sources): ``-``, files that are not ``.py`` and pipes
    (``<(zcat prefill.log.gz)``) are logs; folders and ``.py`` files are
    sources, as for every other command."""
    logs: list[str] = []
    sources: list[str] = []
    for a in args:
        p = Path(a)
        piped = p.exists() and not p.is_dir() and not p.is_file()  # a FIFO, /dev/stdin
        if a == "-" or piped or (p.is_file() and p.suffix != ".py") or (
                not p.exists() and p.suffix in (".log", ".gz", ".txt", ".jsonl")):
            logs.append(a)
        else:
            sources.append(a)
    return logs, sources


def code_index(req: Request, config: ProjectConfig, rep: Reporter) -> CodeIndex:
    """The ``CodeIndex`` of the request, memoised like the other commands' answers."""
    from kvflowmap.commands.memo_run import run_memoised
    from kvflowmap.trace.code import build_code_index

    code: CodeIndex = run_memoised(req, config, rep, ("trace-code", 3), build_code_index)
    return code


@contextmanager
def _reading(rep: Reporter) -> Iterator[Callable[[int], None] | None]:
    """A progress line (lines read) on a terminal; nothing otherwise."""
    if rep.quiet or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("reading the log: {task.completed:,} lines"), TimeElapsedColumn(),
                  console=rep.err, transient=True) as bar:
        task = bar.add_task("read", total=None)
        yield lambda n: bar.update(task, completed=n)


def run_trace(req: Request, config: ProjectConfig, rep: Reporter, logs: list[str], fmt: str,
              out: str | None, request: str | None, since: str | None, until: str | None,
              templates: dict[str, str] | None) -> int:
    """``kvflowmap trace``: exit 1 when a request is stuck or a problem was
    found, else 0."""
    from kvflowmap.trace import output_html, output_mermaid, output_text
    from kvflowmap.trace.run import parse_time, trace

    for t in (since, until):
        if t:
            try:
                parse_time(t, "01-01")
            except ValueError as exc:
                raise click.UsageError(str(exc)) from exc
    missing = [p for p in logs if p != "-" and not Path(p).exists()]
    if missing:
        raise click.UsageError(f"no such log: {', '.join(missing)}")
    code = code_index(req, config, rep)
    with _reading(rep) as progress:
        report = trace(code, logs, request, since, until, templates, progress=progress)
    report["request"] = request
    if request and not report["requests"]:
        click.echo(f"kvflowmap: no line of the log names request {request!r}", err=True)
    if fmt == "json":
        import json

        data = json.dumps(report, indent=1, sort_keys=False) + "\n"
    elif fmt == "mermaid":
        data = output_mermaid.render_mermaid(report)
    elif fmt == "html":
        data = output_html.render_html(report)
    else:
        data = output_text.render_text(report, width=None)
    if out:
        write_output(out, data)
    else:
        sys.stdout.write(data)
        sys.stdout.flush()
    troubled = any(r["outcome"] == "stuck" or r["problems"] for r in report["requests"])
    return 1 if troubled else 0
