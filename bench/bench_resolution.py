"""Benchmark: how much of a connector's call sites the call graph resolves,
why the rest is not, and how many external names are impossible.

    python bench/bench_resolution.py                    # pegaflow-llm 0.25.1
    python bench/bench_resolution.py --codebase lmcache --sample 400 --seed 7
    python bench/bench_resolution.py --under pegaflow/connector/ --sample 100000  # all of them

Call sites are sampled (seeded) from the subject's functions. A site is
*resolved* when the call graph has an edge of kind ``call`` from its function
at its line; otherwise its cause is one of: ``builtin-or-external`` (the
callee is outside the analysis and named), ``untyped-receiver`` (a method on
a value whose type is unknown), ``dynamic`` (no dotted callee: a call of a
call's result, a subscript), ``other``. An external node's name is
*impossible* when it continues two or more parts after an analysed class or a
well-known external base class (``abc.ABC.requests.get``): a data attribute
of a type nobody knows, named as if it were an API.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from pathlib import Path

from kvflowmap.api import Request, analyse
from kvflowmap.sources.fetch import fetch_release

BASES = ("abc.ABC", "typing.Generic", "typing.Protocol", "threading.Thread", "object",
         "enum.Enum", "torch.nn.Module")
CODEBASES = {
    "pegaflow": ("pegaflow-llm==0.25.1", "pegaflow", "vllm==0.33.0"),
    "lmcache": ("lmcache==0.5.6", "lmcache/integration/vllm", "vllm==0.33.0"),
    "vllm-0.33": ("vllm==0.33.0", "vllm/distributed/kv_transfer/kv_connector/v1", None),
    "vllm-ascend": ("vllm-ascend==0.23.0", "vllm_ascend/distributed", "vllm==0.33.0"),
}


def release_cache() -> Path:
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("kvflowmap"))


def impossible(g, is_class) -> list[str]:
    """External node names that continue 2+ parts after a class (see above)."""
    out = []
    for n, d in g.nodes(data=True):
        if d.get("kind") != "external":
            continue
        parts = n.split(".")
        for i in range(len(parts) - 1, 0, -1):
            prefix = ".".join(parts[:i])
            if is_class(prefix) or prefix in BASES:
                if len(parts) - i >= 2:
                    out.append(n)
                break
    return sorted(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--codebase", choices=sorted(CODEBASES), default="pegaflow")
    ap.add_argument("--sample", type=int, default=300, help="call sites sampled")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--under", default="", metavar="PREFIX",
                    help="only call sites in files whose path (relative to the root) starts "
                         "with PREFIX, e.g. pegaflow/connector/")
    args = ap.parse_args()
    spec, sub, context = CODEBASES[args.codebase]
    root = fetch_release(spec, release_cache())
    ctx_root = fetch_release(context, release_cache()) if context else root
    label = (context or spec).replace("==", " ")
    a = analyse(Request(sources=[str(root / sub)], release_roots=[(ctx_root, label)]))
    g, model = a.graph, a.linker.model
    sites = []
    for module, ff in sorted(model.facts.items()):
        sf = model.source(module)
        if sf is None or not sf.subject or not sf.rel.startswith(args.under):
            continue
        sites += [(module, c) for c in ff.calls if c.scope]
    rng = random.Random(args.seed)
    sample = rng.sample(sites, min(args.sample, len(sites)))
    causes: Counter[str] = Counter()
    unresolved: list[tuple[str, str, int, str]] = []
    for module, c in sample:
        fn = f"{module}.{c.scope}"
        lines = {int(d.get("line") or 0) for _, _, d in g.out_edges(fn, data=True)
                 if d.get("kind") == "call"} if fn in g else set()
        if c.line in lines:
            causes["resolved"] += 1
            continue
        callee = c.callee or ""
        targets = a.linker.calls.resolve((module, c.scope), c)
        if not callee:
            why = "dynamic"
        elif targets and all(t.external for t in targets):
            why = "builtin-or-external"
        elif "." in callee and not targets:
            why = "untyped-receiver"
        else:
            why = "other"
        causes[why] += 1
        unresolved.append((why, model.source(module).rel, c.line, callee or "<dynamic>"))
    total = len(sample)
    print(f"{args.codebase}: {total} of {len(sites)} subject call sites sampled (seed {args.seed})")
    for why, n in causes.most_common():
        print(f"  {why:<22} {n:>5}  {n / total:6.1%}")
    bad = impossible(g, a.linker.classes.is_class)
    print(f"impossible external names: {len(bad)}")
    for name in bad[:20]:
        print(f"  {name}")
    print("unresolved sites (subject files first, by cause):")
    for why, file, line, callee in sorted(unresolved)[:60]:
        print(f"  {why:<22} {file}:{line}  {callee}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
