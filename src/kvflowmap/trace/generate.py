"""Logs written as vLLM's formatter writes them, from the logging calls of
the analysed code (never from strings copied into this project), for
several interleaved processes and request lifecycles. Tests and the bench
drive it; ``Lifecycle`` steps name code (a function and which of its logging
calls), so the text always comes from the release analysed.

Line format (vLLM's ``_FORMAT``, ``NewLineFormatter``): an optional prefix,
``(PROCESS pid=N) LEVEL MM-DD HH:MM:SS [file.py:LINE] message``, and a
multi-line message repeats that header after ``\\r\\n`` on each line. At
DEBUG level vLLM's own files show their shortened relative path.
"""

from __future__ import annotations

import heapq
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass

from kvflowmap.trace.code import CodeIndex, Marker
from kvflowmap.trace.formats import conversions, printf_style

_COLOURS = {"DEBUG": "\033[37m", "INFO": "\033[32m", "WARNING": "\033[33m", "ERROR": "\033[31m",
            "CRITICAL": "\033[35m"}


@dataclass(frozen=True)
class Step:
    """One logging call a request passes: the function (a suffix of its full
    name), which of its logging calls (0: the first by line), the process
    kind (``scheduler``, ``worker``: every worker rank logs it) and the
    seconds after the previous step."""

    function: str
    nth: int = 0
    process: str = "scheduler"
    delay: float = 0.05
    traceback: bool = False  # a logger.exception: the traceback follows
    # placeholders that hold a list of request ids (``reqs=%s``) although
    # the argument's name does not say so: the request's id goes there as ``['id']``
    id_lists: tuple[int, ...] = ()


@dataclass(frozen=True)
class Lifecycle:
    """A named sequence of steps and the outcome the trace should find."""

    name: str
    steps: tuple[Step, ...]
    outcome: str
    problems: tuple[str, ...] = ()


class Formatter:
    """vLLM's line format for the markers of a ``CodeIndex``."""

    def __init__(self, code: CodeIndex, prefix: str = "", colour: bool = False,
                 debug_paths: bool = True, line_offset: int = 0, style: str = "vllm") -> None:
        # style: "vllm" (the text format), "json" (VLLM_LOGGING_CONFIG_PATH with
        # vLLM's JSON_FORMAT fields) or "basic" (logging.basicConfig's LEVEL:name:message)
        self.style = style
        self.code = code
        self.prefix = prefix
        self.colour = colour
        self.debug_paths = debug_paths
        # another release of the same code: every call a few lines further down
        self.line_offset = line_offset

    def fileinfo(self, m: Marker) -> str:
        """``[fileinfo:...]``: the base name, or at DEBUG level vLLM's
        ``shrink_path`` of a file inside vLLM."""
        parts = m.file.split("/")
        if not self.debug_paths or parts[0] != "vllm":
            return parts[-1]
        parts = parts[1:]
        new: list[str] = []
        if parts and parts[0] == "v1":
            new, parts = parts[:2], parts[2:]
        elif parts:
            new, parts = parts[:1], parts[1:]
        new += ["...", *parts[-2:]] if len(parts) > 2 else parts
        return "/".join(new)

    def line(self, m: Marker, process: str, pid: int, ts: str, message: str) -> str:
        """The text vLLM writes for one record (newline-terminated)."""
        if self.style == "json":
            return json.dumps({"asctime": f"2026-{ts},000", "levelname": m.level, "name": m.module,
                               "processName": process, "process": pid, "message": message}) + "\n"
        if self.style == "basic":
            return f"{m.level}:{m.module}:{message}\n"
        level = m.level
        head = f"({process} pid={pid})"
        where = f"[{self.fileinfo(m)}:{m.line + self.line_offset}]"
        if self.colour:
            head = f"\033[0;36m{head}\033[0;0m"
            level = f"{_COLOURS.get(level, '')}{level}\033[0m"
            ts_text = f"\033[90m{ts}\033[0m"
            where = f"\033[90m{where}\033[0m"
        else:
            ts_text = ts
        header = f"{self.prefix}{head} {level} {ts_text} {where} "
        return header + message.replace("\n", "\r\n" + header) + "\n"


