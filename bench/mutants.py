"""Mutation harness: the recall of ``kvflowmap check`` on real connector code.

    python bench/mutants.py                                  # all five code bases
    python bench/mutants.py --codebase pegaflow --operator drop-report --max-per-op 2
    python bench/mutants.py --json mutants.json
    python bench/mutants.py --sites-only [--list-sites]      # count sites only, no analysis

For each code base the release's import root is copied once into a temporary
folder (removed at the end; the cached release is never touched) and analysed
in-process as ``tests/integration/corpora.py`` does, with a fact cache of its
own, so each mutant reparses only its one file. A baseline run records the
findings on the unmutated copy. Each mutant (``bench/mutation_ops.py``) is
written over its file, checked to compile (never imported or run), analysed
with every shipped rule, and the file restored.

A mutant is *detected* when a finding absent from the baseline (keyed by rule,
function and anchor-or-message with digits stripped) names the mutated
function, or one of the defs enclosing the site (a nested def's finding may be
reported on its method), as its ``function``, or has that function among its
path steps; or when a baseline finding of that function now points at the
mutated lines (``MOVED_SPAN``) instead of where it was. A missed mutant at a
site the unmutated code is already reported at (in the same function, within
that span) is counted missed and shown as ``+N pre``: nothing new can appear.

Sites are looked for only in *connector modules*: subject files whose text
defines or imports a name containing ``Connector``, ``Worker`` or
``Scheduler`` (``CONNECTOR_RE``), outside vLLM's ``KVConnectorBase*``
classes (the protocol itself, ``EXCLUDED_RE``). They are taken deterministically: sorted by
file and line, then round-robin over files (distinct functions of a file
first) until ``--max-per-op`` per code base.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mutation_ops import OPERATORS, Site, find_sites, mutate  # noqa: E402

from kvflowmap.api import Request, analyse  # noqa: E402
from kvflowmap.check.engine import run_rules  # noqa: E402
from kvflowmap.check.loader import default_rule_dirs, load_rules  # noqa: E402
from kvflowmap.check.model import Finding, Rule  # noqa: E402
from kvflowmap.sources.fetch import fetch_release  # noqa: E402
from kvflowmap.sources.roots import module_name  # noqa: E402

CONNECTOR_RE = re.compile(r"^\s*(class|from|import)\b.*(Connector|Worker|Scheduler)", re.M)
# vLLM's own protocol base classes are the contract, not connector code.
EXCLUDED_RE = re.compile(r"\.KVConnectorBase\w*\.")
FindingKey = tuple[str, str, str]
# keys of the unmutated code's findings (with their lines, to see one move)
Baseline = Mapping[FindingKey, set[int]] | set[FindingKey]
MOVED_SPAN = 3  # lines a mutant adds at its site


@dataclass(frozen=True)
class Codebase:
    """A subject inside a release, analysed against a vLLM release."""

    name: str
    release: str  # NAME==VERSION of the subject's release
    subject: str  # path inside the release's import root
    context: str | None  # NAME==VERSION of vLLM; None: the subject's own release


CODEBASES = (
    Codebase("pegaflow", "pegaflow-llm==0.25.1", "pegaflow", "vllm==0.33.0"),
    Codebase("lmcache", "lmcache==0.5.6", "lmcache/integration/vllm", "vllm==0.33.0"),
    Codebase("vllm-0.33", "vllm==0.33.0", "vllm/distributed/kv_transfer/kv_connector/v1", None),
    Codebase("vllm-ascend", "vllm-ascend==0.23.0", "vllm_ascend/distributed", "vllm==0.33.0"),
    Codebase("vllm-0.11", "vllm==0.11.0", "vllm/distributed/kv_transfer/kv_connector/v1", None),
    # Mooncake's own copy of its connector (for vLLM 0.10 to 0.12): first read
    # after its findings
    Codebase("mooncake-te", "mooncake-transfer-engine==0.3.13.post1", "mooncake", "vllm==0.11.1"),
    # Google's TPU backend (P/D connectors): first read in the thirteenth
    # session, after its fixes were mined
    Codebase("tpu-inference", "tpu-inference==0.32.0", "tpu_inference/distributed",
             "vllm==0.33.0"),
    # Rebellions' NPU backend: NIXL and encoder-cache connectors that subclass
    # vLLM 0.30.0's own NIXL classes (mutated first in the twenty-first session)
    Codebase("vllm-rbln", "vllm-rbln==0.12.0", "vllm_rbln/distributed", "vllm==0.30.0"),
)


@dataclass
class MutantResult:
    """One mutant and what the rules said about it."""

    file: str
    line: int
    function: str
    operator: str
    snippet: str
    valid: bool
    detected: bool = False
    rules: list[str] = field(default_factory=list)
    new_findings: int = 0  # findings not in the baseline, anywhere
    new: list[FindingKey] = field(default_factory=list)  # their keys
    seconds: float = 0.0
    error: str = ""
    # missed, but the unmutated code is already reported in this function at
    # the site (a loop that already dies there): nothing new can be reported
    preflagged: bool = False


@dataclass
class CodebaseResult:
    """Baseline, sites and mutants of one code base."""

    name: str
    baseline: list[FindingKey]  # distinct keys of the baseline findings
    baseline_findings: int
    baseline_seconds: float
    sites: dict[str, int]
    mutants: list[MutantResult]
    seconds: float = 0.0


# -- releases and analysis ---------------------------------------------------

def release_cache() -> Path:
    """Where releases are unpacked (``KVFLOWMAP_TEST_CACHE`` or the user cache),
    the same folder the integration tests use."""
    from platformdirs import user_cache_dir

    return Path(os.environ.get("KVFLOWMAP_TEST_CACHE") or user_cache_dir("kvflowmap"))


def release(spec: str) -> Path:
    """Import root of a release, downloaded on first use."""
    return fetch_release(spec, release_cache())


def finding_key(f: Finding) -> FindingKey:
    """A finding's identity across line shifts: rule, function, anchor or message
    with digits stripped."""
    return (f.rule, f.function, re.sub(r"\d+", "", f.anchor or f.message))


@dataclass(frozen=True)
class Subject:
    """What one analysis run needs: the subject dir, the context roots, a cache."""

    root: Path  # import root holding the (copied) subject
    subject: Path
    context: tuple[tuple[Path, str], ...]
    cache: Path


def check(subject: Subject, rules: Sequence[Rule]) -> list[Finding]:
    """Analyse the subject against its context and run every rule."""
    a = analyse(Request(sources=[str(subject.subject)], release_roots=list(subject.context),
                        cache_dir=subject.cache))
    return run_rules(a, rules)


def prepare(cb: Codebase, tmp: Path, get_release: Callable[[str], Path] = release) -> Subject:
    """Copy the subject's release root under ``tmp``; the copy is the subject
    (and, for vLLM, its own context, as ``corpora.check_corpus`` analyses the
    real one). ``get_release(spec)`` gives a release's import root."""
    root = tmp / cb.name
    shutil.copytree(get_release(cb.release), root, symlinks=True)
    label = cb.context or cb.release
    ctx_root = root if cb.context is None else get_release(cb.context)
    return Subject(root, root / cb.subject, ((ctx_root, label.replace("==", " ")),),
                   tmp / f"{cb.name}-facts")


