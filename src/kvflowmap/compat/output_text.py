"""``compat`` as text: rich tables without colour (deterministic), the
matrix with its findings, or the diff of two releases."""

from __future__ import annotations

import io

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kvflowmap.compat.diff import Change
from kvflowmap.compat.findings import Matrix

MARKS = {"ok": "ok", "guarded": "ok (guarded)", "warn": "warn", "fail": "FAIL"}


def class_label(fqn: str, all_fqns: list[str]) -> str:
    """The short class name, with its module when two classes share it."""
    short = fqn.rpartition(".")[2]
    clash = sum(1 for k in all_fqns if k.rpartition(".")[2] == short) > 1
    return fqn if clash else short


def _render(table: Table, width: int) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None, force_terminal=False,
            highlight=False).print(table)
    return buf.getvalue()


def matrix_text(m: Matrix, *, notes: bool = False, width: int = 160) -> str:
    """The matrix table, then each cell's findings (notes only with ``notes``)."""
    table = Table(expand=False)
    table.add_column("class", no_wrap=True)
    for r in m.releases:
        table.add_column(r, no_wrap=True)
    for k in m.classes:
        table.add_row(escape(class_label(k, m.classes)), *(MARKS[m.cell(k, r).status]
                                                           for r in m.releases))
    lines = [f"{len(m.classes)} connector classes × vLLM {', '.join(m.releases)}\n",
             _render(table, width)]
    severities = ("error", "warning", "guarded", *(("note",) if notes else ()))
    for fs in m.grouped(severities):
        f = fs[-1]  # the newest release's wording
        base = f"  [vLLM {f.base_where}]" if f.base_where else ""
        lines.append(f"{f.where}: {f.severity}: vLLM {', '.join(x.release for x in fs)}: "
                     f"{class_label(f.cls, m.classes)}: {f.message}{base}\n")
    return "".join(lines)


def diff_text(a: str, b: str, changes: list[Change], *, width: int = 200) -> str:
    """The changes from release ``a`` to ``b`` as one table."""
    table = Table(show_lines=True, expand=False)
    for col in ("section", "change", "subject", f"vLLM {a}", f"vLLM {b}", "detail"):
        table.add_column(col, overflow="fold")
    for c in changes:
        table.add_row(c.section, c.kind, escape(c.subject), escape(_side(c.old, c.old_where)),
                      escape(_side(c.new, c.new_where)), escape(c.detail))
    return f"protocol changes from vLLM {a} to {b}: {len(changes)}\n" + _render(table, width)


def _side(text: str | None, where: object) -> str:
    parts = [p for p in (text, str(where) if where else None) if p]
    return "\n".join(parts) or "—"
