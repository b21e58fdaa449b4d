"""Damaged input never crashes or hangs the indexer; the cache survives concurrency."""

from __future__ import annotations

import os
import random
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvflowmap.api import Request, analyse
from kvflowmap.index import parse
from kvflowmap.index.parse import facts_from_bytes

try:
    import hypothesmith
except ImportError:  # pragma: no cover - listed in the test extras
    hypothesmith = None


@pytest.mark.skipif(hypothesmith is None, reason="hypothesmith not installed")
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(source=hypothesmith.from_grammar() if hypothesmith else st.just(""))
def test_generated_programs_never_raise(source: str) -> None:
    ff = facts_from_bytes("gen.py", source.encode("utf-8", "surrogatepass"))
    assert ff.problem is None or ff.problem.reason


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=400))
def test_random_bytes_never_raise(data: bytes) -> None:
    facts_from_bytes("noise.py", data)


def test_truncated_real_shapes() -> None:
    src = Path(__file__).parent.joinpath(
        "fixtures/minivllm/miniflow/connector/__init__.py").read_bytes()
    rng = random.Random(7)
    for cut in sorted(rng.sample(range(1, len(src)), 25)):
        facts_from_bytes("cut.py", src[:cut])


def test_deep_nesting_is_a_warning() -> None:
    deep = "x = " + "(" * 10_000 + "1" + ")" * 10_000 + "\n"
    ff = facts_from_bytes("deep.py", deep.encode())
    assert ff.problem is not None


