"""Write a graph result (without importing the analysis)."""

from __future__ import annotations

import sys

import click

from kvflowmap.commands.graph_result import GraphResult
from kvflowmap.commands.output import write_output
from kvflowmap.console import Reporter


def emit_graph(result: GraphResult, out: str | None, rep: Reporter) -> None:
    """Write the rendered graph and the summary line."""
    if out:
        write_output(out, result.data)
    else:
        sys.stdout.buffer.write(result.data)
        sys.stdout.flush()
    rep.note(f"{out or 'stdout'}: {result.note}")
    for line in result.unresolved:
        click.echo(line, err=True)
