"""``kvflowmap check``: load rules, analyse, report findings, exit 0/1/2."""

from __future__ import annotations

import dataclasses

import io
import sys
from collections.abc import Sequence
from pathlib import Path

import click
from rich.console import Console

from kvflowmap.check.baseline import load_baseline, write_baseline
from kvflowmap.check.loader import default_rule_dirs, load_rules, select_rules
from kvflowmap.check.model import Finding, Rule
from kvflowmap.commands.output import write_output
from kvflowmap.problems import Problem
from kvflowmap.report.step_roots import step_root
from kvflowmap.report.github import render_github
from kvflowmap.report.json_out import render_json
from kvflowmap.report.sarif import render_sarif
from kvflowmap.report.text import render_text
from kvflowmap.sources.errors import SourceError


def load_selected(rule_dirs: tuple[str, ...], select: tuple[str, ...],
                  ignore: tuple[str, ...]) -> tuple[list[Rule], list[Rule]]:
    """(all rules, selected rules); every rule-file error at once, exit 2."""
    paths = [Path(p) for p in rule_dirs] or default_rule_dirs()
    rules, errors = load_rules(paths)
    if errors:
        raise SourceError("invalid rule files:\n" + "\n".join(str(e) for e in errors))
    return rules, select_rules(rules, _split(select), _split(ignore))


def _split(values: tuple[str, ...]) -> list[str]:
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def split_sources(src: tuple[str, ...]) -> tuple[tuple[str, ...], list[str] | None]:
    """Files given (as pre-commit does) are a report filter, not the subject."""
    files = [str(Path(s).resolve()) for s in src if s.endswith(".py") and Path(s).is_file()]
    if src and len(files) == len(src):
        return (), files
    return src, None


def checkout_path(f: Finding, roots: dict[str, str], cwd: Path | None = None) -> str:
    """The finding's file relative to the working directory (the checkout a
    GitHub workflow runs in: ``src/conn/hangs.py``, not the root-relative
    ``conn/hangs.py``), or root-relative when it lies outside it."""
    return _from_checkout(f.file, roots.get(f.root), cwd)


def with_checkout_paths(f: Finding, roots: dict[str, str], cwd: Path | None = None) -> Finding:
    """``f`` with its file and every step's file given from the checkout, so
    the steps of a path read like its location (``src/conn/hangs.py`` in
    both); a step's root as SARIF finds it (``step_roots.step_root``)."""
    path = tuple(dataclasses.replace(
        st, file=_from_checkout(st.file, roots.get(step_root(st, f, roots)), cwd))
        for st in f.path)
    return dataclasses.replace(f, file=checkout_path(f, roots, cwd), path=path)


def _from_checkout(file: str, base: str | None, cwd: Path | None) -> str:
    if not base or not file:
        return file
    full = (Path(base) / file).resolve()
    here = (cwd or Path.cwd()).resolve()
    try:
        return full.relative_to(here).as_posix()
    except ValueError:
        return file


def render(outcome, fmt: str, rules: list[Rule], roots: dict[str, str],
           to_file: bool = False, problems: Sequence[Problem] = ()) -> str:
    """The report in ``fmt``; no colour codes when it goes to a file.
    ``problems`` (files not analysed) are part of the JSON and SARIF reports."""
    findings = outcome.findings
    if fmt in ("json", "text", "github"):
        # paths from the checkout (``src/conn/hangs.py``), as SARIF gives
        # them: one path for a finding and its steps in every report
        findings = [with_checkout_paths(f, roots) for f in findings]
    if fmt == "json":
        return render_json(findings, {"suppressed": len(outcome.suppressed),
                                      "baseline": len(outcome.known)}, problems)
    if fmt == "sarif":
        return render_sarif(findings, rules, roots, problems)
    if fmt == "github":
        return render_github(findings)
    console = Console(file=io.StringIO(), color_system=None, width=200) if to_file else None
    return render_text(findings, console=console)


def report(outcome, *, fmt: str, output: str | None, rules: list[Rule],
           roots: dict[str, str], write_base: str | None, all_findings: list[Finding],
           problems: Sequence[Problem] = ()) -> None:
    text = render(outcome, fmt, rules, roots, to_file=bool(output), problems=problems)
    if output:
        write_output(output, text)
    else:
        sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
    if write_base:
        try:
            n = write_baseline(write_base, all_findings)
        except ValueError as exc:
            raise SourceError(str(exc)) from exc
        click.echo(f"wrote {n} findings to baseline {write_base}", err=True)


def baseline_set(path: str | None) -> set[str] | None:
    if not path:
        return None
    try:
        return load_baseline(path)
    except (OSError, ValueError) as exc:
        raise SourceError(str(exc)) from exc


def package_dirs(files: list[str]) -> tuple[str, ...]:
    """Top-level package directories of files (subject when no config says)."""
    out = []
    for f in files:
        cur = Path(f).parent
        while (cur.parent / "__init__.py").exists() and cur.parent != cur:
            cur = cur.parent
        out.append(str(cur if (cur / "__init__.py").exists() else Path(f)))
    return tuple(dict.fromkeys(out))
