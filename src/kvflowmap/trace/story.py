"""Records grouped into per-request stories, streamed.

A story keeps its first ``HEAD`` and last ``TAIL`` lines and everything the
diagnosis needs as counters and marks (states passed, hooks reached,
reports made, when it was parked or started sending), so memory stays flat
however long a request logs. Request ids are not unique across restarts: a
process name seen again with another pid starts a new epoch, and a story is
keyed by (epoch, id).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from kvflowmap.trace.code import CodeIndex
from kvflowmap.trace.match import EXACT, MOVED, Matcher
from kvflowmap.trace.parse import Record

HEAD, TAIL = 16, 48
_DAYS = (0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)
_CLOCK_SLACK = 2.0  # seconds a timestamp may go back (interleaved writers) before it is a jump


def seconds(ts: str) -> float | None:
    """``MM-DD HH:MM:SS`` as seconds since the start of its year (no year
    in vLLM's format: a log across New Year goes back, counted as a jump)."""
    try:
        mo, dd = int(ts[0:2]), int(ts[3:5])
        return (((_DAYS[mo - 1] + dd - 1) * 24 + int(ts[6:8])) * 60 + int(ts[9:11])) * 60 + int(ts[12:14])
    except (ValueError, IndexError):
        return None


@dataclass(slots=True)
class Event:
    """One line of a request's story."""

    seq: int  # record number in the whole run
    source: str
    lineno: int
    ts: str
    process: str
    pid: int
    level: str
    kind: str  # exact, moved, unknown
    marker: int  # marker id, -1 when unknown
    values: tuple[str, ...]
    text: str  # the message for an unknown line (cut), else ""


@dataclass
class Story:
    """What one request did, as far as the log says."""

    epoch: int
    request_id: str
    head: list[Event] = field(default_factory=list)
    tail: deque = field(default_factory=lambda: deque(maxlen=TAIL))
    lines: int = 0
    first_ts: str = ""
    last_ts: str = ""
    last_seq: int = 0
    max_gap: float = 0.0  # longest silence between two of its lines, in seconds
    states: dict[str, str] = field(default_factory=dict)  # state -> "message" | "code", in order
    hooks: dict[str, int] = field(default_factory=dict)  # hook -> first seq, in order
    reports: dict[str, list[int]] = field(default_factory=dict)  # report kind -> seqs
    report_places: dict[tuple[int, int], int] = field(default_factory=dict)  # (marker, pid) -> count
    parked_at: int = -1  # seq it was parked (commit hook or parked state), -1 never
    sending_at: int = -1  # seq it reached a save hook
    failed_at: int = -1  # seq of its first failure line
    aborted_at: int = -1
    processes: dict[str, int] = field(default_factory=dict)  # "name pid" -> lines
    process_last: dict[str, str] = field(default_factory=dict)  # "name pid" -> its last timestamp
    related: list[str] = field(default_factory=list)
    last_marker: int = -1

    def events(self) -> list[Event]:
        """Its kept lines in order (the middle of a long story is dropped)."""
        return self.head + list(self.tail)

    @property
    def dropped(self) -> int:
        return self.lines - len(self.head) - len(self.tail)


@dataclass
class TraceStats:
    """Counts over the whole run, for the robustness summary."""

    records: int = 0
    exact: int = 0
    moved: int = 0
    unknown: int = 0
    with_request: int = 0
    filtered_out: int = 0
    clock_jumps: int = 0
    epochs: int = 0
    restarts: list[str] = field(default_factory=list)
    levels: dict[str, int] = field(default_factory=dict)
    unknown_samples: list[str] = field(default_factory=list)
    moved_markers: dict[int, int] = field(default_factory=dict)
    end_ts: dict[int, str] = field(default_factory=dict)  # epoch -> last timestamp seen
    first_ts: str = ""
    last_ts: str = ""


_STATE_WORD = re.compile(r"[A-Z][A-Z_]{3,}")
_WORD = re.compile(r"[a-z]+")


class Tracer:
    """Feed records with ``add``; read ``stories`` and ``stats`` after."""

    def __init__(self, code: CodeIndex, matcher: Matcher, request: str | None = None,
                 since: float | None = None, until: float | None = None) -> None:
        self.code = code
        self.matcher = matcher
        self.only = request
        self.since, self.until = since, until
        self.stories: dict[tuple[int, str], Story] = {}
        self.stats = TraceStats()
        self.epoch = 0
        self._pids: dict[str, int] = {}
        self._last_time: dict[int, float] = {}
        self._states = set(code.states)
        self._parked = set(code.parked_states)
        self._commit = set(code.commit_hooks)
        self._save = set(code.save_hooks)
        # a one-word state in past tense is also said in lower case ("preempt req=...")
        self._state_words = {s.lower()[:-2]: s for s in code.states
                             if "_" not in s and s.endswith("ED")}
        self._marker_states: dict[int, tuple[tuple[str, str], ...]] = {}
        self._fail_marker: dict[int, bool] = {}
        self._abort_marker: dict[int, bool] = {}
        self._seconds: dict[str, float | None] = {}

    def add_all(self, records: Iterable[Record]) -> None:
        """``add`` every record."""
        for rec in records:
            self.add(rec)

    def _time(self, ts: str) -> float | None:
        t = self._seconds.get(ts, -1.0)
        if t == -1.0:
            t = self._seconds[ts] = seconds(ts) if ts else None
            if len(self._seconds) > 100_000:
                self._seconds.clear()
        return t

    def add(self, rec: Record) -> None:
        """One record: match it, then add it to the stories of its requests."""
        st = self.stats
        st.records += 1
        t = self._time(rec.ts)
        if t is not None and (self.since is not None and t < self.since
                              or self.until is not None and t > self.until):
            st.filtered_out += 1
            return
        if rec.process and rec.pid:
            old = self._pids.get(rec.process)
            if old is None:
                self._pids[rec.process] = rec.pid
            elif old != rec.pid:
                # a process came back with another pid: a restart; ids start over
                self.epoch += 1
                st.epochs = self.epoch
                st.restarts.append(f"{rec.process} pid {old} -> {rec.pid} at {rec.source}:{rec.lineno}")
                self._pids = {rec.process: rec.pid}
        if t is not None:
            prev = self._last_time.get(rec.pid)
            if prev is not None and t < prev - _CLOCK_SLACK:
                st.clock_jumps += 1
            self._last_time[rec.pid] = t
        if rec.ts:
            st.end_ts[self.epoch] = rec.ts
            st.first_ts = st.first_ts or rec.ts
            st.last_ts = rec.ts
        st.levels[rec.level] = st.levels.get(rec.level, 0) + 1
        m = self.matcher.match(rec)
        if m.kind == EXACT:
            st.exact += 1
        elif m.kind == MOVED:
            st.moved += 1
            assert m.marker is not None
            st.moved_markers[m.marker.id] = st.moved_markers.get(m.marker.id, 0) + 1
        else:
            st.unknown += 1
            if len(st.unknown_samples) < 5:
                st.unknown_samples.append(f"{rec.source}:{rec.lineno}: {rec.message[:160]}")
            return
        ids, related = self.matcher.request_ids(m)
        if not ids:
            return
        st.with_request += 1
        marker = m.marker
        assert marker is not None
        ev = Event(st.records, rec.source, rec.lineno, rec.ts, rec.process, rec.pid, rec.level,
                   m.kind, marker.id, m.values, "")
        for rid in dict.fromkeys(ids):
            if self.only is not None and rid != self.only:
                continue
            self._story_add(rid, ev, t, related)

    def _story_add(self, rid: str, ev: Event, t: float | None, related: list[str]) -> None:
        key = (self.epoch, rid)
        s = self.stories.get(key)
        if s is None:
            s = self.stories[key] = Story(self.epoch, rid, first_ts=ev.ts)
        elif t is not None and s.last_ts:
            last = self._time(s.last_ts)
            if last is not None and t - last > s.max_gap:
                s.max_gap = t - last
        s.lines += 1
        if len(s.head) < HEAD:
            s.head.append(ev)
        else:
            s.tail.append(ev)
        if ev.ts:
            s.last_ts = ev.ts
        s.last_seq = ev.seq
        s.last_marker = ev.marker
        where = f"{ev.process} pid={ev.pid}" if ev.pid else (ev.process or "-")
        s.processes[where] = s.processes.get(where, 0) + 1
        if ev.ts:
            s.process_last[where] = ev.ts
        for r in related:
            if r != rid and r not in s.related and len(s.related) < 8:
                s.related.append(r)
        marker = self.code.markers[ev.marker]
        for state, how in self._states_of(ev):
            s.states.setdefault(state, how)
            if state.startswith("PREEMPT"):
                # preempted: its blocks are gone, a new load cycle starts
                s.report_places.clear()
                s.parked_at = -1
            if state in self._parked and s.parked_at < 0:
                s.parked_at = ev.seq
            if state.startswith("FINISHED_ABORTED") and s.aborted_at < 0:
                s.aborted_at = ev.seq
        for h in marker.hooks:
            if h not in s.hooks:
                s.hooks[h] = ev.seq
            if h in self._commit and s.parked_at < 0 and len(marker.hooks) == 1:
                s.parked_at = ev.seq
            if h in self._save and s.sending_at < 0 and len(marker.hooks) == 1:
                s.sending_at = ev.seq
        for r in marker.reports:
            s.reports.setdefault(r, []).append(ev.seq)
            if r.startswith("finished"):
                place = (marker.id, ev.pid)
                s.report_places[place] = s.report_places.get(place, 0) + 1
        if s.failed_at < 0 and self._is_failure(ev.marker, ev.level):
            s.failed_at = ev.seq
        if s.aborted_at < 0 and self._is_abort(ev.marker):
            s.aborted_at = ev.seq

    def _states_of(self, ev: Event) -> tuple[tuple[str, str], ...]:
        """The states a line says the request is in: named in the message
        (its format or its values), then written by the code next to it."""
        found = self._marker_states.get(ev.marker)
        marker = self.code.markers[ev.marker]
        if found is None:
            names = [(w, "message") for w in _STATE_WORD.findall(marker.message) if w in self._states]
            names += [(self._state_words[w], "message") for w in _WORD.findall(marker.message.lower())
                      if w in self._state_words]
            names += [(s, "code") for s in marker.states]
            found = self._marker_states[ev.marker] = tuple(dict.fromkeys(names))
        extra = [(w, "message") for v in ev.values if v[:1].isupper() or "." in v
                 for w in _STATE_WORD.findall(v) if w in self._states]
        return found + tuple(extra) if extra else found

    def _is_failure(self, marker_id: int, level: str) -> bool:
        """An error line, or a warning that says something failed ("failed=%s"
        in an info line is a field, not a failure)."""
        got = self._fail_marker.get(marker_id)
        if got is None:
            m = self.code.markers[marker_id]
            words = _WORD.findall(m.message.lower())
            got = m.level in ("ERROR", "CRITICAL") or (
                m.level == "WARNING" and any(w.startswith("fail") for w in words))
            self._fail_marker[marker_id] = got
        return got

    def _is_abort(self, marker_id: int) -> bool:
        got = self._abort_marker.get(marker_id)
        if got is None:
            words = _WORD.findall(self.code.markers[marker_id].message.lower())
            got = self._abort_marker[marker_id] = any(
                w.startswith(("abort", "cancel")) for w in words)
        return got
