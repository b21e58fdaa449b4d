"""``kvflowmap lifecycle``: how request ids move through each connector package.

Analyses the sources like ``check`` and ``graph`` (same options and
``[tool.kvflowmap]`` configuration), builds the lifecycle model once,
summarises it (``nav.lifecycle_summary``) and renders text or JSON
(``render.lifecycle_text``). The summary is memoised like ``check``'s result.
"""

from __future__ import annotations

import sys

from kvflowmap.commands.output import write_output
from kvflowmap.nav.lifecycle_summary import PackageLifecycle


def compute(analysis) -> list[PackageLifecycle]:
    """The per-package summary of an analysis (``api.Analysis``)."""
    from kvflowmap.lifecycle.model import build_lifecycle
    from kvflowmap.nav.lifecycle_summary import summarise

    return summarise(build_lifecycle(analysis.linker))


def render(packages: list[PackageLifecycle], fmt: str) -> str:
    """``packages`` as ``text`` or ``json``."""
    from kvflowmap.render.lifecycle_text import lifecycle_json, lifecycle_text

    return lifecycle_json(packages) if fmt == "json" else lifecycle_text(packages)


def run_lifecycle(req, config, rep, fmt: str, out: str | None) -> int:
    """The command for a prepared request (``cli.prepare``); writes stdout or
    ``out``; exit 0."""
    from kvflowmap.commands.memo_run import run_memoised

    packages = run_memoised(req, config, rep, ("lifecycle",), compute)
    text = render(packages, fmt)
    if out:
        write_output(out, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0
