"""The findings of every shipped rule on a fixed corpus of real releases, and
what changed against an earlier run: how a ``check`` change is judged before
it lands (no new finding unread, none lost unexplained).

    python bench/corpus_diff.py --out /tmp/c1                    # run, keep findings
    python bench/corpus_diff.py --out /tmp/c2 --against /tmp/c1  # run, then diff
    python bench/corpus_diff.py --out /tmp/c2 --only vllm-ascend -j 2

Each release runs in a child process (``bench/mined_recall.py --one``, the
same subjects and vLLM contexts as the mined-fix bench), its findings kept as
``OUT/<codebase>-<version>.json``; a file already there is reused, so a
rerun after a crash goes on. The corpus is kept here, not in scratch space:
earlier sessions lost theirs with it. Prints per release the count and, with
``--against``, every finding added or gone (rule, function, file), keyed
without line numbers so that an unrelated edit that moves code is no change.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mined_recall import release_findings  # noqa: E402

# (code base of bench/mined_recall.py's SUBJECTS, version): the seven triaged
# releases (tests/integration/corpora.py) and releases before and after fixes
CORPUS: tuple[tuple[str, str], ...] = (
    ("pegaflow-llm", "0.25.1"), ("vllm", "0.33.0"), ("lmcache", "0.5.6"),
    ("vllm-ascend", "0.23.0"), ("vllm", "0.11.0"), ("mooncake-transfer-engine", "0.3.13.post1"),
    ("aibrix-kvcache", "0.8.0"),
    ("vllm", "0.9.2"), ("vllm", "0.10.0"), ("vllm", "0.13.0"), ("vllm", "0.14.0"),
    ("vllm", "0.17.1"), ("vllm", "0.18.0"), ("vllm", "0.22.0"), ("vllm", "0.25.1"),
    ("vllm", "0.29.0"), ("vllm", "0.31.0"),
    ("pegaflow-llm", "0.18.0"), ("pegaflow-llm", "0.21.0"), ("pegaflow-llm", "0.24.1"),
    ("lmcache", "0.3.11"), ("lmcache", "0.4.2"), ("lmcache", "0.5.0"),
    ("vllm-ascend", "0.11.0"), ("vllm-ascend", "0.18.0"),
    ("kvbm", "0.9.0"), ("mooncake-transfer-engine", "0.3.9"), ("tpu-inference", "0.32.0"),
)

Key = tuple[str, str, str]


def _keys(rows: list[dict[str, str]]) -> Counter[Key]:
    return Counter((r["rule"], r["function"], r["file"]) for r in rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the corpus into ``--out`` and print counts and the diff."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="folder for per-release findings")
    p.add_argument("--against", type=Path, default=None, help="an earlier --out to diff with")
    p.add_argument("--only", default="", help="substring of CODEBASE-VERSION")
    p.add_argument("-j", "--jobs", type=int, default=1)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    todo = [(c, v) for c, v in CORPUS if args.only in f"{c}-{v}"]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda cv: release_findings(cv[0], cv[1], "", args.out), todo))
    total = changed = 0
    for (c, v), rows in zip(todo, results, strict=True):
        total += len(rows)
        line = f"{c}-{v}: {len(rows)}"
        if args.against is not None:
            old_path = args.against / f"{c}-{v}.json"
            if not old_path.exists():
                print(f"{line} (no earlier run)")
                continue
            old = _keys(json.loads(old_path.read_text(encoding="utf-8")))
            new = _keys(rows)
            added, gone = new - old, old - new
            changed += sum(added.values()) + sum(gone.values())
            line += f" (was {sum(old.values())})"
            print(line)
            for k in sorted(added):
                print(f"  + {k[0]}  {k[1]}  {k[2]}")
            for k in sorted(gone):
                print(f"  - {k[0]}  {k[1]}  {k[2]}")
        else:
            print(line)
    print(f"total {total} findings on {len(todo)} releases"
          + (f"; {changed} changed" if args.against is not None else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
