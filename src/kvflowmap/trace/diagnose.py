"""What the protocol says about each story, and where a stuck request
likely stopped.

Problems (by the protocol's names, never one connector's):

- ``parked``: parked (its commit hook ran, or it reached a parked state)
  and no ``finished_recving`` (nor a failed receive or failed blocks) after;
- ``delayed_free``: it reached a save hook and no ``finished_sending`` after;
- ``failure_unreported``: a failure line and no failed-receive or
  failed-block report;
- ``finished_twice``: the same logging call in the same process reported it
  finished twice.

For a stuck request the functions that lead on from its last logged line
(the rest of that function, what it calls, what those call, the rest of its
caller) are ranked: a function with no logging call the log could show is a
silent path; one whose caller logs right after the call that never came, one
whose name says it waits, one run on a thread or executor rank higher.
Beside them, for the report the protocol still owes the request, the
connector's hooks that make it and what they run (``owed_reports``).
"""

from __future__ import annotations

import os

import functools
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from kvflowmap.trace.code import CodeIndex, Function, Marker
from kvflowmap.trace.story import Story, TraceStats, seconds

PARKED, DELAYED_FREE, FAILURE_UNREPORTED, FINISHED_TWICE = (
    "parked", "delayed_free", "failure_unreported", "finished_twice")
OUTCOMES = ("stuck", "failed", "aborted", "finished", "preempted", "open")
SEARCH_DEPTH = 4
_LEVEL_RANK = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}
# words of a function name that say it waits ("read" and "block" are in
# every KV connector's names, and say nothing of waiting there)
_WAITING_WORDS = ("wait", "poll", "join", "acquire", "sleep", "accept", "select")
_RECEIVING = ("recv", "receive")
_IGNORED_EXTERNAL = ("<builtin>.", "logging.", "time.", "typing.", "dataclasses.", "math.",
                     "collections.", "os.", "json.", "re.")


@dataclass
class Candidate:
    """A place a stuck request may have stopped."""

    function: str
    file: str
    root: str
    line: int
    score: float
    depth: int
    via: list[str]  # the functions from the last logged one to it
    reasons: list[str]


@dataclass
class Diagnosis:
    """One request's outcome, problems and (when stuck) candidates."""

    outcome: str
    problems: list[str] = field(default_factory=list)
    silent_for: float | None = None  # seconds from its last line to the end of its epoch
    candidates: list[Candidate] = field(default_factory=list)
    would_log: list[tuple[str, Marker]] = field(default_factory=list)  # (function, marker)
    # where the reports the protocol still owes it are made (``owed_reports``)
    owed: list[Candidate] = field(default_factory=list)


