"""Benchmark: ``kvflowmap trace`` over a generated vLLM 0.33.0 + PegaFlow
0.25.1 log, beside ``grep -c`` over the same file (the floor: reading the
bytes and finding the lines), measured side by side in one run.

    python bench/bench_trace.py                 # a 200 MB log
    python bench/bench_trace.py --size-mb 1024  # the issue's 1 GB
    # beside another version of kvflowmap on the same logs (before/after):
    git archive HEAD~3 src | tar -x -C /tmp/before
    python bench/bench_trace.py --baseline /tmp/before/src

The log is written from the real logging calls (``tests/trace_logs.py``:
mostly loads that finish, some preempted, aborted, failed, sending). Each
trace runs in its own process, on one core; its peak memory is that
process's max RSS beyond what it had before reading the log (the code index
and the interpreter: its peak reset once they are loaded, on Linux), at a
quarter of the log and at all of it: flat memory means the two agree.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _code_index(cache: Path):
    from kvflowmap.api import Request, analyse
    from kvflowmap.sources.fetch import fetch_release
    from kvflowmap.trace.code import build_code_index

    vllm = fetch_release("vllm==0.33.0", cache)
    peg = fetch_release("pegaflow-llm==0.25.1", cache)
    a = analyse(Request(sources=[str(peg / "pegaflow")], release_roots=[(vllm, "vllm 0.33.0")],
                        cache_dir=cache))
    return build_code_index(a)


def write_log(code, path: Path, size: int) -> int:
    """Write at least ``size`` bytes of generated log; the number of lines."""
    from kvflowmap.trace.generate import generate
    from tests.trace_logs import big_plan

    sample = sum(len(x) for x in generate(code, list(big_plan(90))))
    per_request = max(1, sample // 90)
    n = size // per_request + 1
    lines = 0
    with open(path, "w", encoding="utf-8") as f:
        batch = 20_000  # requests per generate() call: its heap stays small
        for start in range(0, n, batch):
            plan = [(f"b{start}-{rid}", life, t + start * 0.01)
                    for rid, life, t in big_plan(min(batch, n - start))]
            for line in generate(code, plan, seed=start):
                f.write(line)
                lines += 1
    return lines


def child(code_path: str, log: str) -> None:
    """Run one trace and print its numbers as JSON (the measured process)."""
    from kvflowmap.trace.run import trace

    with open(code_path, "rb") as f:
        code = pickle.load(f)  # noqa: S301 - our own file, written by the parent just now
    before, after = _rss_kb(), 0
    reset = _reset_peak()  # loading the code index may have peaked higher than the trace will
    t0, c0 = time.perf_counter(), time.process_time()
    report = trace(code, [log])
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    after = _peak_kb() if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    s = report["summary"]
    print(json.dumps({"seconds": dt, "cpu_seconds": cpu, "lines": s["lines"], "records": s["records"],
                      "requests": s["requests"], "matched": s["matched"],
                      "unparsed": s["unparsed_lines"], "rss_before_mb": before / 1024,
                      "peak_growth_mb": (after - before) / 1024}))


def _status_kb(field: str) -> int:
    """A ``VmRSS``/``VmHWM`` figure of /proc/self/status in kB (0 elsewhere)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _rss_kb() -> int:
    """The resident set now (kB): ru_maxrss where /proc is missing."""
    return _status_kb("VmRSS") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _peak_kb() -> int:
    return _status_kb("VmHWM")


