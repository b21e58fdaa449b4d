"""Writing what a command produces: an unwritable target is a usage error
that names the path (exit 2), never a traceback."""

from __future__ import annotations

import os
from pathlib import Path

import click

from kvflowmap.sources.errors import SourceError


def write_output(path: str | Path, data: str | bytes, make_parents: bool = False) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` (creating its folder with
    ``make_parents``); ``SourceError`` on failure."""
    try:
        if make_parents:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            Path(path).write_bytes(data)
        else:
            Path(path).write_text(data, encoding="utf-8")
    except OSError as exc:
        raise SourceError(f"cannot write {path}: {exc.strerror or exc}") from exc


def check_writable(path: str | Path | None, folder: bool = False) -> None:
    """Before any analysis: ``path`` can be written (its folder exists and is
    writable; with ``folder``, ``path`` is a folder that may be created
    under a writable one); ``SourceError`` naming it otherwise."""
    if not path:
        return
    target = Path(path)
    if not folder and target.is_dir():
        raise SourceError(f"cannot write {path}: it is a folder")
    if folder and target.exists() and not target.is_dir():
        raise SourceError(f"cannot write pages into {path}: it is a file, not a folder")
    if target.exists() and not os.access(target, os.W_OK):
        raise SourceError(f"cannot write {path}: permission denied")
    parent = target if folder else target.parent
    while folder and not parent.exists() and parent != parent.parent:
        parent = parent.parent  # the folder is created under its nearest existing ancestor
    if not parent.is_dir():
        raise SourceError(f"cannot write {path}: no folder {parent}")
    if not target.exists() and not os.access(parent, os.W_OK | os.X_OK):
        raise SourceError(f"cannot write {path}: {parent} is not writable")


class OutputOption(click.Option):
    """``-o/--output``, with ``--out`` (the older spelling) accepted but not
    shown in ``--help``: one convention in the help, old commands still run."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        """The help line without the hidden alias."""
        shown = [o for o in self.opts if o != "--out"]
        opts, self.opts = self.opts, shown
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = opts


def output_option(help: str, **kw):
    """The ``-o/--output FILE`` option of a command that writes (``out``)."""
    return click.option("-o", "--output", "--out", "out", cls=OutputOption,
                        type=click.Path(), help=help, **kw)
