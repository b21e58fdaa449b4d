"""``--format text``: findings for people, grouped by file, with the source
line and the explaining path as numbered steps. rich does the styling; with
no terminal (or ``NO_COLOR`` set) the output is plain and byte-for-byte
deterministic, since lines are never wrapped."""

from __future__ import annotations

import io
import itertools
import sys
from collections.abc import Iterable

from rich.console import Console
from rich.text import Text

from kvflowmap.check.model import SEVERITIES, Finding, Step
from kvflowmap.report.json_out import ordered, summarize
from kvflowmap.report.sources import SourceLines

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "note": "cyan"}


def _plain_console() -> Console:
    """A console writing to memory: coloured only when stdout is a terminal
    (rich itself honours ``NO_COLOR``), never wrapping lines."""
    tty = sys.stdout.isatty()
    return Console(file=io.StringIO(), force_terminal=tty, color_system="auto" if tty else None,
                   highlight=False, soft_wrap=True, emoji=False, width=100)


def _header(f: Finding) -> Text:
    text = Text()
    text.append(f"{f.file}:{f.line}:{f.column}", style="bold")
    text.append("  ")
    text.append(f.severity, style=SEVERITY_STYLE.get(f.severity, ""))
    text.append("  ")
    text.append(f.rule, style="magenta")
    text.append("  ")
    text.append(f.message)
    return text


def _source(f: Finding, sources: SourceLines) -> list[Text]:
    """The finding's source line with a caret under its column, if readable."""
    raw = sources.line(f.abspath, f.line)
    if raw is None:
        return []
    raw = raw.rstrip()
    gutter = f"    {f.line:>5} | "
    lines = [Text.assemble((gutter, "dim"), raw.expandtabs(4))]
    if raw.strip() and 1 <= f.column <= len(raw):
        pad = " " * (len(gutter) - 2)
        indent = " " * len(raw[:f.column - 1].expandtabs(4))
        lines.append(Text.assemble((pad + "| ", "dim"), indent, ("^", "bold red")))
    return lines


def step_text(number: int, step: Step) -> Text:
    """``N. file:line  function — note`` (function and note left out when empty)."""
    text = Text(f"      {number}. ")
    text.append(f"{step.file}:{step.line}", style="bold")
    if step.function:
        text.append(f"  {step.function}", style="green")
    if step.note:
        text.append(f" — {step.note}")
    return text


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def summary_text(findings: list[Finding]) -> Text:
    """One line: the total, counts by severity, counts by rule."""
    s = summarize(findings)
    if not s["total"]:
        return Text("No findings.", style="green")
    extra = sorted(k for k in s["by_severity"] if k not in SEVERITIES)
    sev = [_plural(s["by_severity"][k], k) for k in (*reversed(SEVERITIES), *extra)
           if s["by_severity"][k]]
    rules = ", ".join(f"{rule} {n}" for rule, n in s["by_rule"].items())
    return Text(f"{_plural(s['total'], 'finding')} ({', '.join(sev)}); by rule: {rules}",
                style="bold")


def render_text(findings: Iterable[Finding], *, console: Console | None = None) -> str:
    """The text report, returned as a string.

    With ``console`` given, the report is rendered with that console's
    settings (colour system, ``NO_COLOR``) and captured, not printed: write
    the returned string yourself. Without one, colour is used only when
    stdout is a terminal."""
    items = ordered(findings)
    out = console or _plain_console()
    sources = SourceLines()
    with out.capture() as captured:
        for (root, file), group in itertools.groupby(items, key=lambda f: (f.root, f.file)):
            title = Text(file or "<no file>", style="bold underline")
            if root:
                title.append(f"  ({root})", style="dim")
            lines = [title]
            for f in group:
                lines.append(_header(f))
                lines.extend(_source(f, sources))
                lines.extend(step_text(n, step) for n, step in enumerate(f.path, 1))
            for line in (*lines, Text()):
                out.print(line, soft_wrap=True)
        out.print(summary_text(items), soft_wrap=True)
    return captured.get()