def codebase(name: str) -> Codebase:
    """The code base called ``name``."""
    return next(c for c in CODEBASES if c.name == name)


# -- sites ----------------------------------------------------------------------

def connector_files(subject: Subject) -> list[Path]:
    """Subject files that define or import a connector/worker/scheduler name."""
    files = [subject.subject] if subject.subject.is_file() else sorted(
        subject.subject.rglob("*.py"))
    return [f for f in files if CONNECTOR_RE.search(f.read_text(encoding="utf-8"))]


def all_sites(subject: Subject, operators: Iterable[str]) -> dict[str, list[Site]]:
    """Every site per operator in the connector files, sorted by file and line."""
    out: dict[str, list[Site]] = {op: [] for op in operators}
    for f in connector_files(subject):
        rel = f.relative_to(subject.root)
        text = f.read_text(encoding="utf-8")
        for op, sites in find_sites(out, text, str(rel), module_name(rel)[0]).items():
            out[op].extend(sites)
    return {op: sorted((s for s in sites if not EXCLUDED_RE.search(s.function + ".")),
                       key=lambda s: (s.file, s.line, s.ordinal)) for op, sites in out.items()}


def choose(sites: Sequence[Site], cap: int) -> list[Site]:
    """Up to ``cap`` sites, round-robin over files, distinct functions first."""
    by_file: dict[str, list[Site]] = {}
    for s in sites:
        by_file.setdefault(s.file, []).append(s)
    queues = [_distinct_first(v) for _, v in sorted(by_file.items())]
    picked: list[Site] = []
    while len(picked) < cap and any(queues):
        for q in queues:
            if q and len(picked) < cap:
                picked.append(q.pop(0))
    return sorted(picked, key=lambda s: (s.file, s.line, s.ordinal))


