"""Command line: ``kvflowmap graph | fetch | cache``.

``main(argv) -> int`` is what tests call; exit codes are 0 (ok), 1 (findings
or a stale check) and 2 (usage, configuration or environment error).
"""

from __future__ import annotations

import dataclasses

import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import click

from kvflowmap import __version__
from kvflowmap.cli_sources import SourceOptions, make_request
from kvflowmap.commands.output import check_writable, output_option
from kvflowmap.console import Reporter
from kvflowmap.gc_tuning import fewer_collections
from kvflowmap.sources.errors import SourceError


def source_options(f):
    """Options shared by every command that analyses code."""
    opts = [
        click.argument("src", nargs=-1, type=click.Path()),
        click.option("--context", multiple=True, type=click.Path(),
                     help="Code analysed but not the subject (e.g. a vLLM checkout)."),
        click.option("--release", "releases", multiple=True, metavar="NAME==VERSION",
                     help="A released package as context, fetched once into the cache."),
        click.option("--installed", multiple=True, metavar="NAME",
                     help="An installed distribution as context (located, never imported)."),
        click.option("--all", "all_files", is_flag=True,
                     help="Index every file of the context, not only what the flow needs."),
        click.option("--cache-dir", type=click.Path(), envvar="KVFLOWMAP_CACHE_DIR",
                     help="Where facts and releases are cached."),
        click.option("--no-cache", is_flag=True, help="Neither read nor write the fact cache."),
        click.option("-j", "--jobs", type=int, default=None, help="Parallel parser processes."),
        click.option("-q", "--quiet", is_flag=True, help="Only errors on stderr."),
        click.option("-v", "--verbose", is_flag=True, help="Time per phase on stderr."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _options(kw: dict) -> SourceOptions:
    return SourceOptions(
        sources=kw.pop("src"), context=kw.pop("context"), releases=kw.pop("releases"),
        installed=kw.pop("installed"), all_files=kw.pop("all_files"),
        cache_dir=kw.pop("cache_dir"), no_cache=kw.pop("no_cache"), jobs=kw.pop("jobs"),
    )


GRAPH_SUFFIXES = {".svg": "svg", ".png": "png", ".pdf": "pdf", ".dot": "dot", ".gv": "dot",
                  ".mmd": "mermaid", ".mermaid": "mermaid", ".json": "json"}
STATES_SUFFIXES = {".txt": "text", ".json": "json", ".mmd": "mermaid", ".mermaid": "mermaid",
                   ".svg": "svg"}
TEXT_SUFFIXES = {".txt": "text", ".json": "json"}  # where, path, lifecycle
CHECK_SUFFIXES = {".txt": "text", ".json": "json", ".sarif": "sarif"}
# formats a suffix also fits besides the one it names: SARIF and PyCG's
# call graph are JSON documents
ALSO_FITS = {".json": {"pycg-json", "sarif"}}


def out_format(out: str | None, fmt: str | None, suffixes: dict[str, str],
               default: str | None) -> str | None:
    """The format to write: ``--format`` if given, else the one the output
    file's suffix names; with neither, ``default`` (None for graph's stdout,
    which picks its own). A suffix that names no format, or a ``--format``
    that does not fit the suffix (``-f png -o flow.svg``), is a usage error,
    never a silent choice; a ``--format`` with a suffix the command does not
    know (``-f mermaid -o flow.md``) is taken as given."""
    suffix = Path(out).suffix.lower() if out else ""
    if fmt:
        named = suffixes.get(suffix)
        if named and named != fmt and fmt not in ALSO_FITS.get(suffix, ()):
            raise click.UsageError(f"--format {fmt} does not fit {out!r}, whose suffix says "
                                   f"{named}: give one of them, or end the file name as the "
                                   "format says")
        return fmt
    if not out:
        return default
    if suffix in suffixes:
        return suffixes[suffix]
    known = ", ".join(sorted(suffixes))
    raise click.UsageError(f"cannot tell the format from {out!r}: give --format, or end the "
                           f"file name with one of {known}")


def prepare(kw: dict):
    """Options -> (Request, ProjectConfig, Reporter)."""
    rep = Reporter(quiet=kw.pop("quiet"), verbose=kw.pop("verbose"))
    req, config = make_request(_options(kw), say=rep.info)
    return req, config, rep


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kvflowmap")
def cli() -> None:
    """Map, check and document the KV-cache flow of vLLM and its KV connectors.

    \b
    Exit codes:
      0    done (check: no finding at --fail-on or above; where/path: one answer)
      1    check: findings; trace: a request stuck or breaking the protocol;
           docs/catalogue/compat --check: stale; where: ambiguous; path: no path;
           test-rules: an example fails
      2    bad usage or input (a name that matches nothing, a missing file, a bad config)
      3    internal error (a kvflowmap bug: message and trace on stderr)
      130  interrupted (Ctrl-C)
      141  output pipe closed (kvflowmap rules | head -1)
      143  terminated (SIGTERM)

    Output: -o/--output FILE on every command that writes (stdout without
    it); the format is --format, else the file's suffix. Colour only on a
    terminal, and never with NO_COLOR set.
    """


@cli.command()
@source_options
@output_option("Output file (format from its suffix, or --format).")
@click.option("-f", "--format", "fmt", type=click.Choice(
    ["svg", "png", "pdf", "dot", "mermaid", "json", "pycg-json"]), help="Output format.")
@click.option("--focus", multiple=True, metavar="SYMBOL", help="Centre on these symbols.")
@click.option("--depth", type=int, default=2, show_default=True, help="Hops around --focus.")
@click.option("--direction", type=click.Choice(["callers", "callees", "both"]), default="both",
              show_default=True)
@click.option("--from", "path_from", metavar="A", help="Draw the paths from A ...")
@click.option("--to", "path_to", metavar="B", help="... to B.")
@click.option("--include", multiple=True, metavar="GLOB", help="Keep only matching node ids.")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Drop matching node ids.")
@click.option("--full", is_flag=True, help="The whole graph, not only the KV-transfer flow.")
@click.option("--view", default="all", show_default=True, metavar="NAME",
              help="all: the KV-transfer flow; load, save (the protocol file's views): one "
                   "request's story, stage by stage, for the connector.")
@click.option("--connector", multiple=True, metavar="CLASS",
              help="Connector classes to draw (default: the subject's main connector).")
@click.option("--max-nodes", type=int, default=80, show_default=True,
              help="Node budget of the picture (every view, --focus included).")
@click.option("--link-template", "link_template", multiple=True, metavar="[NAME=]URL",
              help="Source links: URL (every root) or NAME=URL (the root NAME: vllm, pegaflow); "
                   "placeholders {root}, {path}, {version}, {file}, {line}. Repeatable.")
@click.option("--show-unresolved", is_flag=True, help="List the calls that were not resolved.")
def graph(**kw) -> None:
    """Draw the flow across scheduler, worker and connector."""
    from kvflowmap.commands.graph_emit import emit_graph
    from kvflowmap.commands.memo_run import run_memoised

    check_writable(kw["out"])
    kw["fmt"] = out_format(kw["out"], kw["fmt"], GRAPH_SUFFIXES, default=None)
    req, config, rep = prepare(kw)
    options = tuple(sorted((k, repr(v)) for k, v in kw.items()))
    result = run_memoised(req, config, rep, ("graph", options),
                          lambda analysis: _produce_graph(analysis, config, kw))
    emit_graph(result, kw["out"], rep)


def _produce_graph(analysis, config, kw: dict):
    from kvflowmap.commands.graph_cmd import produce_graph

    return produce_graph(analysis, config, **{**kw, "link_template": link_templates(
        kw["link_template"], config)})


def link_templates(values: tuple[str, ...], config) -> dict[str, str] | None:
    """The command line's templates over the project's; a bad one is a usage error."""
    from kvflowmap.render import links

    try:
        found = links.merged(values, config.link_template, config.link_templates)
        links.check(found)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    return found


@cli.command()
@source_options
@click.option("--rules", "rule_dirs", multiple=True, type=click.Path(exists=True),
              help="Rule files or folders (default: the shipped rules).")
@click.option("--select", multiple=True, metavar="IDS", help="Only these rule ids (globs, commas).")
@click.option("--ignore", multiple=True, metavar="IDS", help="Skip these rule ids (globs, commas).")
@click.option("--fail-on", type=click.Choice(["error", "warning", "note"]), default="error",
              show_default=True, help="Lowest severity that makes the exit code 1.")
@click.option("-f", "--format", "fmt", type=click.Choice(["text", "json", "sarif", "github"]),
              help="Report format (default: from the --output suffix, else text).")
@output_option("Write the report here, not stdout (format from a .txt, .json or "
               ".sarif suffix, or --format).")
@click.option("--baseline", type=click.Path(), help="Report only findings not in this file.")
@click.option("--write-baseline", type=click.Path(), help="Record current findings here.")
@click.option("--diff-base", metavar="REV",
              help="Report only findings that are not there at git revision REV (e.g. HEAD), "
                   "wherever they land; files given are then not a filter.")
def check(**kw) -> None:
    """Check lifecycle invariants; files given only filter what is reported."""
    from kvflowmap.commands import check_cmd as cc
    from kvflowmap.sources.config import load_config

    from kvflowmap.check.loader import default_rule_dirs
    from kvflowmap.commands.memo_run import digest_paths, run_memoised

    rule_dirs, select, ignore = kw.pop("rule_dirs"), kw.pop("select"), kw.pop("ignore")
    # Rule files and ids the user gave are checked before any indexing: a typo
    # fails in a second, not after the analysis. The shipped rules alone load
    # only when something changed (half of a warm run's 0.6 s otherwise).
    chosen = cc.load_selected(rule_dirs, select, ignore) if rule_dirs or select or ignore \
        else None
    rule_digest = digest_paths([Path(p) for p in rule_dirs] or default_rule_dirs())
    src, only = cc.split_sources(kw["src"])
    if only is not None and not load_config(Path.cwd()).sources:
        src = cc.package_dirs(only)
    kw["src"] = src
    fail_on, fmt, output = kw.pop("fail_on"), kw.pop("fmt"), kw.pop("out")
    fmt = out_format(output, fmt, CHECK_SUFFIXES, default="text") or "text"
    baseline, write_base = cc.baseline_set(kw.pop("baseline")), kw.pop("write_baseline")
    check_writable(output)
    check_writable(write_base)
    diff_base = kw.pop("diff_base")
    if diff_base:
        only = None  # a change is judged by what it causes, wherever that lands
    req, config, rep = prepare(kw)
    from kvflowmap.commands.diff_base import commit_of

    def compute(analysis):
        # Rules load only when something changed: a warm run imports no engine.
        from kvflowmap.check.pipeline import apply_baseline, run_check

        all_rules, rules = chosen or cc.load_selected(rule_dirs, select, ignore)
        known_ids = [r.id for r in all_rules]
        everything = run_check(analysis, rules, known_rule_ids=known_ids, only_files=only)
        known = set(baseline or ())
        if diff_base:
            from kvflowmap.commands.diff_base import base_fingerprints
            from kvflowmap.commands.memo_run import analyse_reported

            known |= base_fingerprints(req, diff_base, lambda base: run_check(
                analyse_reported(base, rep), rules, known_rule_ids=known_ids).findings)
        outcome = apply_baseline(everything, known) if baseline is not None or diff_base \
            else everything
        # the reports need the rules' metadata, not the kinds' Options: without
        # them a warm run loads no rule kind (and no LibCST behind them)
        return (outcome, everything.findings, {r.label: str(r.path) for r in analysis.roots},
                [dataclasses.replace(r, options=None) for r in rules], list(analysis.problems))

    key = ("check", select, ignore, rule_digest, sorted(only or []), sorted(baseline or []),
           bool(write_base), diff_base, commit_of(diff_base, req.sources))
    outcome, all_findings, roots, rules, problems = run_memoised(req, config, rep, key, compute)
    cc.report(outcome, fmt=fmt, output=output, rules=rules, roots=roots, write_base=write_base,
              all_findings=all_findings, problems=problems)
    raise click.exceptions.Exit(outcome.exit_code(fail_on))


@cli.command()
@click.argument("src", nargs=-1, type=click.Path(exists=True))
@click.option("--vllm", metavar="A..B|A,B,C",
              help="vLLM releases: a range resolved on the package index, or a list.")
@click.option("--vllm-from-pins", is_flag=True,
              help="The releases the connector's own vllm requirement allows.")
@click.option("--diff", nargs=2, metavar="A B",
              help="The protocol changes between two releases (vllm==X or an import root).")
@click.option("--class", "classes", multiple=True, metavar="CLASS",
              help="Only these connector classes (short or full names).")
@click.option("-f", "--format", "fmt", type=click.Choice(["text", "json", "markdown", "sarif"]),
              help="Output format (default: from --output's suffix, else text).")
@output_option("Write to this file.")
@click.option("--check", "check_path", type=click.Path(), metavar="FILE",
              help="Exit 1 when FILE (or its marked compat block) is not the current table.")
@click.option("--notes", is_flag=True, help="Text: also list notes (hooks not yet in a release).")
@click.option("--cache-dir", type=click.Path(), envvar="KVFLOWMAP_CACHE_DIR")
@click.option("--no-cache", is_flag=True, help="Neither read nor write cached surfaces and facts.")
def compat(src: tuple[str, ...], vllm: str | None, vllm_from_pins: bool,
           diff: tuple[str, str] | None, classes: tuple[str, ...], fmt: str | None,
           out: str | None, check_path: str | None, notes: bool, cache_dir: str | None,
           no_cache: bool) -> None:
    """Which vLLM releases a connector works with, and what changed between two."""
    from kvflowmap.commands import compat_cmd as cc

    fmt = out_format(out, fmt, cc.SUFFIXES, "text") if out else fmt
    fmt = fmt or ("markdown" if check_path else "text")
    check_writable(out)
    store = cc.store_for(cache_dir, no_cache)
    if diff:
        text = cc.diff_output(store, diff, fmt)
    elif not src and vllm:  # no connector: what changed between consecutive releases
        text = cc.range_diff_output(store, vllm, fmt)
    else:
        if not src:
            raise click.UsageError("give the connector sources (SRC), --diff A B, or --vllm "
                                   "A..B alone for the changes between consecutive releases")
        text = cc.matrix_output(store, [Path(s) for s in src], vllm, vllm_from_pins,
                                list(classes), fmt, notes)
    if check_path:
        raise click.exceptions.Exit(cc.check_file(text, check_path))
    if out:
        Path(out).write_text(text, encoding="utf-8")
    else:
        click.echo(text, nl=False)


@cli.command()
@click.argument("specs", nargs=-1, required=True, metavar="NAME==VERSION...")
@click.option("--cache-dir", type=click.Path(), envvar="KVFLOWMAP_CACHE_DIR")
def fetch(specs: Sequence[str], cache_dir: str | None) -> None:
    """Download releases once into the cache and print where they are."""
    from kvflowmap.index.cache import default_cache_dir
    from kvflowmap.sources.fetch import fetch_release

    root = Path(cache_dir) if cache_dir else default_cache_dir()
    for spec in specs:
        click.echo(f"{spec}\t{fetch_release(spec, root)}")


@cli.group()
def cache() -> None:
    """Inspect or clear the fact and release cache."""


@cache.command("info")
@click.option("--cache-dir", type=click.Path(), envvar="KVFLOWMAP_CACHE_DIR")
def cache_info(cache_dir: str | None) -> None:
    """Where the cache is and how big."""
    from kvflowmap.commands.cache_cmd import info

    click.echo(info(cache_dir))


@cache.command("clear")
@click.option("--cache-dir", type=click.Path(), envvar="KVFLOWMAP_CACHE_DIR")
@click.option("--releases", is_flag=True, help="Also delete downloaded releases.")
def cache_clear(cache_dir: str | None, releases: bool) -> None:
    """Delete cached facts (and releases with --releases)."""
    from kvflowmap.commands.cache_cmd import clear

    click.echo(clear(cache_dir, releases))


@cli.command()
@click.argument("name")
@source_options
@click.option("-f", "--format", "fmt", type=click.Choice(["text", "json"]),
              help="Output format (default: from the --output suffix, else text).")
@output_option("Write here instead of stdout.")
def where(name: str, fmt: str | None, out: str | None, **kw) -> None:
    """Where NAME is defined; its callers, callees and data links."""
    check_writable(out)
    fmt = out_format(out, fmt, TEXT_SUFFIXES, default="text") or "text"
    from kvflowmap.commands.nav_cmd import answer, where_answer

    req, config, rep = prepare(kw)
    raise click.exceptions.Exit(answer(req, config, rep, ("where", name, fmt),
                                       lambda a: where_answer(a, name, fmt), out))


@cli.command("path")
@click.argument("a")
@click.argument("b")
@source_options
@click.option("--max", "max_paths", type=int, default=5, show_default=True, help="Paths to list.")
@click.option("--calls-only", is_flag=True, help="Only calls, dispatch and bridges (no data steps).")
@click.option("-f", "--format", "fmt", type=click.Choice(["text", "json"]),
              help="Output format (default: from the --output suffix, else text).")
@output_option("Write here instead of stdout.")
def path_cmd(a: str, b: str, max_paths: int, calls_only: bool, fmt: str | None,
             out: str | None, **kw) -> None:
    """Paths from A to B, shortest first; file:line per step."""
    check_writable(out)
    fmt = out_format(out, fmt, TEXT_SUFFIXES, default="text") or "text"
    from kvflowmap.commands.nav_cmd import answer, path_answer

    req, config, rep = prepare(kw)
    raise click.exceptions.Exit(answer(
        req, config, rep, ("path", a, b, max_paths, fmt, calls_only),
        lambda an: path_answer(an, a, b, max_paths, fmt, calls_only), out))


@cli.command()
@source_options
@click.option("-f", "--format", "fmt", type=click.Choice(["text", "json", "mermaid", "svg"]),
              help="Output format (default: from the -o suffix, else text).")
@click.option("--wide", is_flag=True,
              help="Whole guards in a wide table, also on a terminal (files and pipes get it).")
@output_option("Write here instead of stdout.")
def states(fmt: str | None, out: str | None, wide: bool, **kw) -> None:
    """The request state machine found in the code."""
    from kvflowmap.commands.nav_cmd import answer, states_answer, states_width

    check_writable(out)
    fmt = out_format(out, fmt, STATES_SUFFIXES, default="text") or "text"
    width = None if wide else states_width(fmt, out)
    req, config, rep = prepare(kw)
    raise click.exceptions.Exit(answer(req, config, rep, ("states", fmt, width),
                                       lambda a: states_answer(a, fmt, width), out))


@cli.command()
@source_options
@click.option("-f", "--format", "fmt", type=click.Choice(["text", "json"]),
              help="Output format (default: from the --output suffix, else text).")
@output_option("Write here instead of stdout.")
def lifecycle(fmt: str | None, out: str | None, **kw) -> None:
    """Request ids per connector package: containers, hooks, hand-offs, reports."""
    from kvflowmap.commands.lifecycle_cmd import run_lifecycle

    check_writable(out)
    fmt = out_format(out, fmt, TEXT_SUFFIXES, default="text") or "text"
    req, config, rep = prepare(kw)
    raise click.exceptions.Exit(run_lifecycle(req, config, rep, fmt, out))


@cli.command()
@source_options
@output_option("Folder of the pages.", required=True)
@click.option("--check", is_flag=True, help="Exit 1 when the pages in --output are stale.")
@click.option("--link-template", "link_template", multiple=True, metavar="[NAME=]URL",
              help="Source links: URL (every root) or NAME=URL (the root NAME: vllm, pegaflow); "
                   "placeholders {root}, {path}, {version}, {file}, {line}. Repeatable.")
def docs(out: str, check: bool, link_template: tuple[str, ...], **kw) -> None:
    """Onboarding pages generated from the code (Markdown + SVG)."""
    from kvflowmap.commands.memo_run import run_memoised
    from kvflowmap.commands.docs_cmd import docs_key, docs_pages, run_docs

    check_writable(out, folder=True)
    req, config, rep = prepare(kw)
    template = link_templates(link_template, config)
    pages = run_memoised(req, config, rep, docs_key(out, template),
                         lambda a: docs_pages(a, out, template))
    raise click.exceptions.Exit(run_docs(pages, out, check, say=rep.note))


@cli.command()
@source_options
@click.option("-f", "--format", "fmt", type=click.Choice(["text", "json", "mermaid", "html"]),
              help="Output format (default: from the -o suffix, else text).")
@output_option("Write here instead of stdout.")
@click.option("--request", "request_id", metavar="ID", help="Only this request's story.")
@click.option("--since", metavar="TIME", help="Only lines from TIME on (MM-DD HH:MM:SS or HH:MM:SS).")
@click.option("--until", metavar="TIME", help="Only lines up to TIME.")
@click.option("--link-template", "link_template", multiple=True, metavar="[NAME=]URL",
              help="Source links in html/json: URL (every root) or NAME=URL (the root NAME); "
                   "placeholders {root}, {path}, {version}, {file}, {line}. Repeatable.")
def trace(fmt: str | None, out: str | None, request_id: str | None, since: str | None,
          until: str | None, link_template: tuple[str, ...], **kw) -> None:
    """Each request's story in vLLM + connector logs (LOG...), on the code, and
    where a stuck one stopped. Arguments are logs and sources: log files (plain
    or gzip; '-' is stdin) and the folders or .py files they come from. Exit 1
    when a request is stuck or breaks the protocol."""
    from kvflowmap.commands.trace_cmd import TRACE_SUFFIXES, run_trace, split_arguments

    logs, sources = split_arguments(tuple(kw["src"]))
    if not logs:
        raise click.UsageError("no log given: kvflowmap trace LOG... [SRC...]")
    kw["src"] = tuple(sources)
    check_writable(out)
    fmt = out_format(out, fmt, TRACE_SUFFIXES, default="text") or "text"
    req, config, rep = prepare(kw)
    template = link_templates(link_template, config)
    raise click.exceptions.Exit(run_trace(req, config, rep, logs, fmt, out, request_id,
                                          since, until, template))


def _register_rule_commands() -> None:
    from kvflowmap.commands import rules_cmd

    rules_cmd.register(cli)


_register_rule_commands()


class Terminated(BaseException):
    """SIGTERM arrived: unwind (ending pool workers) and exit 143. A
    ``BaseException``, like ``KeyboardInterrupt``: code that catches
    ``Exception`` (a parse that failed, a worker result redone in-process)
    must not swallow it and carry on."""


_TERMINATED: list[bool] = []  # set by the handler, read once the run unwinds


def _on_sigterm(signum, frame) -> None:
    # The flag as well as the exception: an exception raised by a signal handler
    # can land in code that swallows it (a finalizer, a broad except in a
    # library); the run must still end as terminated.
    _TERMINATED.append(True)
    raise Terminated()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code instead of exiting."""
    try:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread (an embedding program): leave it
        previous = None
    try:
        rc = _main(argv)
        if _TERMINATED and rc != EXIT_TERMINATED:  # the exception was swallowed on the way
            click.echo("kvflowmap: terminated", err=True)
            return EXIT_TERMINATED
        return rc
    finally:
        _TERMINATED.clear()
        runner = sys.modules.get("kvflowmap.index.runner")
        if runner is not None:
            runner.kill_workers()  # a pool an abort left open
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main(argv: Sequence[str] | None) -> int:
    try:
        with fewer_collections():
            rc = cli.main(args=list(argv) if argv is not None else None, prog_name="kvflowmap",
                          standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code or 0)
    except click.ClickException as exc:
        exc.show()
        return 2
    except click.exceptions.Abort as exc:  # click turns Ctrl-C into Abort
        return EXIT_INTERRUPTED if isinstance(exc.__cause__, KeyboardInterrupt) else 2
    except SourceError as exc:
        click.echo(f"kvflowmap: error: {exc}", err=True)
        return 2
    except SystemExit as exc:
        if type(sys.stdout).__name__.lstrip("_") == "PacifyFlushWrapper":
            # click turned a closed pipe (EPIPE) into exit 1 and wrapped stdout
            # (``PacifyFlushWrapper``; ``_PacifyFlushWrapper`` since click 8.5)
            return EXIT_PIPE
        return int(exc.code or 0)
    except KeyboardInterrupt:
        click.echo("kvflowmap: interrupted", err=True)
        return EXIT_INTERRUPTED
    except Terminated:
        click.echo("kvflowmap: terminated", err=True)
        return EXIT_TERMINATED
    except BrokenPipeError:
        # ``kvflowmap rules | head -1``: the reader left; say nothing more
        _silence_stdout()
        return EXIT_PIPE
    except Exception as exc:  # a bug in kvflowmap, not "findings"
        import traceback

        click.echo(f"kvflowmap: internal error: {type(exc).__name__}: {exc}\n"
                   "please report it with the trace below", err=True)
        traceback.print_exc()
        return EXIT_INTERNAL
    # In non-standalone mode click returns the code of ``Exit`` instead of raising.
    return rc if isinstance(rc, int) else 0


# Exit codes beyond 0 (clean), 1 (findings) and 2 (usage): never 1 for a failure.
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it
EXIT_PIPE = 141  # 128 + SIGPIPE
EXIT_TERMINATED = 143  # 128 + SIGTERM


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that flushing at exit raises nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file behind stdout
        pass


def run() -> None:
    """Console entry point: ``main``, then exit without tearing the heap down.

    Freeing a linked analysis object by object at interpreter exit took 0.8 s
    of a 3.6 s check (measured); the operating system reclaims it at once.
    Output streams are flushed first; nothing else is pending by then (pool
    workers are joined, cache writes are atomic and finished)."""
    rc = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more to say
            pass
    os._exit(rc)


if __name__ == "__main__":
    run()
