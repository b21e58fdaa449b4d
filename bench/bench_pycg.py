"""Call-graph precision and recall on PyCG's micro-benchmark (issue 10).

    python bench/bench_pycg.py              # every category, per category and in all
    python bench/bench_pycg.py --show args  # also each snippet's missing/extra edges

The benchmark ships in PyCG's sdist on PyPI (``pycg==0.0.8``: small programs,
one or more per Python feature, each with the expected call graph in PyCG's
"simple" JSON). It is downloaded once with pip into the kvflowmap cache
(``<cache>/bench/pycg``), never committed. Each snippet folder is analysed as
its own subject (``api.build_graph``), the graph written as PyCG JSON
(``render.json_out.to_pycg``), and its edges (caller, callee) compared with the
expected ones. Precision = right edges / edges kvflowmap draws, recall = right
edges / expected edges, summed over the snippets (micro-averaged). "exact" counts
snippets whose edges match in full. The ``dynamic`` category (``eval``,
``getattr`` with computed names) is printed but left out of the totals, as
the numbers the issue quotes leave it out.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
from pathlib import Path

from kvflowmap.api import build_graph
from kvflowmap.index.cache import default_cache_dir
from kvflowmap.render.json_out import to_pycg

SPEC = "pycg==0.0.8"
LEFT_OUT = ("dynamic",)
Edges = set[tuple[str, str]]


def benchmark_root(cache: Path) -> Path:
    """The ``micro-benchmark/snippets`` folder, downloaded once."""
    home = cache / "bench" / "pycg"
    snippets = next(home.glob("pycg-*/micro-benchmark/snippets"), None)
    if snippets is not None:
        return snippets
    home.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary",
                    ":all:", "-d", str(home), SPEC], check=True)
    archive = next(home.glob("pycg-*.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(home, filter="data")
    return next(home.glob("pycg-*/micro-benchmark/snippets"))


def edges(graph: dict[str, list[str]]) -> Edges:
    """(caller, callee) pairs of a PyCG simple call graph."""
    return {(a, b) for a, callees in graph.items() for b in callees}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cache", type=Path, default=None, help="kvflowmap cache folder")
    ap.add_argument("--show", action="append", default=[], metavar="CATEGORY",
                    help="print each snippet's missing and extra edges in this category")
    args = ap.parse_args()
    root = benchmark_root(args.cache or default_cache_dir())
    rows: dict[str, list[int]] = {}  # category -> [right, ours, expected, exact, snippets]
    for expected_file in sorted(root.glob("*/*/callgraph.json")):
        snippet = expected_file.parent
        category = snippet.parent.name
        expected = edges(json.loads(expected_file.read_text(encoding="utf-8")))
        ours = edges(to_pycg(build_graph([str(snippet)])))
        row = rows.setdefault(category, [0, 0, 0, 0, 0])
        right = ours & expected
        row[0] += len(right)
        row[1] += len(ours)
        row[2] += len(expected)
        row[3] += ours == expected
        row[4] += 1
        if category in args.show and ours != expected:
            print(f"{category}/{snippet.name}: missing {sorted(expected - ours)}, "
                  f"extra {sorted(ours - expected)}")
    print(f"{'category':14} {'precision':>9} {'recall':>7} {'exact':>7}")
    total = [0, 0, 0, 0, 0]
    for category, (right, ours, expected, exact, n) in sorted(rows.items()):
        print(f"{category:14} {_ratio(right, ours):>9} {_ratio(right, expected):>7} "
              f"{exact:>3}/{n:<3}" + ("  (left out of the totals)" if category in LEFT_OUT else ""))
        if category not in LEFT_OUT:
            total = [t + v for t, v in zip(total, (right, ours, expected, exact, n), strict=True)]
    right, ours, expected, exact, n = total
    print(f"{'all':14} {_ratio(right, ours):>9} {_ratio(right, expected):>7} {exact:>3}/{n:<3}")


def _ratio(a: int, b: int) -> str:
    return f"{a / b:.2f}" if b else "-"


if __name__ == "__main__":
    main()