def _distinct_first(sites: list[Site]) -> list[Site]:
    seen: set[str] = set()
    first, rest = [], []
    for s in sites:
        (rest if s.function in seen else first).append(s)
        seen.add(s.function)
    return first + rest


# -- mutants --------------------------------------------------------------------

def detected_by(new: Iterable[Finding], site: Site) -> list[str]:
    """Rules of the new findings that name the mutated function (or an enclosing
    def) as their function or a path step."""
    names = set(site.enclosing)
    rules = {f.rule for f in new
             if f.function in names or any(s.function in names for s in f.path)}
    return sorted(rules)


def baseline_of(found: Iterable[Finding]) -> dict[FindingKey, set[int]]:
    """Each baseline finding's key with the lines it is reported at."""
    out: dict[FindingKey, set[int]] = {}
    for f in found:
        out.setdefault(finding_key(f), set()).add(f.line)
    return out


def moved_to(found: Iterable[Finding], baseline: Mapping[FindingKey, set[int]],
             site: Site) -> list[Finding]:
    """Findings the baseline has, that now point at the mutated lines instead
    (a loop that already let one exception out now dies at the mutant's
    ``raise``): the tool reports the bug, though not as a new finding."""
    near = range(site.line - MOVED_SPAN, site.line + 2 * MOVED_SPAN + 1)
    return [f for f in found if finding_key(f) in baseline and
            site.line <= f.line <= site.line + MOVED_SPAN and
            not any(line in near for line in baseline[finding_key(f)])]  # it was elsewhere


def run_mutant(subject: Subject, rules: Sequence[Rule], baseline: Baseline,
               site: Site) -> MutantResult:
    """Mutate the site's file, check that it compiles, evaluate it."""
    path = subject.root / site.file
    original = path.read_text(encoding="utf-8")
    try:
        text = mutate(original, site)
        compile(text, str(path), "exec")
        if text == original:
            raise ValueError("mutation changed nothing")
    except (SyntaxError, ValueError, IndexError) as exc:
        return MutantResult(site.file, site.line, site.function, site.operator, site.snippet,
                            False, error=f"{type(exc).__name__}: {exc}")
    return evaluate(subject, rules, baseline, site, text)


def evaluate(subject: Subject, rules: Sequence[Rule], baseline: Baseline,
             site: Site, text: str) -> MutantResult:
    """Write ``text`` over the site's file, check, restore the file; the new
    findings that name the site's function make it detected, and so do
    baseline findings of it that moved to the mutated lines (a set of keys
    as ``baseline`` only counts new ones)."""
    path = subject.root / site.file
    original = path.read_text(encoding="utf-8")
    res = MutantResult(site.file, site.line, site.function, site.operator, site.snippet, True)
    t0 = time.perf_counter()
    try:
        path.write_text(text, encoding="utf-8")
        found = check(subject, rules)
    finally:
        path.write_text(original, encoding="utf-8")
    new = [f for f in found if finding_key(f) not in baseline]
    moved = moved_to(found, baseline, site) if isinstance(baseline, Mapping) else []
    res.seconds = time.perf_counter() - t0
    res.rules = detected_by([*new, *moved], site)
    res.detected, res.new_findings = bool(res.rules), len(new)
    res.preflagged = not res.detected and isinstance(baseline, Mapping) and \
        preflagged(baseline, site)
    res.new = sorted({finding_key(f) for f in new})
    return res


