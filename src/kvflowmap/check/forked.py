"""Run groups of rules in forked processes (Linux and macOS), one group here.

A forked child shares the linked analysis copy-on-write, so nothing is sent
to it; it sends back only its findings, as plain data over a pipe
(``index.plain_codec``, as the run memo stores them: nothing in the process
unpickles). A child that fails in any way (a result that is not plain data
too) costs nothing but time: its group is run here instead.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

from kvflowmap.index import plain_codec

G = TypeVar("G")
R = TypeVar("R")


def can_fork() -> bool:
    """Whether groups can run in forked children: a platform with ``fork``,
    more than one core, and no other thread in this process (a fork copies
    whatever locks other threads hold, so a library caller with threads gets
    the rules run one after the other)."""
    return hasattr(os, "fork") and (os.cpu_count() or 1) > 1 and threading.active_count() == 1


def run_groups(groups: Sequence[G], run: Callable[[G], R]) -> list[R]:
    """``[run(g) for g in groups]``, every group but the first in a child."""
    children: list[tuple[int, int]] = []  # (pid, read end)
    for group in groups[1:]:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: run, send, leave without cleanup
            os.close(read)
            code = 0
            try:
                data = plain_codec.encode(run(group))
                with os.fdopen(write, "wb") as out:
                    out.write(data)
            except BaseException:
                code = 1
            os._exit(code)
        os.close(write)
        children.append((pid, read))
    results: list[R] = [run(groups[0])] if groups else []
    for group, (pid, read) in zip(groups[1:], children, strict=True):
        with os.fdopen(read, "rb") as inp:
            data = inp.read()
        _, status = os.waitpid(pid, 0)
        try:
            ok = os.waitstatus_to_exitcode(status) == 0 and data
            results.append(plain_codec.decode(data) if ok else run(group))
        except Exception:  # a truncated message: do it here
            results.append(run(group))
    return results
