"""Recall of ``kvflowmap check`` on bug fixes mined from the connectors' histories.

    python bench/mined_recall.py                      # every case of bench/mined_fixes.json
    python bench/mined_recall.py --only moriio -j 2   # cases whose function matches
    python bench/mined_recall.py --json recall.json --work /tmp/recall

Each case (``bench/mined_fixes.json``, one row of ``docs/fix-histories/``) names
the release before a fix, the release after it and the function the fix
changed. The subject is the connector code of that release (vLLM's own
``kv_connector/v1`` against itself; PegaFlow, LMCache's vLLM integration and
vllm-ascend's ``distributed`` against vLLM 0.33.0; Mooncake's own connector in
``mooncake-transfer-engine``, written for vLLM 0.10 to 0.12, against 0.11.1; a
case may name another vLLM as its ``context``), checked with every shipped
rule. A case is *found* when a finding on the release before names the
function (or a def nested in it; only the module, for a fix of module-level
code such as an import) and no finding of the same rule names a function of
the same class and name on the release after. Each release is
checked once per run, in a child process of its own (peak memory stays that of
one analysis); ``--work`` keeps the findings per release so that a second run
with the same sources only redoes what is missing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
# code base -> (subject inside the release, or a tuple of them when several folders
# hold the connector code; context release or None for itself)
SUBJECTS: dict[str, tuple[str | tuple[str, ...], str | None]] = {
    "vllm": ("vllm/distributed/kv_transfer/kv_connector/v1", None),
    "pegaflow-llm": ("pegaflow", "vllm==0.33.0"),
    "lmcache": ("lmcache/integration/vllm", "vllm==0.33.0"),
    "vllm-ascend": ("vllm_ascend/distributed", "vllm==0.33.0"),
    "mooncake-transfer-engine": ("mooncake", "vllm==0.11.1"),  # it refuses vLLM >= 0.13
    "kvbm": ("kvbm/vllm_integration", "vllm==0.33.0"),  # Dynamo's KV block manager
    "aibrix-kvcache": ("aibrix_kvcache/integration/vllm", "vllm==0.33.0"),
    # Unified Cache Management (its connectors; from 0.7.0 the code ships as
    # uc-manager-cuda-*, which this bench does not fetch)
    "uc-manager": ("ucm/integration/vllm", "vllm==0.18.0"),
    # Google's TPU backend for vLLM: P/D connectors and offloading
    "tpu-inference": (("tpu_inference/distributed", "tpu_inference/offload"), "vllm==0.33.0"),
}
GROUPS = (  # how the table is cut: (label, code base, predicate on the release before)
    ("vLLM 0.9 to 0.22", "vllm", lambda v: _ver(v) < (0, 22, 1)),
    ("vLLM 0.22 to 0.34", "vllm", lambda v: _ver(v) >= (0, 22, 1)),
    ("vllm-ascend, LMCache, PegaFlow, Mooncake, KVBM, AIBrix, UCM", None,
     lambda v: True),
    ("tpu-inference", "tpu-inference", lambda v: True),
)


@dataclass(frozen=True)
class Case:
    """One mined fix: ``function`` changed between ``before`` and ``after``."""

    codebase: str
    before: str
    after: str
    function: str
    bug: str
    # the vLLM to check against when not the code base's default (an import
    # fix is a fix against the vLLM release that moved the name)
    context: str = ""
    file_line: str = ""

    @property
    def module_level(self) -> bool:
        """The fix changed module-level code (an import): the case's function
        is the module of its file, and only a finding on the module counts."""
        stem = Path(self.file_line.partition(":")[0]).stem
        return bool(stem) and self.function.rpartition(".")[2] == stem


def _ver(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split(".") if p.isdigit())


def load_cases(path: Path) -> list[Case]:
    """The cases of a ``mined_fixes.json``."""
    rows = json.loads(path.read_text(encoding="utf-8"))["cases"]
    return [Case(r["codebase"], r["before"], r["after"], r["function"], r["bug"],
                 r.get("context", ""), r.get("file_line", "")) for r in rows]


def check_one(codebase: str, version: str, context_spec: str = "") -> list[dict[str, str]]:
    """Every shipped rule on one release's connector code (run in a child)."""
    from kvflowmap.api import Request, analyse
    from kvflowmap.check.engine import run_rules
    from kvflowmap.check.loader import default_rule_dirs, load_rules
    from kvflowmap.index.cache import default_cache_dir
    from kvflowmap.sources.fetch import fetch_release

    subject, context = SUBJECTS[codebase]
    context = context_spec or context
    spec = f"{codebase}=={version}"
    cache = default_cache_dir()
    root = fetch_release(spec, cache)
    ctx = context or spec
    ctx_root = root if context is None else fetch_release(context, cache)
    subjects = (subject,) if isinstance(subject, str) else subject
    # a folder a release does not have yet (tpu-inference's offload/ before 0.20)
    a = analyse(Request(sources=[str(root / s) for s in subjects if (root / s).exists()],
                        release_roots=[(ctx_root, ctx.replace("==", " "))], cache_dir=cache))
    rules, errors = load_rules(default_rule_dirs())
    if errors:
        raise SystemExit(f"rule errors: {errors}")
    return sorted(({"rule": f.rule, "function": f.function, "file": f.file, "line": str(f.line)}
                   for f in run_rules(a, rules)), key=lambda d: tuple(d.values()))