def render_message(m: Marker, ids: dict[str, str], rng: random.Random,
                   id_lists: tuple[int, ...] = ()) -> str:
    """``m``'s message with values: the request id for its id arguments, a
    remote id for related ones, numbers of the right kind elsewhere."""
    rid, remote = ids["request"], ids["remote"]
    if printf_style(m.message) and m.nargs != 0:
        args: list[object] = []
        for i, conv in enumerate(c for c in conversions(m.message) if c != "%"):
            if i in id_lists:
                args.append([rid])
            elif i in m.id_args:
                args.append(rid)
            elif i in m.related_args:
                args.append(remote)
            elif conv in "diouxXc":
                args.append(rng.randint(0, 64) if conv != "c" else "x")
            elif conv in "eEfFgG":
                args.append(rng.random() * 100)
            else:
                args.append(f"v{rng.randint(0, 999)}")
        try:
            return m.message % tuple(args)
        except (TypeError, ValueError, KeyError):
            return m.message
    if "{}" in m.message:
        return m.message.replace("{}", rid, 1).replace("{}", "7")
    return m.message


def find_marker(code: CodeIndex, function: str, nth: int) -> Marker:
    """The ``nth`` logging call (by line) of the function whose full name
    ends with ``function``; KeyError naming it when the code has none."""
    found = sorted((m for m in code.markers
                    if m.function == function or m.function.endswith("." + function)),
                   key=lambda m: (m.function, m.line))
    fns = sorted({m.function for m in found})
    if not found or nth >= len([m for m in found if m.function == fns[0]]):
        raise KeyError(f"no logging call #{nth} in a function named {function}")
    return [m for m in found if m.function == fns[0]][nth]


@dataclass(frozen=True)
class Process:
    """One process writing to the log."""

    name: str
    pid: int
    kind: str  # scheduler or worker


def default_processes(ranks: int = 2, base_pid: int = 4100) -> list[Process]:
    """vLLM's engine core (the scheduler) and ``ranks`` workers."""
    return [Process("EngineCore_DP0", base_pid, "scheduler"),
            *(Process(f"Worker_TP{r}", base_pid + 1 + r, "worker") for r in range(ranks))]


_TRACEBACK = ("Traceback (most recent call last):\n"
              '  File "/opt/venv/lib/python3.12/site-packages/worker.py", line 12, in run\n'
              "    raise RuntimeError(\"transfer failed\")\n"
              "RuntimeError: transfer failed")


def generate(code: CodeIndex, plan: list[tuple[str, Lifecycle, float]],
             processes: list[Process] | None = None, formatter: Formatter | None = None,
             seed: int = 0, start: float = 0.0) -> Iterator[str]:
    """The lines of a log: ``plan`` is (request id, lifecycle, start second)
    for each request; their steps interleave by time across processes."""
    rng = random.Random(seed)
    procs = processes or default_processes()
    fmt = formatter or Formatter(code)
    cache: dict[tuple[str, int], Marker] = {}
    heap: list[tuple[float, int, str, int, Lifecycle, dict[str, str]]] = []
    for n, (rid, life, t0) in enumerate(plan):
        ids = {"request": rid, "remote": f"remote-{rid}"}
        heapq.heappush(heap, (t0, n, rid, 0, life, ids))
    order = len(plan)
    while heap:
        t, _, rid, i, life, ids = heapq.heappop(heap)
        step = life.steps[i]
        key = (step.function, step.nth)
        m = cache.get(key)
        if m is None:
            m = cache[key] = find_marker(code, step.function, step.nth)
        ts = _ts(start + t)
        for p in procs:
            if p.kind != step.process:
                continue
            msg = render_message(m, ids, rng, step.id_lists)
            if step.traceback:
                msg += "\n" + _TRACEBACK
            yield fmt.line(m, p.name, p.pid, ts, msg)
        if i + 1 < len(life.steps):
            order += 1
            heapq.heappush(heap, (t + life.steps[i + 1].delay, order, rid, i + 1, life, ids))


def _ts(t: float) -> str:
    """Seconds from 12-02 00:00:00 as ``MM-DD HH:MM:SS``."""
    s = int(t)
    day, s = divmod(s, 86400)
    return f"12-{2 + day:02d} {s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"
