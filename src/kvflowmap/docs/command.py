"""Glue between the CLI and the pages: generate, then write or check."""

from __future__ import annotations

from pathlib import Path

import click

from kvflowmap.api import Analysis
from kvflowmap.docs.write import DocsOptions, check_pages, generate, write_pages
from kvflowmap.sources.errors import SourceError


def run_docs(analysis: Analysis, out: str, check: bool, link_template: str | None,
             say=click.echo) -> int:
    """Write the pages to ``out`` (0), or with ``check`` compare them and
    return 1 listing the stale ones."""
    out_dir = Path(out)
    try:
        pages = generate(analysis, DocsOptions(out_dir=out_dir, link_template=link_template))
    except ValueError as exc:  # a bad --link-template
        raise click.UsageError(str(exc)) from exc
    if check:
        problems = check_pages(pages, out_dir)
        for p in problems:
            click.echo(f"{out_dir / p.split(':', 1)[0]}:{p.split(':', 1)[1]}", err=True)
        if problems:
            click.echo(f"{len(problems)} page(s) stale; regenerate with "
                       f"`kvflowmap docs --out {out}`", err=True)
            return 1
        say(f"{len(pages)} pages up to date in {out}")
        return 0
    if not any(p.endswith(".svg") for p in pages):
        click.echo("kvflowmap: warning: Graphviz `dot` not found: pages written without SVGs",
                   err=True)
    try:
        report = write_pages(pages, out_dir)
    except OSError as exc:
        raise SourceError(f"cannot write {exc.filename or out_dir}: {exc.strerror or exc}") \
            from exc
    say(f"{out}: {len(report.written)} written, {len(report.unchanged)} unchanged, "
        f"{len(report.removed)} removed")
    return 0
