"""SIGTERM ends the run with 143 and leaves no pool worker behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

BODY = "\n".join(f"def f{i}(x):\n    return [x + {i} for _ in range(3)]\n" for i in range(300))


def _workers(marker: str) -> list[int]:
    """Pids of live processes whose command line names ``marker``."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if marker in (d / "cmdline").read_bytes().decode(errors="replace"):
                out.append(int(d.name))
        except OSError:
            continue
    return out


@pytest.mark.skipif(not Path("/proc").is_dir() or (os.cpu_count() or 1) < 2,
                    reason="needs /proc and a worker pool")
def test_sigterm_exits_143_and_kills_the_pool(tmp_path: Path) -> None:
    src = tmp_path / "bigpkg"
    src.mkdir()
    (src / "__init__.py").write_text("")
    for i in range(400):
        (src / f"m{i}.py").write_text(BODY)
    cache = tmp_path / "cache-marker-sigterm"
    log = tmp_path / "stderr.txt"  # a file, not a pipe: orphans would hold a pipe open
    with log.open("wb") as err_file:
        proc = subprocess.Popen([sys.executable, "-m", "kvflowmap", "graph", str(src),
                                 "--format", "json", "--cache-dir", str(cache)],
                                stdout=subprocess.DEVNULL, stderr=err_file)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(_workers(str(cache))) < 2:
        time.sleep(0.05)  # the main process and at least one worker
    assert proc.poll() is None, "the run ended before its pool started"
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=60)
    # a worker being killed may take a moment on a loaded machine; an orphan
    # (blocked on a pipe, parent 1) never goes away
    gone_by = time.monotonic() + 15
    while _workers(str(cache)) and time.monotonic() < gone_by:
        time.sleep(0.1)
    left = _workers(str(cache))
    for pid in left:  # do not leave them to the next test either
        os.kill(pid, signal.SIGKILL)
    assert rc == 143, log.read_text(errors="replace")
    assert left == [], "pool workers outlived the run"


def _handlers() -> tuple[object, object]:
    return signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)


def _raise_terminated(signum, frame) -> None:
    raise RuntimeError("the parent's handler")


def test_pool_workers_do_not_inherit_the_parents_sigterm_handler(tmp_path: Path) -> None:
    # A worker that inherits the CLI's raising handler catches the exception
    # around its job and lives on, blocked on the queue, after the parent died.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from kvflowmap.index.cache import FactCache
    from kvflowmap.index.runner import _start_worker

    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"),
                                 initializer=_start_worker,
                                 initargs=(FactCache(tmp_path),)) as pool:
            term, intr = pool.submit(_handlers).result(timeout=60)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert term == signal.SIG_DFL and intr == signal.SIG_IGN