def test_huge_file_is_skipped_with_a_reason() -> None:
    data = b"x = 1\n" * (50 * 1024 * 1024 // 6)
    ff = facts_from_bytes("huge.py", data)
    assert ff.problem is not None and "too large" in ff.problem.reason


def test_time_budget(monkeypatch) -> None:
    monkeypatch.setattr(parse, "TIME_BUDGET", 0.01)
    body = "".join(f"def f{i}(a, b):\n    return g(a)[b].c(d, e=f)\n" for i in range(3000))
    ff = facts_from_bytes("slow.py", body.encode())
    assert ff.problem is not None and "longer than" in ff.problem.reason


def test_file_deleted_between_listing_and_reading(tree, monkeypatch) -> None:
    root = tree({"pkg/__init__.py": "", "pkg/a.py": "def f():\n    pass\n",
                 "pkg/gone.py": "def g():\n    pass\n"})
    from kvflowmap import api

    real = api.build_table

    def list_then_delete(roots):
        table = real(roots)
        (root / "pkg/gone.py").unlink(missing_ok=True)
        return table

    monkeypatch.setattr(api, "build_table", list_then_delete)
    a = analyse(Request(sources=[str(root)]))
    assert "pkg.a.f" in a.graph
    assert any("gone.py" in w and "cannot read" in w for w in a.warnings)


def test_two_runs_sharing_a_cache(tree, tmp_path: Path) -> None:
    root = tree({f"pkg/m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(30)}
                | {"pkg/__init__.py": ""})
    cache = tmp_path / "shared"
    results: list = []

    def run() -> None:
        results.append(analyse(Request(sources=[str(root)], cache_dir=cache, jobs=1)))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 2
    third = analyse(Request(sources=[str(root)], cache_dir=cache))
    assert third.stats.parsed == 0 and third.stats.cached == 31
    assert not list(cache.rglob(".tmp-*"))


def test_foreign_version_cache_is_ignored(tree, tmp_path: Path, monkeypatch) -> None:
    root = tree({"pkg/__init__.py": "", "pkg/a.py": "def f():\n    pass\n"})
    cache = tmp_path / "c"
    analyse(Request(sources=[str(root)], cache_dir=cache))
    from kvflowmap.index import cache as cache_mod

    monkeypatch.setattr(cache_mod, "HEADER", b"kvflowmap-facts 9.9.9 99\n")
    again = analyse(Request(sources=[str(root)], cache_dir=cache))
    assert again.stats.parsed == 2


def test_never_writes_outside_cache_and_out(tree, tmp_path: Path, monkeypatch) -> None:
    """A run writes its output and its cache, nothing else: not into the
    analysed tree, not into the working directory, not into HOME or TMPDIR."""
    root = tree({"pkg/__init__.py": "", "pkg/a.py": "def f():\n    pass\n"})
    cache = tmp_path / "cache"
    elsewhere = {name: tmp_path / name for name in ("cwd", "home", "tmp")}
    for d in elsewhere.values():
        d.mkdir()
    monkeypatch.setenv("KVFLOWMAP_CACHE_DIR", str(cache))
    monkeypatch.setenv("HOME", str(elsewhere["home"]))
    monkeypatch.setenv("TMPDIR", str(elsewhere["tmp"]))
    monkeypatch.chdir(elsewhere["cwd"])

    def snapshot(d: Path) -> dict[Path, tuple[float, int]]:
        return {p: (p.stat().st_mtime, p.stat().st_size) for p in d.rglob("*")}

    before = snapshot(root)
    from kvflowmap.cli import main

    out = tmp_path / "o.json"
    assert main(["graph", str(root), "--format", "json", "--out", str(out), "-q"]) == 0
    assert snapshot(root) == before
    for name, d in elsewhere.items():
        assert not list(d.rglob("*")), f"wrote into {name}: {sorted(d.rglob('*'))}"
    assert out.exists() and any(cache.rglob("*")), "the output and the cache are written"
    written = {p for p in tmp_path.rglob("*") if p.is_file()} - set(before)
    assert all(p == out or cache in p.parents for p in written), sorted(written)


def _package_with_a_crash(pkg: Path, modules: int) -> Path:
    """``modules`` plain modules and ``deep.py``, whose nesting kills LibCST's
    native parser (and the pool worker parsing it unscreened)."""
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for i in range(modules):
        (pkg / f"m{i}.py").write_text(f"def f{i}():\n    return {i}\n")
    (pkg / "deep.py").write_text("x = " + "(" * 5_000 + "1" + ")" * 5_000 + "\n")
    return pkg


def test_a_crashing_worker_costs_a_warning_not_the_run(tmp_path) -> None:
    """Pool workers parse unscreened; nesting that kills LibCST's native parser
    kills a worker, and the runner redoes the rest screened."""
    from kvflowmap.index.cache import FactCache
    from kvflowmap.index.runner import IndexStats, index_files
    from kvflowmap.sources.roots import ModuleTable, Root, list_files

    _package_with_a_crash(tmp_path / "pkg", 12)
    root = Root(tmp_path, "t", subject=True)
    files = list_files(root, ModuleTable())
    facts = index_files(files, FactCache(tmp_path / "cache"), IndexStats(), jobs=2)
    assert facts["pkg.deep"].problem is not None
    assert "nest" in facts["pkg.deep"].problem.reason
    assert all(facts[f"pkg.m{i}"].problem is None for i in range(12))
    assert [f.qualname for f in facts["pkg.m3"].functions] == ["f3"]


def test_an_unreadable_sub_package_is_a_warning(tree, tmp_path: Path, monkeypatch) -> None:
    """A folder that cannot be listed is named in the analysis' problems (and
    so in JSON/SARIF reports), not silently left out; the rest is analysed."""
    root = tree({"pkg/__init__.py": "", "pkg/a.py": "def f():\n    pass\n",
                 "pkg/sub/__init__.py": "", "pkg/sub/b.py": "def g():\n    pass\n"})
    locked = root / "pkg" / "sub"
    real_scandir = os.scandir

    def scandir(path=None):  # root can read anything: refuse this one folder instead
        if path is not None and Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path) if path is not None else real_scandir()

    monkeypatch.setattr(os, "scandir", scandir)
    a = analyse(Request(sources=[str(root)], cache_dir=tmp_path / "cache"))
    hits = [p for p in a.problems if p.file == str(locked)]
    assert hits and "not readable" in hits[0].message and "Permission denied" in hits[0].message
    defs = a.linker.model.defs
    assert "pkg.a.f" in defs and "pkg.sub.b.g" not in defs


def test_a_crashing_worker_prints_no_crash_trace(tmp_path) -> None:
    """The worker crash above is expected and recovered from: with faulthandler
    on in the parent (as pytest has it), no "Fatal Python error" trace reaches
    stderr, only the run's own warning."""
    import subprocess
    import sys

    pkg = _package_with_a_crash(tmp_path / "pkg", 4)
    proc = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-m", "kvflowmap", "graph", str(pkg), "-j", "2",
         "--format", "json", "--out", str(tmp_path / "g.json"),
         "--cache-dir", str(tmp_path / "cache")],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Fatal Python error" not in proc.stderr
    assert "deep.py" in proc.stderr  # the warning names the file