def preflagged(baseline: Mapping[FindingKey, set[int]], site: Site) -> bool:
    """A baseline finding of the mutated function already points at the site."""
    near = range(site.line - MOVED_SPAN, site.line + 2 * MOVED_SPAN + 1)
    names = set(site.enclosing)
    return any(k[1] in names and any(line in near for line in lines)
               for k, lines in baseline.items())


def run_codebase(cb: Codebase, subject: Subject, rules: Sequence[Rule],
                 operators: Sequence[str], cap: int,
                 log: Callable[[str], None] = print) -> CodebaseResult:
    """Baseline, site search and every chosen mutant of one code base."""
    t_start = time.perf_counter()
    base = check(subject, rules)
    t_base = time.perf_counter() - t_start
    baseline = baseline_of(base)
    log(f"{cb.name}: baseline {len(base)} findings in {t_base:.1f}s")
    sites = all_sites(subject, operators)
    mutants: list[MutantResult] = []
    for op in operators:
        for site in choose(sites[op], cap):
            r = run_mutant(subject, rules, baseline, site)
            mutants.append(r)
            state = "INVALID" if not r.valid else ("detected" if r.detected else
                                                   "missed (already reported here)"
                                                   if r.preflagged else "missed")
            log(f"  {op:22} {site.file}:{site.line} {site.function.rsplit('.', 2)[-2:]} "
                f"{state} {','.join(r.rules)} ({r.seconds:.1f}s)")
    return CodebaseResult(cb.name, sorted(baseline), len(base), t_base,
                          {op: len(v) for op, v in sites.items()}, mutants,
                          time.perf_counter() - t_start)


# -- report -----------------------------------------------------------------------

VERDICTS = Path(__file__).with_name("mutant_verdicts.json")


def read_verdicts(path: Path = VERDICTS) -> set[tuple[str, str, str, int]]:
    """The missed mutants read in the code and judged harmless (equivalent,
    or made safe by the connector's design), as (code base, operator, file,
    line); each entry of the file carries its reason."""
    if not path.exists():
        return set()
    data = json.loads(path.read_text(encoding="utf-8"))
    return {(v["codebase"], v["operator"], v["file"], int(v["line"])) for v in data["verdicts"]}


def _cell(ms: list[MutantResult], harmless: Callable[[MutantResult], bool] = lambda m: False
          ) -> str:
    valid = [m for m in ms if m.valid]
    if not valid:
        return "-"
    d = sum(m.detected for m in valid)
    pre = sum(m.preflagged for m in valid)
    read = sum(not m.detected and not m.preflagged and harmless(m) for m in valid)
    return (f"{d}/{len(valid)} ({100 * d / len(valid):.0f}%)" + (f" +{pre} pre" if pre else "")
            + (f" +{read} read" if read else ""))


