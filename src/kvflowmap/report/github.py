"""``--format github``: GitHub Actions workflow commands that become
annotations on the pull request (``::error file=...,line=...::message``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kvflowmap.check.model import Finding
from kvflowmap.report.json_out import ordered

COMMANDS = {"error": "error", "warning": "warning", "note": "notice"}


def escape_data(value: str) -> str:
    """Escape a command's message as the Actions runner expects (``%``, CR, LF)."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """Escape a command property value: the data escapes plus ``:`` and ``,``."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def _message(f: Finding) -> str:
    """The finding's message followed by its path as numbered steps."""
    lines = [f.message]
    for n, step in enumerate(f.path, 1):
        where = f"{step.file}:{step.line}"
        func = f"  {step.function}" if step.function else ""
        note = f" — {step.note}" if step.note else ""
        lines.append(f"{n}. {where}{func}{note}")
    return "\n".join(lines)


def annotation(f: Finding, file: str | None = None) -> str:
    """One workflow command for ``f``; ``file`` overrides ``f.file``."""
    command = COMMANDS.get(f.severity, "warning")
    props = {"file": file if file is not None else f.file, "line": str(f.line),
             "col": str(f.column), "title": f.rule}
    head = ",".join(f"{k}={escape_property(v)}" for k, v in props.items())
    return f"::{command} {head}::{escape_data(_message(f))}"


def render_github(findings: Iterable[Finding], *,
                  file_of: Callable[[Finding], str] | None = None) -> str:
    """One annotation line per finding, in report order.

    Annotations need paths relative to the repository checkout; ``file_of``
    maps a finding to that path when its root is not the checkout itself."""
    lines = [annotation(f, file_of(f) if file_of else None) for f in ordered(findings)]
    return "".join(line + "\n" for line in lines)