@functools.lru_cache(maxsize=16)  # asked for every story: once per code is enough
def _report_groups(kinds: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(what answers a parked request, what answers a sent one, the failure reports)."""
    recv = tuple(k for k in kinds if k == "finished_recving" or k.startswith("failed"))
    send = tuple(k for k in kinds if k == "finished_sending")
    return recv, send, tuple(k for k in kinds if k.startswith("failed"))


def problems_of(s: Story, code: CodeIndex) -> list[str]:
    """What the protocol says is wrong with a story so far."""
    recv, send, failure_reports = _report_groups(code.report_kinds)
    problems: list[str] = []
    # a request being sent (prefill side) also runs the commit hook: not parked
    if s.parked_at >= 0 and s.sending_at < 0 and not s.reported_after(recv, s.parked_at - 1):
        problems.append(PARKED)
    if s.sending_at >= 0 and send and not s.reported_after(send, s.sending_at - 1):
        problems.append(DELAYED_FREE)
    if s.failed_at >= 0 and not any(s.reports.get(k) for k in failure_reports):
        problems.append(FAILURE_UNREPORTED)
    if any(n > 1 for n in s.report_places.values()):
        problems.append(FINISHED_TWICE)
    return problems


def outcome_of(s: Story, code: CodeIndex, problems: list[str] | None = None) -> str:
    """stuck, failed, aborted, finished, preempted or open."""
    problems = problems_of(s, code) if problems is None else problems
    kinds = code.report_kinds
    finished = any(s.reports.get(k) for k in kinds if k.startswith("finished")) or any(
        st.startswith("FINISHED") for st in s.states)
    last_state = next(reversed(s.states), "") if s.states else ""
    if PARKED in problems or DELAYED_FREE in problems:
        return "stuck"
    if s.failed_at >= 0:
        return "failed"
    if s.aborted_at >= 0:
        return "aborted"
    if finished:
        return "finished"
    if last_state.startswith("PREEMPT"):
        return "preempted"
    return "open"


def diagnose(s: Story, code: CodeIndex, stats: TraceStats,
             callers: Callers | None = None) -> Diagnosis:
    """The diagnosis of one story (``callers``: ``callers_of(code)``, when
    many stories are diagnosed)."""
    problems = problems_of(s, code)
    outcome = outcome_of(s, code, problems)
    d = Diagnosis(outcome, problems)
    end = stats.end_ts.get(s.epoch)
    if end and s.last_ts:
        a, b = seconds(s.last_ts), seconds(end)
        if a is not None and b is not None:
            d.silent_for = max(0.0, b - a)
    if outcome == "stuck":
        d.candidates, d.would_log = rank_candidates(s, code, stats, callers=callers)
        d.owed = owed_reports(s, code, stats, _awaited(problems))
    return d


def _visible(m: Marker, lowest: int) -> bool:
    return _LEVEL_RANK.get(m.level, 20) >= lowest


def _waits(name: str) -> bool:
    words = [w for w in re.split(r"[^a-z]+", name.rpartition(".")[2].lower()) if w]
    # "result" alone (``get_transfer_results`` hands results over); "recv" and
    # "receive" only first (``recv_multipart`` waits, ``_send_pending_recv_notifs``
    # names the receiving side, as much of a KV connector does)
    return bool(words) and (words[0].startswith(_RECEIVING) or any(
        w.startswith(_WAITING_WORDS) or w == "result" for w in words))


Callers = dict[str, list[tuple[str, int]]]  # function -> [(caller, line of the call)]


def callers_of(code: CodeIndex) -> Callers:
    """Who calls each function, and where: worked out once per report."""
    out: Callers = {}
    for fn in code.functions.values():
        for callee, at, _kind in fn.calls:
            out.setdefault(callee, []).append((fn.name, at))
    return out


def _awaited(problems: list[str]) -> tuple[str, ...]:
    """The reports the protocol still owes a story with ``problems``."""
    return ((("finished_recving",) if PARKED in problems else ())
            + (("finished_sending",) if DELAYED_FREE in problems else ()))


def _lowest_level(stats: TraceStats) -> int:
    """The lowest level the log shows: a level it never shows (no DEBUG line
    at all) proves nothing."""
    shown = [_LEVEL_RANK[lv] for lv in stats.levels if lv in _LEVEL_RANK]
    return min(shown) if shown else 20


def _mine_only(s: Story, code: CodeIndex) -> Callable[[str, str], bool]:
    """Which call edges to follow for ``s``: a base class's call dispatched
    into the overrides only into a class the request logged from (NIXL's
    pull worker, not the push one)."""
    classes = {code.markers[e.marker].function.rpartition(".")[0]
               for e in s.events() if e.marker >= 0}
    return lambda callee, kind: kind != "dispatch" or callee.rpartition(".")[0] in classes


def owed_reports(s: Story, code: CodeIndex, stats: TraceStats, awaited: tuple[str, ...],
                 top: int = 4) -> list[Candidate]:
    """Where the reports the protocol still owes ``s`` (``awaited``:
    ``finished_recving`` for a parked request) would have been made: the
    connector's hooks that make them, as vLLM calls them (a hook no other
    such hook calls: the connector's facade), the hooks they hand on to (its
    worker's), then what those run, three calls deep, never into another
    class's override; the hooks first, then the silent functions. These ran
    for other requests, so what they log says nothing of this one: the
    question is which of their branches never picked it up."""
    seen = {e.marker for e in s.events()}
    lowest = _lowest_level(stats)
    mine = _mine_only(s, code)
    fns = code.functions
    out: dict[str, Candidate] = {}
    owed = _report_hooks(s, code, awaited)
    for report, hooks in owed:
        called = {c for h in hooks for c, _at, _k in fns[h].calls}
        todo = deque((h, 0, [h]) for h in hooks if h not in called)
        while todo:
            name, depth, via = todo.popleft()
            fn = fns.get(name)
            if fn is None or name in out:
                continue
            visible = [code.markers[i] for i in fn.logs if _visible(code.markers[i], lowest)]
            if any(m.id in seen for m in visible):
                continue  # it logged for this request: the report was on its way
            hook = name in hooks
            reasons = [f"makes {report}, which the protocol still owes this request" if hook
                       else f"{_short2(via[-2])} runs it on the way to {report}"]
            if not visible:
                reasons.append("no logging call on it the log would show: a silent path")
            score = (4.0 if hook else 2.0 if not visible else 1.0) - 0.25 * depth
            if not hook and name.rpartition(".")[0] == via[-2].rpartition(".")[0]:
                score += 0.5  # the hook's own class's work, before a shared utility
            out[name] = Candidate(name, fn.file, fn.root, fn.line, score, depth, via, reasons)
            if depth < 3:
                # calls only: a bridge (a carrier to vLLM's side) is the report made
                todo.extend((callee, depth + 1, [*via, callee]) for callee, _at, kind in fn.calls
                            if callee in fns and kind != "bridge" and mine(callee, kind))
    ranked = sorted(out.values(), key=lambda c: (-c.score, c.depth, c.function))
    hooks_met = {h for _, hooks in owed for h in hooks}
    # every hook, then the ``top`` likeliest of what they run
    return ([c for c in ranked if c.function in hooks_met]
            + [c for c in ranked if c.function not in hooks_met][:top])


def rank_candidates(s: Story, code: CodeIndex, stats: TraceStats, top: int = 3,
                    callers: Callers | None = None
                    ) -> tuple[list[Candidate], list[tuple[str, Marker]]]:
    """The top places ``s`` may have stopped after its last logged line, and
    the logging calls on the paths from there that never appeared for it."""
    if s.last_marker < 0:
        return [], []
    seen_markers = {e.marker for e in s.events()}
    lowest = _lowest_level(stats)
    fns = code.functions
    scores: dict[str, Candidate] = {}
    would: dict[int, str] = {}

    def logs_after(fn: Function, line: int) -> list[Marker]:
        return [code.markers[i] for i in fn.logs
                if code.markers[i].line > line and _visible(code.markers[i], lowest)]

    def consider(name: str, depth: int, via: list[str], parent: Function | None, call_line: int) -> None:
        fn = fns.get(name)
        if fn is None and name.startswith(_IGNORED_EXTERNAL):
            return
        visible = [code.markers[i] for i in fn.logs if _visible(code.markers[i], lowest)] if fn else []
        if any(m.id in seen_markers for m in visible):
            return  # the request passed through it: it logged there
        reasons: list[str] = []
        score = -0.5 * depth
        if not visible:
            score += 3
            reasons.append("no logging call on it the log would show: a silent path"
                           if fn is not None else "outside the analysed code (no logging call known)")
        else:
            for m in visible:
                would.setdefault(m.id, name)
        if parent is not None:
            nxt = [m for m in logs_after(parent, call_line) if m.id not in seen_markers]
            if nxt:
                score += 2
                said = " or ".join(f"{m.line} ({m.message[:50]!r})" for m in nxt[:2])
                reasons.append(f"{_short2(parent.name)} logs next at line {said} after calling it, "
                               "and that never came")
        if _waits(name):
            score += 1.5
            reasons.append("its name says it waits or polls")
        if fn is not None and fn.spawned:
            score += 1
            reasons.append("runs on a thread or executor: its caller does not wait for it")
        if fn is None:
            score -= 1  # no code to point at
        old = scores.get(name)
        if old is None or old.score < score:
            scores[name] = Candidate(name, fn.file if fn else "", fn.root if fn else "",
                                     fn.line if fn else 0, round(score, 2), depth, via, reasons)

    mine = _mine_only(s, code)
    for marker, line in _starts(s, code):
        start = fns.get(marker.function)
        if start is None:
            continue
        todo: deque[tuple[str, int, int, list[str]]] = deque()
        todo.append((start.name, line, 0, [start.name]))
        # the way back: the rest of each caller after its call
        for caller, at in (callers if callers is not None else callers_of(code)).get(start.name, ()):
            # via: from the logged function back into its caller, then onwards
            todo.append((caller, at, 1, [start.name, caller]))
        visited: set[tuple[str, int]] = set()
        while todo:
            name, after_line, depth, via = todo.popleft()
            if (name, after_line) in visited or depth > SEARCH_DEPTH:
                continue
            visited.add((name, after_line))
            fn = fns.get(name)
            if fn is None:
                continue
            for m in logs_after(fn, after_line):
                if m.id not in seen_markers:
                    would.setdefault(m.id, name)
            for callee, at, kind in fn.calls:
                if at < after_line or not mine(callee, kind):
                    continue
                consider(callee, depth + 1, [*via, callee], fn, at)
                if callee in fns and depth + 1 < SEARCH_DEPTH:
                    todo.append((callee, 0, depth + 1, [*via, callee]))
    ranked = sorted(scores.values(), key=lambda c: (-c.score, c.depth, c.function))
    would_log = [(fn, code.markers[i]) for i, fn in sorted(would.items(), key=lambda x: x[0])]
    return ranked[:top], would_log[:8]


def _report_hooks(s: Story, code: CodeIndex, awaited: tuple[str, ...]
                  ) -> list[tuple[str, set[str]]]:
    """``(report, functions)``: for each awaited report, the analysed hooks
    that make it, of the connector the story ran in: those whose names share
    the most leading parts with a connector function it logged from (the
    NIXL worker's ``get_transfer_results`` next to its ``start_load_kv``,
    not another connector's)."""
    subject = {r.get("label") for r in code.roots if r.get("subject")}
    logged = {code.markers[e.marker].function for e in s.events() if e.marker >= 0}
    mine = [f.split(".") for f in logged
            if (fn := code.functions.get(f)) is not None and fn.root in subject]
    out: list[tuple[str, set[str]]] = []
    for report in awaited:
        hooks = set(code.report_hooks.get(report, ()))
        found = [f for f in sorted(code.functions) if code.functions[f].hook in hooks
                 and code.functions[f].root in subject]
        near = {f: max((_common(f.split("."), m) for m in mine), default=0) for f in found}
        best = max(near.values(), default=0)
        if best:
            out.append((report, {f for f in found if near[f] == best}))
    return out


def _common(a: list[str], b: list[str]) -> int:
    return len(os.path.commonprefix([a, b]))


def _starts(s: Story, code: CodeIndex) -> list[tuple[Marker, int]]:
    """Where to search from: the last line of each process the request was
    in. A line it logged again and again (``still in WAITING_FOR_REMOTE_KVS``)
    shows a process alive and waiting, not one that stopped: left out unless
    it is all there is."""
    events = [e for e in s.events() if e.marker >= 0]
    counts: dict[tuple[int, int], int] = {}  # (pid, marker) -> lines: each rank logs its own
    for e in events:
        counts[(e.pid, e.marker)] = counts.get((e.pid, e.marker), 0) + 1
    last: dict[int, tuple[int, int]] = {}
    for e in events:
        last[e.pid] = (e.pid, e.marker)
    # and the last line that is no such repetition, whatever its process
    # (without pids, as in plain logging, every line is one process's)
    quiet = [(e.pid, e.marker) for e in events if counts[(e.pid, e.marker)] < 3]
    places = sorted(set(last.values()) | set(quiet[-1:]))
    keep = sorted({i for p, i in places if counts[(p, i)] < 3}) or sorted({i for _, i in places})
    return [(code.markers[i], code.markers[i].line) for i in keep]


def _short2(name: str) -> str:
    return ".".join(name.split(".")[-2:])