def _reset_peak() -> bool:
    """Reset the peak resident set to the current one (Linux: ``5`` to
    /proc/self/clear_refs), so the trace's own peak is measured."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        return False
    return _peak_kb() > 0


def _run_child(code_path: str, log: str, src: str | None = None) -> dict:
    """One trace in a child process; ``src``: import kvflowmap from there."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if src:
        env["PYTHONPATH"] = os.pathsep.join([src, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    out = subprocess.run([sys.executable, __file__, "--child", code_path, log], check=True,
                         capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _grep(log: str) -> tuple[float, int]:
    t0 = time.perf_counter()
    out = subprocess.run(["grep", "-c", "pid=", log], capture_output=True, text=True, check=False)
    return time.perf_counter() - t0, int(out.stdout.strip() or 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=200.0, help="log size (default 200)")
    ap.add_argument("--keep", metavar="DIR", help="write the log and code index here and keep them")
    ap.add_argument("--baseline", metavar="SRC", help="also time the kvflowmap found in SRC (a src/ "
                    "folder of another version) on the same logs, each run beside this one's")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    from platformdirs import user_cache_dir

    cache = Path(os.environ.get("KVFLOWMAP_TEST_CACHE") or user_cache_dir("kvflowmap"))
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-trace-"))
    work.mkdir(parents=True, exist_ok=True)
    code = _code_index(cache)
    code_path = work / "code.pickle"
    code_path.write_bytes(pickle.dumps(code))
    size = int(args.size_mb * 1024 * 1024)
    full, quarter = work / "full.log", work / "quarter.log"
    t0 = time.perf_counter()
    n_full = write_log(code, full, size)
    n_quarter = write_log(code, quarter, size // 4)
    gen = time.perf_counter() - t0
    print(f"generated {full.stat().st_size / 2**20:.0f} MB ({n_full:,} lines) and "
          f"{quarter.stat().st_size / 2**20:.0f} MB ({n_quarter:,} lines) in {gen:.0f}s")
    rows = []
    for log in (quarter, full):
        g_s, g_n = _grep(str(log))
        # the baseline right before this version, so both meet the same load
        if args.baseline:
            rows.append(("baseline", log, g_s, g_n, _run_child(str(code_path), str(log), args.baseline)))
        rows.append(("this", log, g_s, g_n, _run_child(str(code_path), str(log))))
    # wall time and CPU time: on a shared machine the CPU time is the steadier figure
    print(f"{'version':>8} {'log':>8} {'lines':>11} {'grep -c s':>9} {'grep l/s':>11} {'trace s':>8} "
          f"{'trace l/s':>10} {'cpu s':>6} {'l/cpu s':>9} {'x grep':>7} {'peak +MB':>8} "
          f"{'requests':>9} {'unknown':>7}")
    for version, log, g_s, g_n, r in rows:
        print(f"{version:>8} {log.stat().st_size / 2**20:>6.0f}MB {r['lines']:>11,} {g_s:>9.2f} "
              f"{g_n / g_s:>11,.0f} {r['seconds']:>8.1f} {r['lines'] / r['seconds']:>10,.0f} "
              f"{r['cpu_seconds']:>6.1f} {r['lines'] / r['cpu_seconds']:>9,.0f} "
              f"{r['seconds'] / g_s:>7.1f} {r['peak_growth_mb']:>8.0f} {r['requests']:>9,} "
              f"{r['matched']['unknown']:>7}")
    by = {(version, log): r for version, log, _, _, r in rows}
    if args.baseline:
        for log in (quarter, full):
            base, this = by[("baseline", log)], by[("this", log)]
            print(f"{log.stat().st_size / 2**20:.0f} MB: this version {base['seconds'] / this['seconds']:.2f}x "
                  f"the baseline's speed by wall time, {base['cpu_seconds'] / this['cpu_seconds']:.2f}x "
                  f"by CPU time; peak growth {this['peak_growth_mb']:.0f} MB "
                  f"(baseline {base['peak_growth_mb']:.0f} MB)")
    q, f = by[("this", quarter)], by[("this", full)]
    print(f"this version, a quarter of the log beside all of it: peak growth {q['peak_growth_mb']:.0f} MB "
          f"and {f['peak_growth_mb']:.0f} MB (flat memory means they agree), "
          f"{q['lines'] / q['cpu_seconds']:,.0f} and {f['lines'] / f['cpu_seconds']:,.0f} lines per CPU second")
    if not args.keep:
        for p in (full, quarter, code_path):
            p.unlink()
        work.rmdir()


if __name__ == "__main__":
    main()