def table(results: Sequence[CodebaseResult], operators: Sequence[str],
          verdicts: set[tuple[str, str, str, int]] | None = None) -> str:
    """Detected/total per operator and code base (``+N pre``: of the missed,
    N at a site the unmutated code is already reported at; ``+N read``: N
    read and judged harmless, ``mutant_verdicts.json``), candidate sites,
    baseline counts."""
    names = [r.name for r in results]
    rows: list[list[str]] = [["operator", *names]]
    seen = verdicts if verdicts is not None else read_verdicts()

    def cell(r: CodebaseResult, ms: list[MutantResult]) -> str:
        return _cell(ms, lambda m: (r.name, m.operator, m.file, m.line) in seen)

    for op in operators:
        rows.append([op, *(cell(r, [m for m in r.mutants if m.operator == op]) for r in results)])
    rows.append(["all", *(cell(r, r.mutants) for r in results)])
    rows.append(["baseline findings", *(str(r.baseline_findings) for r in results)])
    rows.append(["", *([""] * len(results))])
    rows.append(["candidate sites", *names])
    for op in operators:
        rows.append([op, *(str(r.sites[op]) for r in results)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in rows)


def summary(results: Sequence[CodebaseResult], total: float,
            verdicts: set[tuple[str, str, str, int]] | None = None) -> str:
    """Totals: mutants, invalid ones, seconds per mutant, caught among all
    and among those not judged harmless."""
    seen = verdicts if verdicts is not None else read_verdicts()
    ms = [m for r in results for m in r.mutants]
    valid = [m for m in ms if m.valid]
    per = sum(m.seconds for m in valid) / len(valid) if valid else 0.0
    bad = [f"{m.operator} {m.file}:{m.line} {m.error}" for m in ms if not m.valid]
    caught = sum(m.detected for m in valid)
    harmless = sum(not m.detected and (r.name, m.operator, m.file, m.line) in seen
                   for r in results for m in r.mutants if m.valid)
    lines = [f"{len(valid)} mutants ({len(ms) - len(valid)} invalid), "
             f"{per:.2f} s per mutant, {total:.0f} s in all",
             f"caught {caught}/{len(valid)}; {harmless} missed ones read and judged harmless "
             f"(bench/mutant_verdicts.json): caught {caught}/{len(valid) - harmless} of the rest"]
    return "\n".join([*lines, *("  invalid: " + b for b in bad)])


def site_counts(cbs: Sequence[Codebase], operators: Sequence[str],
                get_release: Callable[[str], Path] = release,
                list_sites: bool = False) -> str:
    """Candidate sites per operator and code base, found in the cached releases
    themselves (read only, nothing copied or analysed)."""
    counts: dict[str, dict[str, int]] = {}
    lines: list[str] = []
    for cb in cbs:
        root = get_release(cb.release)
        subject = Subject(root, root / cb.subject, (), root)
        sites = all_sites(subject, operators)
        counts[cb.name] = {op: len(v) for op, v in sites.items()}
        if list_sites:
            lines.extend(f"{cb.name} {op:22} {s.file}:{s.line} "
                         f"{'.'.join(s.function.rsplit('.', 2)[-2:])}  {s.snippet}"
                         for op in operators for s in sites[op])
    rows = [["operator", *counts], *([op, *(str(counts[c][op]) for c in counts)]
                                     for op in operators)]
    rows.append(["all", *(str(sum(counts[c].values())) for c in counts)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines.extend("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                 for row in rows)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the harness; print the table; optionally write JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--codebase", action="append", choices=[c.name for c in CODEBASES])
    ap.add_argument("--operator", action="append", choices=list(OPERATORS))
    ap.add_argument("--max-per-op", type=int, default=8)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--sites-only", action="store_true",
                    help="only count candidate sites per operator (no analysis)")
    ap.add_argument("--list-sites", action="store_true",
                    help="with --sites-only: list every site too")
    args = ap.parse_args(argv)
    cbs = [c for c in CODEBASES if not args.codebase or c.name in args.codebase]
    ops = args.operator or list(OPERATORS)
    if args.sites_only:
        print(site_counts(cbs, ops, list_sites=args.list_sites))
        return 0
    rules, errors = load_rules(default_rule_dirs())
    if errors:
        raise SystemExit(f"rule errors: {errors}")
    t0 = time.perf_counter()
    results: list[CodebaseResult] = []
    with tempfile.TemporaryDirectory(prefix="kvflowmap-mutants-") as tmp:
        for cb in cbs:
            subject = prepare(cb, Path(tmp))
            results.append(run_codebase(cb, subject, rules, ops, args.max_per_op))
    total = time.perf_counter() - t0
    print(table(results, ops))
    print(summary(results, total))
    if args.json:
        args.json.write_text(json.dumps({"seconds": total, "operators": ops,
                                         "codebases": [asdict(r) for r in results]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
