"""Side-by-side cost of the fact-cache format (``index/facts_codec``, msgpack
rows rebuilt by position) against ``pickle.loads`` of the same facts, on the
entries of a real cache folder: decoding (every warm or partly warm run),
encoding (every worker) and size. Prints the ratios; the msgpack loader
builds no object an entry names, so it may cost a little more than pickle."""

from __future__ import annotations

import argparse
import lzma
import pickle
import time
from pathlib import Path

from platformdirs import user_cache_dir

from kvflowmap.index import facts_codec
from kvflowmap.index.cache import HEADER


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cache", default=str(Path(user_cache_dir("kvflowmap")) / "facts"))
    ap.add_argument("--limit", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    facts = []
    for p in sorted(Path(args.cache).rglob("*.msgpack"))[: args.limit]:
        data = p.read_bytes()
        if data.startswith(HEADER):
            facts.append(facts_codec.decode(lzma.decompress(data[len(HEADER):])))
    if not facts:
        raise SystemExit(f"no current fact-cache entries under {args.cache}: run a check first")
    rows = [facts_codec.encode(f) for f in facts]
    pickles = [pickle.dumps(f, protocol=pickle.HIGHEST_PROTOCOL) for f in facts]
    best: dict[str, float] = {}
    for _ in range(args.rounds):  # interleaved, best of each: load on the machine is shared
        for name, run in (("pickle.loads", lambda: [pickle.loads(b) for b in pickles]),
                          ("facts_codec.decode", lambda: [facts_codec.decode(b) for b in rows]),
                          ("pickle.dumps", lambda: [pickle.dumps(f, protocol=5) for f in facts]),
                          ("facts_codec.encode", lambda: [facts_codec.encode(f) for f in facts])):
            t = time.perf_counter()
            run()
            best[name] = min(best.get(name, float("inf")), time.perf_counter() - t)
    print(f"{len(facts)} entries")
    for name, secs in best.items():
        print(f"  {name:20} {secs:6.2f} s")
    print(f"decode / pickle.loads: {best['facts_codec.decode'] / best['pickle.loads']:.2f}x")
    print(f"encode / pickle.dumps: {best['facts_codec.encode'] / best['pickle.dumps']:.2f}x")
    print(f"size: msgpack {sum(map(len, rows)) / 1e6:.1f} MB, pickle "
          f"{sum(map(len, pickles)) / 1e6:.1f} MB (before xz)")


if __name__ == "__main__":
    main()
