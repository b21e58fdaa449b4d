"""Cold against warm ``kvflowmap compat`` for PegaFlow over six vLLM releases.

Cold: an empty surface and fact cache (the downloaded releases are shared
with the user cache through a symlink, so the network is not timed: a
release is fetched once, ~8 s each here); every surface is extracted from
the ~25 modules it needs. Warm: the same command again, surfaces read from
``cache/compat/*.json`` and the connector's facts from the fact cache. Each
run is a fresh process (``kvflowmap compat ...``), the range resolved
through the package index each time (``pip index versions``, ~1 s of each run).
Target: warm at most 5 s."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from platformdirs import user_cache_dir


def _timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cache", default=user_cache_dir("kvflowmap"),
                    help="the cache holding the releases (fetched there on first use)")
    ap.add_argument("--vllm", default="0.28.0..0.33.0")
    ap.add_argument("--connector", default="pegaflow-llm==0.25.1")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    kvf = [sys.executable, "-m", "kvflowmap"]
    out = subprocess.run([*kvf, "fetch", args.connector, "--cache-dir", args.cache],
                         check=True, capture_output=True, text=True).stdout
    src = Path(out.split("\t")[1].strip()) / args.connector.split("==")[0].split("-")[0]
    shared = {**os.environ, "KVFLOWMAP_CACHE_DIR": args.cache}
    _timed([*kvf, "compat", str(src), "--vllm", args.vllm], shared)  # fetch what is missing
    cold: list[float] = []
    warm: list[float] = []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "releases").symlink_to(Path(args.cache) / "releases")
            env = {**os.environ, "KVFLOWMAP_CACHE_DIR": tmp}
            cmd = [*kvf, "compat", str(src), "--vllm", args.vllm]
            cold.append(_timed(cmd, env))
            warm.append(_timed(cmd, env))
    print(f"kvflowmap compat {src.name} --vllm {args.vllm} (best of {args.rounds})")
    print(f"{'cold':>8} {'warm':>8}")
    print(f"{min(cold):7.2f}s {min(warm):7.2f}s")
    if min(warm) > 5.0:
        raise SystemExit("warm run over the 5 s target")


if __name__ == "__main__":
    main()