def release_findings(codebase: str, version: str, context: str, work: Path
                     ) -> list[dict[str, str]]:
    """Every shipped rule's findings on one release, checked in a child
    process and kept as JSON in ``work`` (reused when already there)."""
    out = work / (f"{codebase}-{version}" + (f"-{context}" if context else "") + ".json")
    if not out.exists():
        proc = subprocess.run([sys.executable, __file__, "--one", codebase, version, context],
                              capture_output=True, text=True, check=False)
        if proc.returncode:
            print(f"{codebase} {version}: check failed\n{proc.stderr[-2000:]}", file=sys.stderr)
            return []
        out.write_text(proc.stdout, encoding="utf-8")
    data: list[dict[str, str]] = json.loads(out.read_text(encoding="utf-8"))
    return data


def _names(fn: str, function: str) -> bool:
    """A finding's function is the case's function or a def nested in it."""
    return fn == function or fn.startswith(function + ".")


def _same_member(fn: str, function: str) -> bool:
    """The same ``Class.method`` (or nested def) where the module moved."""
    tail = ".".join(function.split(".")[-2:])
    return fn.endswith("." + tail) or f".{tail}." in fn


def verdict(case: Case, before: Iterable[dict[str, str]], after: Iterable[dict[str, str]]) -> str | None:
    """The rule that finds ``case``, or None."""
    gone_after = {f["rule"] for f in after if (
        f["function"] == case.function if case.module_level
        else _same_member(f["function"], case.function))}
    for f in before:
        named = f["function"] == case.function if case.module_level else \
            _names(f["function"], case.function)
        if named and f["rule"] not in gone_after:
            return f["rule"]
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the cases and print the recall table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=Path, default=HERE / "mined_fixes.json")
    p.add_argument("--only", default="", help="substring of the function or code base")
    p.add_argument("--work", type=Path, default=None, help="keep per-release findings here")
    p.add_argument("-j", "--jobs", type=int, default=1)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--one", nargs=3, metavar=("CODEBASE", "VERSION", "CONTEXT"),
                   help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        json.dump(check_one(*args.one), sys.stdout)
        return 0
    cases = [c for c in load_cases(args.cases) if args.only in c.function or args.only == c.codebase]
    work = args.work or Path(tempfile.mkdtemp(prefix="mined-recall-"))
    work.mkdir(parents=True, exist_ok=True)
    releases = sorted({(c.codebase, v, c.context) for c in cases for v in (c.before, c.after)})
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        found = dict(zip(releases, pool.map(lambda r: release_findings(*r, work), releases),
                         strict=True))
    rows = [(c, verdict(c, found[c.codebase, c.before, c.context],
                        found[c.codebase, c.after, c.context])) for c in cases]
    for c, rule in rows:
        print(f"{'found' if rule else 'missed':6} {c.codebase} {c.before} -> {c.after}  "
              f"{'.'.join(c.function.split('.')[-2:])}  {rule or ''}")
    print("\n| fix histories | found |\n|---|---|")
    for label, cb, pred in GROUPS:
        mine = [(c, r) for c, r in rows if (c.codebase == cb if cb else c.codebase not in
                                            ("vllm", "tpu-inference"))
                and pred(c.before)]
        if mine:
            print(f"| {label} | {sum(1 for _, r in mine if r)} of {len(mine)} |")
    print(f"| all | {sum(1 for _, r in rows if r)} of {len(rows)} |")
    if args.json:
        args.json.write_text(json.dumps([{**c.__dict__, "found_by": r} for c, r in rows], indent=1),
                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
