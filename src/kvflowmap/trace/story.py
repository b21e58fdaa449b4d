"""Records grouped into per-request stories, streamed.

A story keeps its first ``HEAD`` and last ``TAIL`` lines and everything the
diagnosis needs as counters and marks (states passed, hooks reached,
reports made, when it was parked or started sending), so memory stays flat
however long a request logs. Request ids are not unique across restarts: a
process name seen again with another pid starts a new epoch, and a story is
keyed by (epoch, id).
"""

from __future__ import annotations

import functools
import re
import sys
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from kvflowmap.trace.code import CodeIndex, Marker
from kvflowmap.trace.match import EXACT, NOT_PLAIN, UNKNOWN, Exact, Matcher, ids_in, split_ids, values_of
from kvflowmap.trace.parse import Header, RawRecord, seconds

__all__ = ["Event", "Story", "TraceStats", "Tracer", "seconds"]

HEAD, TAIL = 16, 48
SWEEP_EVERY = 1 << 16  # records between two sweeps for settled stories
IDLE = 1 << 17  # records a story must have been quiet to be compacted
KEEP_SETTLED = 300  # settled stories whose lines are kept all the same (the report lists them)
KEEP_ROWS = 5000  # settled stories kept as a row of the report; later ones are only counted
RETIRED_IDS = 1 << 16  # ids of retired stories remembered, to tell when one logs again
_CLOCK_SLACK = 2.0  # seconds a timestamp may go back (interleaved writers) before it is a jump
# seconds one process's clock may run ahead of another's writing into the same
# stream between two of its lines (a forward jump, or a clock set apart)
_CLOCK_AHEAD = 60.0


class Event(NamedTuple):
    """One line of a request's story: where it was logged, its header (shared
    with the other lines of that header), and how it matched its logging call
    (the placeholders' values are taken out only when asked). A named tuple:
    one is made for nearly every line, and a dataclass costs more to make."""

    seq: int  # record number in the whole run
    source: str
    lineno: int
    header: Header
    kind: str  # exact, moved, unknown
    call: Marker | None  # the logging call, None when unknown
    found: re.Match[str] | None  # the pattern's match
    partial: bool  # ``found`` is the short id pattern's (``formats.id_pattern``)
    text: str  # the message

    @property
    def ts(self) -> str:
        return self.header.ts

    @property
    def process(self) -> str:
        return self.header.process

    @property
    def pid(self) -> int:
        return self.header.pid

    @property
    def level(self) -> str:
        return self.header.level

    @property
    def marker(self) -> int:
        """The logging call's id, -1 when unknown."""
        return -1 if self.call is None else self.call.id

    @property
    def values(self) -> tuple[str, ...]:
        return values_of(self.call, self.found, self.partial, self.text)


@dataclass(slots=True)
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
    last_t: float | None = None  # last_ts in seconds
    max_gap: float = 0.0  # longest silence between two of its lines, in seconds
    states: dict[str, str] = field(default_factory=dict)  # state -> "message" | "code", in order
    hooks: dict[str, int] = field(default_factory=dict)  # hook -> first seq, in order
    reports: dict[str, list[int]] = field(default_factory=dict)  # report kind -> [count, last seq]
    report_places: dict[tuple[int, int], int] = field(default_factory=dict)  # (marker, pid) -> count
    parked_at: int = -1  # seq it was parked (commit hook or parked state), -1 never
    sending_at: int = -1  # seq it reached a save hook
    failed_at: int = -1  # seq of its first failure line
    aborted_at: int = -1
    processes: dict[str, int] = field(default_factory=dict)  # "name pid" -> lines
    process_last: dict[str, str] = field(default_factory=dict)  # "name pid" -> its last timestamp
    related: list[str] = field(default_factory=list)
    last_marker: int = -1
    compacted: int = 0  # lines dropped when it was settled and idle (memory)
    # (last_seq, outcome) of the last sweep that asked whether it is settled:
    # the answer stands while no line comes (the sweep asks every idle story)
    verdict: tuple[int, str | None] | None = None

    def reported_after(self, kinds: tuple[str, ...], seq: int) -> bool:
        """Whether one of the reports ``kinds`` came after record ``seq``."""
        return any(k in self.reports and self.reports[k][1] > seq for k in kinds)

    def events(self) -> list[Event]:
        """Its kept lines in order (the middle of a long story is dropped):
        the log's order, or, when its lines come from several files (a log
        per process), by time, each file's own order kept for lines of the
        same second."""
        out = self.head + list(self.tail)
        if len({e.source for e in out}) > 1:
            out.sort(key=lambda e: (e.header.t if e.header.t is not None else -1.0, e.seq))
        return out

    @property
    def dropped(self) -> int:
        return self.lines - len(self.head) - len(self.tail)

    def compact(self) -> None:
        """Forget its lines (counters and marks stay): a settled request's
        story is not told, and a long log must not keep every line."""
        self.compacted += len(self.head) + len(self.tail)
        self.head = []
        self.tail.clear()


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


