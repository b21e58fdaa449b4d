"""Run a command's analysis once, or reuse the last result when nothing changed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvflowmap.request import Request, make_roots
from kvflowmap.console import Reporter
from kvflowmap.index.memo import Manifest, RunMemo
from kvflowmap.sources.errors import SourceError
from kvflowmap.sources.config import ProjectConfig
from kvflowmap.sources.roots import ModuleTable, list_files


def subject_listing(req: Request) -> list[str]:
    """Every subject file path: a new or deleted file means a new run."""
    table = ModuleTable()
    return sorted(str(sf.path) for r in make_roots(req) if r.subject for sf in list_files(r, table))


def manifest_of(analysis, listing: list[str]) -> Manifest:
    model = analysis.linker.model
    files = {}
    for module, facts in model.facts.items():
        sf = model.source(module)
        if sf is not None:
            files[str(sf.path)] = facts.sha
    return Manifest(files, listing)


def analyse_reported(req: Request, rep: Reporter):
    """``analyse(req)`` with progress and, in verbose mode, timings on stderr."""
    from kvflowmap.api import analyse  # the analysis modules only when needed

    with rep.progress() as progress:
        analysis = analyse(req, progress=progress)
    rep.timings(analysis.timings, analysis.stats)
    return analysis


def run_memoised(req: Request, config: ProjectConfig, rep: Reporter, key_parts: tuple,
                 compute: Callable[[Any], Any]) -> Any:
    """``compute(analysis)``, or its stored result when no input changed.
    Warnings of the analysis are printed either way."""
    memo = RunMemo(req.cache_dir if req.use_cache else None)
    listing = subject_listing(req)
    if not listing:  # nothing to analyse is not a clean result
        raise SourceError("no Python files to analyse under "
                          + ", ".join(str(s) for s in req.sources or ["."]))
    key = RunMemo.key(req, config, key_parts)
    hit = memo.load(key, listing)
    if hit is not None:
        warnings, result = hit
        rep.info("nothing changed since the last run: result reused")
    else:
        analysis = analyse_reported(req, rep)
        warnings, result = analysis.warnings, compute(analysis)
        memo.save(key, manifest_of(analysis, listing), (warnings, result))
    for w in warnings:
        rep.warn(w)
    return result


def digest_paths(paths: list[Path]) -> str:
    """Content digest of rule folders/files given to a command."""
    from kvflowmap.index.memo import files_digest

    files: list[Path] = []
    for p in paths:
        files += sorted(p.rglob("*")) if p.is_dir() else [p]
    return files_digest([f for f in files if f.is_file()])
