"""``kvflowmap docs``: generate the pages (``docs.write``), then write or check them."""

from __future__ import annotations

from pathlib import Path

from typing import TYPE_CHECKING

import click

from kvflowmap.docs.pagefiles import check_pages, write_pages
from kvflowmap.sources.errors import SourceError

if TYPE_CHECKING:  # the analysis and the page generators load only on a cold run
    from kvflowmap.api import Analysis
    from kvflowmap.render.links import Templates


def docs_key(out: str, link_template: Templates | None) -> tuple:
    """What the pages depend on besides the analysis: where they go (links are
    relative to it), the template, and whether SVGs can be drawn (``dot`` on
    PATH: found without running it or importing the renderer)."""
    import shutil

    return ("docs", str(Path(out).resolve()), sorted((link_template or {}).items()),
            shutil.which("dot") is not None)


def docs_pages(analysis: Analysis, out: str,
               link_template: Templates | None) -> dict[str, bytes]:
    """Every page for ``out``, as ``{relative path: bytes}`` (plain data, so
    the run memo can keep it)."""
    from kvflowmap.docs.write import DocsOptions, generate

    try:
        return generate(analysis, DocsOptions(out_dir=Path(out), link_template=link_template))
    except ValueError as exc:  # a bad --link-template
        raise click.UsageError(str(exc)) from exc


def run_docs(pages: dict[str, bytes], out: str, check: bool, say=click.echo) -> int:
    """Write the pages to ``out`` (0), or with ``check`` compare them and
    return 1 listing the stale ones."""
    out_dir = Path(out)
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
