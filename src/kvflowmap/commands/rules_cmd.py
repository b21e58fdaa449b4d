"""``kvflowmap rules | explain | test-rules | catalogue``.

Plain functions returning exit codes (0 ok, 1 failures or a stale catalogue,
2 bad rule files or an unknown rule), and ``register(cli)`` adding them to
the click group.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import click

from kvflowmap.check.loader import (SKIPPED_DIRS, UnknownRuleError, default_rule_dirs,
                                    load_rules, select_rules)
from kvflowmap.check.model import Rule
from kvflowmap.commands.output import output_option, write_output

DEFAULT_CATALOGUE = Path("docs/rules.md")


def load_or_report(paths: Sequence[Path] = ()) -> list[Rule] | None:
    """The rules of ``paths`` (the shipped ones by default); None after
    printing every rule-file error to stderr."""
    rules, errors = load_rules([Path(p) for p in paths] or default_rule_dirs())
    if errors:
        for err in errors:
            click.echo(str(err), err=True)
        click.echo(f"kvflowmap: error: {len(errors)} problem(s) in rule files", err=True)
        return None
    return rules


def cmd_rules(rule_paths: Sequence[Path] = (), fmt: str = "text") -> int:
    """List the rules: id, severity, kind, title (text or JSON)."""
    rules = load_or_report(rule_paths)
    if rules is None:
        return 2
    if fmt == "json":
        from kvflowmap.check.catalogue import rule_file

        items = [{"id": r.id, "severity": r.severity, "kind": r.kind, "pack": r.pack,
                  "title": r.title, "file": rule_file(r.path)} for r in rules]
        click.echo(json.dumps({"rules": items}, indent=2))
        return 0
    rows = [(r.id, r.severity, r.kind, r.title) for r in rules]
    widths = [max([len(h), *(len(row[i]) for row in rows)])
              for i, h in enumerate(("id", "severity", "kind"))]
    for row in [("id", "severity", "kind", "title"), *rows]:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) + "  " + row[3])
    return 0


def cmd_explain(rule_id: str, rule_paths: Sequence[Path] = ()) -> int:
    """Print a rule's rationale, what is checked, its examples and help."""
    from kvflowmap.check.catalogue import explain

    rules = load_or_report(rule_paths)
    if rules is None:
        return 2
    try:
        chosen = [r for r in select_rules(rules, [rule_id], []) if r.id == rule_id]
        if not chosen:  # a pattern or pack name: explain takes one id
            raise UnknownRuleError(f"'{rule_id}' is not a rule id; `kvflowmap rules` lists them")
    except UnknownRuleError as exc:
        click.echo(f"kvflowmap: error: {exc}", err=True)
        return 2
    text = explain(chosen[0])
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.markdown import Markdown

        Console().print(Markdown(text))
    else:
        click.echo(text, nl=False)
    return 0


def cmd_test_rules(dirs: Sequence[Path] = (), cache_dir: Path | None = None) -> int:
    """Run rule examples and fixture files; 0 all good, 1 failures, 2 bad rules.

    A DIR holding rule files (``*.yaml``) replaces the shipped rules; every
    ``fixtures/`` folder under a rule DIR, and every DIR without rule files,
    is an import root of fixture files annotated ``# expect:`` / ``# ok:``."""
    from kvflowmap.check.selftest import format_report, run_examples
    from kvflowmap.index.cache import default_cache_dir

    rule_paths, fixtures = split_test_dirs([Path(d) for d in dirs])
    rules = load_or_report(rule_paths)
    if rules is None:
        return 2
    report = run_examples(rules, fixtures, cache_dir=cache_dir or default_cache_dir())
    click.echo(format_report(report))
    return 0 if report.ok else 1


def split_test_dirs(dirs: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """(rule files/dirs, fixture import roots) for ``test-rules DIR...``."""
    rule_paths = [d for d in dirs if d.is_file() or _has_rule_files(d)]
    fixtures = [d for d in dirs if d.is_dir() and d not in rule_paths]
    for d in rule_paths or default_rule_dirs():
        if d.is_dir():
            fixtures += sorted(p for p in d.rglob("fixtures") if p.is_dir())
    return rule_paths, fixtures


def _has_rule_files(d: Path) -> bool:
    return any(not set(p.relative_to(d).parts[:-1]) & {*SKIPPED_DIRS, "fixtures"}
               for p in d.rglob("*.y*ml"))


def cmd_catalogue(out: Path = DEFAULT_CATALOGUE, check: bool = False,
                  rule_paths: Sequence[Path] = ()) -> int:
    """Write the rule catalogue; with ``check``, exit 1 when ``out`` is stale."""
    from kvflowmap.check.catalogue import render_catalogue

    rules = load_or_report(rule_paths)
    if rules is None:
        return 2
    text = render_catalogue(rules)
    out = Path(out)
    if check:
        current = out.read_text(encoding="utf-8") if out.is_file() else None
        if current == text:
            click.echo(f"{out} is up to date ({len(rules)} rules)")
            return 0
        click.echo(f"{out} is stale: run `kvflowmap catalogue -o {out}`", err=True)
        return 1
    write_output(out, text, make_parents=True)
    click.echo(f"wrote {len(rules)} rules to {out}")
    return 0


def register(cli: click.Group) -> None:
    """Add ``rules``, ``explain``, ``test-rules`` and ``catalogue`` to ``cli``."""
    rules_opt = click.option("--rules", "rule_paths", multiple=True, metavar="PATH",
                             type=click.Path(exists=True, path_type=Path),
                             help="Rule files or folders instead of the shipped rules.")

    @cli.command("rules")
    @click.option("-f", "--format", "fmt", type=click.Choice(["text", "json"]), default="text",
                  show_default=True)
    @rules_opt
    def rules_command(fmt: str, rule_paths: tuple[Path, ...]) -> None:
        """List the rules: id, severity, kind, title."""
        raise click.exceptions.Exit(cmd_rules(rule_paths, fmt))

    @cli.command("explain")
    @click.argument("rule_id", metavar="RULE")
    @rules_opt
    def explain_command(rule_id: str, rule_paths: tuple[Path, ...]) -> None:
        """Why a rule exists, what it checks, its examples and how to fix."""
        raise click.exceptions.Exit(cmd_explain(rule_id, rule_paths))

    @cli.command("test-rules")
    @click.argument("dirs", nargs=-1, type=click.Path(exists=True, path_type=Path),
                    metavar="[DIR]...")
    @click.option("--cache-dir", type=click.Path(path_type=Path), envvar="KVFLOWMAP_CACHE_DIR")
    def test_rules_command(dirs: tuple[Path, ...], cache_dir: Path | None) -> None:
        """Run every rule's examples and annotated fixture files."""
        raise click.exceptions.Exit(cmd_test_rules(dirs, cache_dir))

    @cli.command("catalogue")
    @output_option("The catalogue file.", default=str(DEFAULT_CATALOGUE), show_default=True)
    @click.option("--check", is_flag=True, help="Exit 1 when the file is stale; write nothing.")
    @rules_opt
    def catalogue_command(out: str, check: bool, rule_paths: tuple[Path, ...]) -> None:
        """Generate the rule catalogue (docs/rules.md)."""
        raise click.exceptions.Exit(cmd_catalogue(Path(out), check, rule_paths))