def _ids_of_value(v: str) -> list[str]:
    """The ids in one placeholder's value (``match.split_ids``), a plain one without its checks."""
    return [v] if v and v[0] not in NOT_PLAIN else split_ids(v)


_STATE_WORD = re.compile(r"[A-Z][A-Z_]{3,}")
_STATE_BEFORE_VALUE = re.compile(r"(?i)(?:status|state)\w*\W{0,3}(?:%[-#0 +\d.]*[sra]|\{[^{}]*\})")
_TOKEN = re.compile(r"[\w.:-]{6,}")  # what may be a request id in an unknown line
_WORD = re.compile(r"[a-z]+")
_DELAY_WORDS = ("wait", "delay", "defer", "later")


class Tracer:
    """Feed batches of records (``parse.read_records``) with ``feed``; read
    ``stories`` and ``stats`` after."""

    def __init__(self, code: CodeIndex, matcher: Matcher, request: str | None = None,
                 since: float | None = None, until: float | None = None,
                 settled: Callable[[Story], str | None] | None = None,
                 time_of_day: bool = False) -> None:
        self.code = code
        self.time_of_day = time_of_day  # since/until are times of day, not moments
        # a story's outcome when it owes the protocol nothing (then it may
        # be compacted, and later retired), else None
        self.settled = settled
        # outcome -> stories retired with it: counted, not told
        self.retired_counts: dict[str, int] = {}
        # (epoch, id) -> outcome of the last RETIRED_IDS stories retired, to
        # tell when one logs again (older ones are only counted: memory)
        # (an OrderedDict: dropping the oldest of a plain dict that many were
        # deleted from scans past them each time)
        self.retired: OrderedDict[tuple[int, str], str] = OrderedDict()
        self.revived = 0  # retired ids that logged again (their new story starts there)
        self.matcher = matcher
        self.only = request
        self.since, self.until = since, until
        self.stories: dict[tuple[int, str], Story] = {}
        self.stats = TraceStats()
        self.epoch = 0
        self._pids: dict[str, int] = {}
        self._seen_pids: set[int] = set()
        self._last_time: dict[int, float] = {}
        # the furthest-ahead time any process wrote, with its pid and record
        # number; per pid, the record number of its last change of time
        self._lead: tuple[float, int, int] | None = None
        self._time_seq: dict[int, int] = {}
        self._ahead: set[int] = set()  # pids counted as running ahead in this epoch
        self._states = set(code.states)
        self._parked = set(code.parked_states)
        self._commit = set(code.commit_hooks)
        # markers that report a failure but name no request (vLLM's
        # "Recovered from KV load failure: %d request(s) rescheduled", under
        # the recompute policy): marker id -> those reports
        self._idless_failures: dict[int, tuple[str, ...]] = {
            m.id: fails for m in code.markers
            if not m.id_args and (fails := tuple(r for r in m.reports if r.startswith("failed")))}
        self._save = set(code.save_hooks)
        self._delay = set(code.delay_free_hooks)
        # a one-word state in past tense is also said in lower case ("preempt req=...")
        self._state_words = {s.lower()[:-2]: s for s in code.states
                             if "_" not in s and s.endswith("ED")}
        self._facts_of: list[_MarkerFacts | None] = [None] * len(code.markers)
        # the stories of the current epoch by id (``stories`` has them by (epoch, id))
        self._current: dict[str, Story] = {}

    def add_all(self, batches: Iterable[list[RawRecord]]) -> None:
        """``feed`` every batch of records (``parse.read_records``)."""
        for batch in batches:
            self.feed(batch)

    def add(self, hdr: Header, message: str, source: str = "", lineno: int = 0) -> None:
        """One record."""
        self.feed([(hdr, message, source, lineno)])

    def feed(self, batch: list[RawRecord]) -> None:
        """Records as the reader hands them on: match each to its logging
        call, then add it to the stories of its requests.

        This loop runs for every line of the log, so it keeps to local
        names and the common case: a header seen before (its time, process
        label and place worked out once, ``parse.Header``), a logging call
        at that place whose short pattern takes out one plain request id.
        What is rare has its own method: a new pid (``_new_pid``), a line
        not explained at its place (``_elsewhere``), the sweep."""
        st = self.stats
        matcher = self.matcher
        places = matcher.places
        levels = st.levels
        last_time = self._last_time
        pids = self._pids
        story_add = self._story_add
        sweep_every = SWEEP_EVERY
        sweeping = self.settled is not None
        window = self.since is not None or self.until is not None
        only = self.only
        # Event(...) without the Python-level __new__ a named tuple has (a C call)
        make_event = functools.partial(tuple.__new__, Event)
        learning = matcher.learning  # may end within the batch: ids_of then takes its own fast path
        idless = self._idless_failures
        current_get = self._current.get
        facts_of = self._facts_of
        ids_of_value = _ids_of_value
        exact = with_request = 0  # counted here, added to st at the end
        seq = st.records
        cur_ts = ""  # the last timestamp written to st (a header's ts repeats)
        # the record number of the next sweep (a multiple of SWEEP_EVERY)
        next_sweep = (seq // sweep_every + 1) * sweep_every if sweeping else -1
        for hdr, msg, source, lineno in batch:
            seq += 1
            if seq == next_sweep:
                st.records = seq
                self._sweep()
                next_sweep += sweep_every
            t = hdr.t
            if t is not None:
                if window and self._outside(t):
                    st.filtered_out += 1
                    continue
                pid = hdr.pid
                prev = last_time.get(pid)
                if prev != t:
                    if prev is not None and t < prev - _CLOCK_SLACK:
                        st.clock_jumps += 1
                    last_time[pid] = t
                    self._clock_step(pid, t, seq)
            if hdr.pid and pids.get(hdr.process) != hdr.pid:
                self._new_pid(hdr, source, lineno, t)
                current_get = self._current.get  # a restart starts a new one
                cur_ts = ""
            ts = hdr.ts
            if ts and ts != cur_ts:
                cur_ts = st.end_ts[self.epoch] = ts
                if not st.first_ts:
                    st.first_ts = ts
                st.last_ts = ts
            level = hdr.level
            levels[level] = levels.get(level, 0) + 1
            # exact: a call at the logged [file:LINE] whose pattern fits;
            # its values split out by str.find when that can stand in for
            # the pattern (formats.splitter), else by the pattern
            fits: Exact | None = None
            got: re.Match[str] | None = None
            vals: list[str] | None = None
            place = hdr.place
            if place:
                for cand in places.get(place) or matcher.exact_at(hdr.file, hdr.line):
                    sp = cand[5]
                    if sp is not None and not learning and msg.startswith(sp[0]):
                        # formats.split_values, inline: this runs for nearly every line
                        pos = sp[1]
                        vals = []
                        for sep in sp[2]:
                            if sep is None:
                                vals.append(msg[pos:].rstrip())
                                break
                            j = msg.find(sep, pos)
                            if j < 0:
                                vals = None
                                break
                            vals.append(msg[pos:j])
                            pos = j + len(sep)
                        if vals is not None:
                            for i in sp[3]:
                                v = vals[i]
                                if not (v.isdecimal() or (v[:1] in "+-" and v[1:].isdecimal())):
                                    vals = None
                                    break
                        if vals is not None:
                            fits = cand
                            break
                    got = cand[1].match(msg)
                    if got is None and not cand[2] and "\n" in msg:  # a traceback after it
                        got = cand[1].match(msg.partition("\n")[0])
                    if got is not None:
                        fits = cand
                        break
            if fits is None:
                st.records = seq
                self._elsewhere(hdr, msg, source, lineno, t)
                continue
            call = fits[0]
            exact += 1
            related: list[str] | tuple[()]
            if vals is not None:
                rid = vals[fits[6]]  # one id, split out
                if rid and rid[0] not in NOT_PLAIN:
                    with_request += 1
                    if only is not None and rid != only:
                        continue
                    s = current_get(rid)
                    mid = call.id
                    f = facts_of[mid]
                    if s is None or f is None or not f.only_hooks:
                        related = [x for i in fits[7] for x in ids_of_value(vals[i])] if fits[7] else ()
                        story_add(rid, make_event((seq, source, lineno, hdr, EXACT, call, None, False, msg)),
                                  t, related)
                        continue
                    # _story_add for the common line, inline: a story already
                    # told, a call whose only news is the hooks it runs under
                    if t is not None:
                        lt = s.last_t
                        if lt is not None and t - lt > s.max_gap:
                            s.max_gap = t - lt
                        s.last_t = t
                    s.lines += 1
                    ev = make_event((seq, source, lineno, hdr, EXACT, call, None, False, msg))
                    if len(s.head) < HEAD:
                        s.head.append(ev)
                    else:
                        s.tail.append(ev)
                    s.last_seq = seq
                    label = hdr.label
                    procs = s.processes
                    procs[label] = procs.get(label, 0) + 1
                    if ts:
                        s.last_ts = s.process_last[label] = ts
                    if fits[7] and len(s.related) < 8:
                        rel = s.related
                        for i in fits[7]:
                            v = vals[i]
                            if v and v[0] not in NOT_PLAIN:  # one plain id: the common value
                                if v != rid and v not in rel and len(rel) < 8:
                                    rel.append(v)
                                continue
                            for r in split_ids(v):
                                if r != rid and len(rel) < 8 and r not in rel:
                                    rel.append(r)
                    if s.last_marker != mid:
                        s.last_marker = mid
                        hooks = s.hooks
                        for h in f.hooks:
                            if h not in hooks:
                                hooks[h] = seq
                    continue
                ids = split_ids(rid)
                related = [x for i in fits[7] for x in ids_of_value(vals[i])] if fits[7] else ()
            else:
                assert got is not None
                _, _, partial, id_group, related_at = fits[:5]
                if id_group and not learning:
                    rid = got.group(id_group)  # the common case: one plain id
                    if rid and rid[0] not in NOT_PLAIN:
                        with_request += 1
                        if only is None or rid == only:
                            story_add(rid, make_event((seq, source, lineno, hdr, EXACT, call, got, partial, msg)),
                                      t, ids_in(got, related_at) if related_at else ())
                        continue
                    ids = split_ids(rid)
                    related = ids_in(got, related_at) if related_at else ()
                else:
                    ids, related = matcher.ids_of(call, got, partial, msg)
            if not ids:
                if idless and call.id in idless:
                    self._failures_answered(call.id, seq)
                continue
            with_request += 1
            ev = make_event((seq, source, lineno, hdr, EXACT, call, got, fits[2], msg))
            for rid in dict.fromkeys(ids) if len(ids) > 1 else ids:
                if only is None or rid == only:
                    story_add(rid, ev, t, related)
        st.records = seq
        st.exact += exact
        st.with_request += with_request

    def _outside(self, t: float) -> bool:
        """Whether a line at ``t`` is outside --since/--until."""
        tt = t % 86400 if self.time_of_day else t
        return (self.since is not None and tt < self.since) or (self.until is not None and tt > self.until)

    def _new_pid(self, hdr: Header, source: str, lineno: int, t: float | None) -> None:
        """A process name with a pid not seen with it before: the first
        time, or a restart (a new epoch: ids start over), or a second live
        process of that name."""
        old = self._pids.get(hdr.process)
        if old is None:
            self._pids[hdr.process] = hdr.pid
            self._seen_pids.add(hdr.pid)
        elif hdr.pid in self._seen_pids or self._overlaps(old, t):
            # two live processes with one name (JSON's "MainProcess", the
            # prefill and the decode instance's EngineCore_DP0 in two files):
            # no restart
            self._seen_pids.add(hdr.pid)
            self._pids[hdr.process] = hdr.pid
        else:
            self._seen_pids.add(hdr.pid)
            # a process came back with another pid: a restart; ids start over
            self.epoch += 1
            self._current = {}
            st = self.stats
            st.epochs = self.epoch
            st.restarts.append(f"{hdr.process} pid {old} -> {hdr.pid} at {source}:{lineno}")
            self._pids.clear()
            self._pids[hdr.process] = hdr.pid
            self._last_time.clear()
            self._lead, self._ahead = None, set()
            self._time_seq.clear()
            if t is not None:
                self._last_time[hdr.pid] = t

    def _clock_step(self, pid: int, t: float, seq: int) -> None:
        """A process's time changed to ``t``. A forward jump shows only against
        another clock: a process that wrote before the furthest-ahead line
        of another one, and writes again after it at a time more than
        ``_CLOCK_AHEAD`` behind, ran on while the other's clock leapt (or
        was set apart). Counted once per process ahead and epoch. A jump of
        every process at once (one host's clock) looks like idle time, and
        logs given one after the other never interleave, so neither counts."""
        lead = self._lead
        if lead is None or t >= lead[0]:
            self._lead = (t, pid, seq)
        elif lead[1] != pid and t < lead[0] - _CLOCK_AHEAD and lead[1] not in self._ahead \
                and self._time_seq.get(pid, seq) < lead[2]:
            self._ahead.add(lead[1])
            self.stats.clock_jumps += 1
        self._time_seq[pid] = seq

    def _overlaps(self, old: int, t: float | None) -> bool:
        """A line at ``t`` from a new pid comes before the last line of
        ``old``, the pid its process name had: the two ran at once (logs of
        two instances given one after the other), where a restarted process
        logs only after its predecessor's last line."""
        last = self._last_time.get(old)
        return t is not None and last is not None and t < last

    def _elsewhere(self, hdr: Header, msg: str, source: str, lineno: int, t: float | None) -> None:
        """A record no call at its logged place explains: by its logger's
        module or its format string (moved), else unknown."""
        st = self.stats
        m = self.matcher.elsewhere(hdr.line, hdr.logger, msg)
        marker = m.marker
        if marker is None or m.found is None:
            st.unknown += 1
            if len(st.unknown_samples) < 5:
                st.unknown_samples.append(f"{source}:{lineno}: {msg[:160]}")
            if self.stories:
                self._add_unknown(hdr, msg, source, lineno, t)
            return
        # a call logging its caller's place (``stacklevel=2``) is where it is
        kind = EXACT if marker.caller_place else m.kind
        if kind == EXACT:
            st.exact += 1
        else:
            st.moved += 1
            st.moved_markers[marker.id] = st.moved_markers.get(marker.id, 0) + 1
        # m.text: the message, or its first line when only that matched
        ids, related = self.matcher.ids_of(marker, m.found, m.partial, m.text)
        if not ids:
            if marker.id in self._idless_failures:
                self._failures_answered(marker.id, st.records)
            return
        st.with_request += 1
        ev = Event(st.records, source, lineno, hdr, kind, marker, m.found, m.partial, m.text)
        if len(ids) > 1:
            ids = list(dict.fromkeys(ids))
        for rid in ids:
            if self.only is None or rid == self.only:
                self._story_add(rid, ev, t, related)

    def _add_unknown(self, hdr: Header, msg: str, source: str, lineno: int, t: float | None) -> None:
        """A line no logging call explains still belongs to the requests
        whose ids it names (only ids already seen in this epoch)."""
        found = [tok for tok in _TOKEN.findall(msg[:2000]) if tok in self._current]
        if not found:
            return
        self.stats.with_request += 1
        ev = Event(self.stats.records, source, lineno, hdr, UNKNOWN, None, None, False, msg)
        for rid in dict.fromkeys(found):
            if self.only is None or rid == self.only:
                self._story_add(rid, ev, t, [])

    def finish(self) -> None:
        """The logs are read: every story is idle now, so the settled ones
        beyond the first ``KEEP_ROWS`` are retired as the sweep would have
        retired them had the log gone on (the report lists the same number
        of settled requests whatever the log's length)."""
        if self.settled is not None:
            self._sweep(final=True)

    def _sweep(self, final: bool = False) -> None:
        """Stories that are settled (nothing the protocol still owes them)
        and idle for ``IDLE`` records (``final``: all of them): beyond the
        first ``KEEP_SETTLED`` they forget their lines, beyond ``KEEP_ROWS``
        they are retired (only their outcome is kept). Memory stays flat
        however long the log."""
        assert self.settled is not None
        horizon = self.stats.records + 1 if final else self.stats.records - IDLE
        kept = 0
        retire: list[tuple[tuple[int, str], str]] = []
        for key, s in self.stories.items():
            if s.last_seq > horizon:
                continue
            kept += 1
            if kept <= KEEP_SETTLED:
                continue
            verdict = s.verdict
            if verdict is not None and verdict[0] == s.last_seq:
                outcome = verdict[1]
            else:
                outcome = self.settled(s)
                s.verdict = (s.last_seq, outcome)
            if outcome is None:
                continue
            if kept > KEEP_ROWS:
                retire.append((key, outcome))
            elif s.head and not final:
                s.compact()
        counts = self.retired_counts
        for key, outcome in retire:
            del self.stories[key]
            if key[0] == self.epoch:
                del self._current[key[1]]
            self.retired[key] = outcome = sys.intern(outcome)
            counts[outcome] = counts.get(outcome, 0) + 1
            if len(self.retired) > RETIRED_IDS:
                self.retired.popitem(last=False)  # the oldest

    def _facts(self, marker_id: int) -> _MarkerFacts:
        """What a marker says about a request, worked out once."""
        m = self.code.markers[marker_id]
        states = self._static_states(marker_id)
        hooks = m.hooks
        single = len(hooks) == 1
        words = _WORD.findall(m.message.lower())
        # a placeholder right after "status"/"state" ("request_status=%s") may
        # log a state: only then are a line's values read for one (the full
        # pattern on every line: "%s is still in ... state." logs none)
        value_states = _STATE_BEFORE_VALUE.search(m.message) is not None
        f = _MarkerFacts(
            states=states,
            parks=any(st in self._parked for st, _ in states) or (single and hooks[0] in self._commit),
            # sending: a save hook, or the delay-free hook saying the free waits
            sends=single and (hooks[0] in self._save or (
                hooks[0] in self._delay and any(w.startswith(_DELAY_WORDS) for w in words))),
            preempts=any(st.startswith("PREEMPT") for st, _ in states),
            aborts=any(st.startswith("FINISHED_ABORTED") for st, _ in states)
            or any(w.startswith(("abort", "cancel")) for w in words),
            fails=m.level in ("ERROR", "CRITICAL")
            or (m.level == "WARNING" and any(w.startswith("fail") for w in words)),
            finishes=tuple(r for r in m.reports if r.startswith("finished")),
            # a call several hooks reach says only that one of them ran: the
            # story names the hooks a request certainly reached
            hooks=hooks if single else (), reports=m.reports, scheduler=m.side == "scheduler",
            # values may name a state ("request_status=%s"): only then are they read
            value_states=value_states,
            any_state=bool(states) or value_states)
        self._facts_of[marker_id] = f
        return f

    def _story_add(self, rid: str, ev: Event, t: float | None,
                   related: list[str] | tuple[()]) -> None:
        s = self._current.get(rid)
        if s is None:
            s = self._new_story(rid, ev.header.ts)
        elif t is not None and s.last_t is not None and t - s.last_t > s.max_gap:
            s.max_gap = t - s.last_t
        s.lines += 1
        if len(s.head) < HEAD:
            s.head.append(ev)
        else:
            s.tail.append(ev)
        hdr = ev.header
        if t is not None:
            s.last_t = t
        seq = s.last_seq = ev.seq
        where = hdr.label
        procs = s.processes
        procs[where] = procs.get(where, 0) + 1
        ts = hdr.ts
        if ts:
            s.last_ts = s.process_last[where] = ts
        call = ev.call
        if related:
            for r in related:
                if r != rid and len(s.related) < 8 and r not in s.related:
                    s.related.append(r)
        if call is None:
            return  # an unknown line: in the story, but it says nothing the code knows
        mid = s.last_marker = call.id
        f = self._facts_of[mid]
        if f is None:
            f = self._facts(mid)
        hooks = s.hooks
        for h in f.hooks:
            if h not in hooks:
                hooks[h] = seq
        if f.only_hooks:
            return
        if f.any_state:
            states = f.states
            if f.value_states:
                states = states + self._value_states(ev.values)
            for state, how in states:
                if state not in s.states:
                    s.states[state] = how
            if f.preempts:
                # preempted: its blocks are gone, a new load cycle starts
                s.report_places.clear()
                s.parked_at = -1
        if f.parks and s.parked_at < 0:
            s.parked_at = seq
        if f.sends and s.sending_at < 0:
            s.sending_at = seq
        if f.reports:
            for r in f.reports:
                got = s.reports.get(r)
                if got is None:
                    s.reports[r] = [1, seq]
                else:
                    got[0] += 1
                    got[1] = seq
            if f.finishes and (hdr.pid or f.scheduler):
                # per process: each worker rank reports once (without pids, as
                # in plain logging, ranks cannot be told apart: only the one
                # scheduler's reports are counted)
                place = (mid, hdr.pid)
                s.report_places[place] = s.report_places.get(place, 0) + 1
        if f.fails and s.failed_at < 0:
            s.failed_at = seq
        if f.aborts and s.aborted_at < 0:
            s.aborted_at = seq

    def _failures_answered(self, marker_id: int, seq: int) -> None:
        """A failure report that names no request answers every failure of
        this epoch logged before it and not reported yet: the scheduler
        handles the failed blocks of all the requests of a step at once."""
        kinds = self._idless_failures[marker_id]
        for s in self._current.values():
            if 0 <= s.failed_at < seq and not any(k in s.reports for k in kinds):
                for k in kinds:
                    s.reports[k] = [1, seq]

    def _new_story(self, rid: str, ts: str) -> Story:
        """The story of an id first seen in this epoch (it may have been retired)."""
        key = (self.epoch, rid)
        if key in self.retired:
            self.revived += 1
            self.retired_counts[self.retired.pop(key)] -= 1
        s = self.stories[key] = self._current[rid] = Story(self.epoch, rid, first_ts=ts)
        return s

    def _static_states(self, marker_id: int) -> tuple[tuple[str, str], ...]:
        """The states a logging call's text names, then those its code
        writes just before it."""
        marker = self.code.markers[marker_id]
        names = [(w, "message") for w in _STATE_WORD.findall(marker.message) if w in self._states]
        names += [(self._state_words[w], "message") for w in _WORD.findall(marker.message.lower())
                  if w in self._state_words]
        names += [(st, "code") for st in marker.states]
        return tuple(dict.fromkeys(names))

    def _value_states(self, values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
        return tuple((w, "message") for v in values for w in _STATE_WORD.findall(v) if w in self._states)


@dataclass(frozen=True, slots=True)
class _MarkerFacts:
    states: tuple[tuple[str, str], ...]
    parks: bool
    sends: bool
    preempts: bool
    aborts: bool
    fails: bool
    finishes: tuple[str, ...]
    hooks: tuple[str, ...]
    reports: tuple[str, ...]
    scheduler: bool  # runs in the scheduler process (one per engine)
    value_states: bool
    any_state: bool  # it names or writes a state, or its values may
    only_hooks: bool = False  # all it tells a story is the hooks it runs under (most calls)

    def __post_init__(self) -> None:
        object.__setattr__(self, "only_hooks", not (self.any_state or self.parks or self.sends
                                                    or self.reports or self.fails or self.aborts))
