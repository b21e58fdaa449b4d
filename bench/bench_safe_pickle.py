"""Side-by-side cost of loading the fact cache with the restricted unpickler
(``index/safe_pickle``) against plain ``pickle.loads``, on the entries of a
real cache folder. Prints the ratio; the restricted loader refuses code, so
some cost is expected, and it should stay small."""

from __future__ import annotations

import argparse
import lzma
import pickle
import time
from pathlib import Path

from platformdirs import user_cache_dir

from kvflowmap.index import safe_pickle
from kvflowmap.index.cache import HEADER


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cache", default=str(Path(user_cache_dir("kvflowmap")) / "facts"))
    ap.add_argument("--limit", type=int, default=3000)
    args = ap.parse_args()
    blobs = []
    for p in sorted(Path(args.cache).rglob("*.pkl"))[: args.limit]:
        data = p.read_bytes()
        if data.startswith(HEADER):
            blobs.append(lzma.decompress(data[len(HEADER):]))
    if not blobs:
        raise SystemExit(f"no current fact-cache entries under {args.cache}")
    times = {}
    for name, load in (("pickle.loads", pickle.loads), ("safe_pickle.loads", safe_pickle.loads),
                       ("pickle.loads (again)", pickle.loads)):
        t = time.perf_counter()
        for b in blobs:
            load(b)
        times[name] = time.perf_counter() - t
    base = (times["pickle.loads"] + times["pickle.loads (again)"]) / 2
    print(f"{len(blobs)} entries, {sum(map(len, blobs)) / 1e6:.1f} MB unpickled")
    for name, secs in times.items():
        print(f"  {name:22} {secs * 1000:8.1f} ms  ratio {secs / base:.2f}")


if __name__ == "__main__":
    main()
