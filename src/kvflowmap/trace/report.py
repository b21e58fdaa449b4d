"""A trace run as one plain-data report: the summary, then each request's
story and diagnosis. Every output format is written from this dict, so
they agree; it is also the JSON output."""

from __future__ import annotations

from typing import Any

from kvflowmap.render import links
from kvflowmap.trace.code import CodeIndex, Marker
from kvflowmap.trace.diagnose import OUTCOMES, Candidate, Diagnosis, callers_of, diagnose
from kvflowmap.trace.parse import ParseStats
from kvflowmap.trace.story import Story, Tracer, seconds

SCHEMA = 1
MAX_TEXT = 400  # characters of a logged message kept in the report
DETAILED = 300  # requests whose lines the report lists although nothing is wrong with them


class Linker:
    """Code locations as URLs with the link templates of the other commands."""

    def __init__(self, code: CodeIndex, templates: links.Templates | None) -> None:
        self.templates = templates
        self.paths = {r["label"]: r["path"] for r in code.roots}

    def url(self, root: str, file: str, line: int) -> str | None:
        template = links.pick(self.templates, root)
        if template is None:
            path = self.paths.get(root)
            return f"file://{path}/{file}#L{line}" if path and file else None
        return links.fill(template, root, self.paths.get(root, ""), file, line)


def _where(m: Marker) -> str:
    return f"{m.file}:{m.line}"


def event_dict(code: CodeIndex, ev, linker: Linker) -> dict[str, Any]:
    """One story line as data (an unknown line has no code location)."""
    if ev.marker < 0:
        return {"ts": ev.ts, "process": ev.process, "pid": ev.pid, "level": ev.level,
                "match": ev.kind, "log": f"{ev.source}:{ev.lineno}", "where": "", "root": "",
                "function": "", "hooks": [], "message": "", "text": ev.text[:MAX_TEXT],
                "values": [], "url": None}
    m = code.markers[ev.marker]
    return {"ts": ev.ts, "process": ev.process, "pid": ev.pid, "level": ev.level,
            "match": ev.kind, "log": f"{ev.source}:{ev.lineno}", "where": _where(m),
            "root": m.root, "function": m.function, "hooks": list(m.hooks),
            "message": m.message, "text": ev.text[:MAX_TEXT], "values": list(ev.values),
            "url": linker.url(m.root, m.file, m.line)}


def story_dict(s: Story, d: Diagnosis, code: CodeIndex, linker: Linker,
               end: str = "", lines: bool = True) -> dict[str, Any]:
    """One request as data; ``end`` is the last timestamp of its epoch;
    without ``lines``, its story's lines are left out (only counted)."""
    silent: dict[str, float] = {}
    b = seconds(end) if end else None
    for proc, ts in sorted(s.process_last.items()):
        a = seconds(ts)
        if a is not None and b is not None:
            silent[proc] = max(0.0, b - a)
    last = code.markers[s.last_marker] if s.last_marker >= 0 else None
    step = ""
    if last is not None:
        step = code.hook_stages.get(last.function) or next(
            (code.hook_stages[h] for h in last.hooks if h in code.hook_stages), "")
    return {
        "request_id": s.request_id, "epoch": s.epoch, "outcome": d.outcome,
        "problems": d.problems, "lines": s.lines, "lines_dropped": max(0, s.dropped) if lines else s.lines,
        "lines_listed": lines,
        "first_ts": s.first_ts, "last_ts": s.last_ts, "silent_for_s": d.silent_for,
        "longest_gap_s": s.max_gap, "silent_by_process": silent,
        "states": [{"state": k, "from": v} for k, v in s.states.items()],
        "hooks": list(s.hooks), "reports": {k: v[0] for k, v in sorted(s.reports.items())},
        "processes": dict(sorted(s.processes.items())), "related_ids": s.related,
        "last": None if last is None else {
            "function": last.function, "where": _where(last), "root": last.root, "step": step,
            "url": linker.url(last.root, last.file, last.line)},
        "events": [event_dict(code, e, linker) for e in s.events()] if lines else [],
        "candidates": [_candidate(c, linker) for c in d.candidates],
        "owed": [_candidate(c, linker) for c in d.owed],
        "would_have_logged": [{"function": fn, "level": m.level, "message": m.message,
                               "where": _where(m), "url": linker.url(m.root, m.file, m.line)}
                              for fn, m in d.would_log],
    }


def _candidate(c: Candidate, linker: Any) -> dict[str, Any]:
    return {"function": c.function, "where": f"{c.file}:{c.line}" if c.file else "",
            "root": c.root, "score": c.score, "via": c.via, "reasons": c.reasons,
            "url": linker.url(c.root, c.file, c.line) if c.file else None}


def _median(xs: list[float]) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[len(xs) // 2]


def build_report(tracer: Tracer, parse: ParseStats, code: CodeIndex,
                 templates: links.Templates | None = None, logs: list[str] | None = None
                 ) -> dict[str, Any]:
    """The report of a finished trace run."""
    linker = Linker(code, templates)
    st = tracer.stats
    requests = []
    by_outcome = {o: 0 for o in OUTCOMES}
    callers = callers_of(code)
    for n, key in enumerate(sorted(tracer.stories)):
        s = tracer.stories[key]
        d = diagnose(s, code, st, callers)
        by_outcome[d.outcome] = by_outcome.get(d.outcome, 0) + 1
        # every troubled request's lines; of the others, the first few hundred
        lines = (n < DETAILED or d.outcome in ("stuck", "failed") or bool(d.problems)) and bool(s.head)
        requests.append(story_dict(s, d, code, linker, st.end_ts.get(s.epoch, ""), lines))
    retired = {outcome: n for outcome, n in tracer.retired_counts.items() if n}
    for outcome, n in retired.items():
        by_outcome[outcome] = by_outcome.get(outcome, 0) + n
    gaps = [r["longest_gap_s"] for r in requests if r["outcome"] == "finished"]
    med = _median(gaps)
    for r in requests:
        r["typical_gap_s"] = med  # how long a finished request stays silent at most, median
    return {
        "schema": SCHEMA, "logs": logs or [], "vllm_version": code.vllm_version,
        "summary": {
            "lines": parse.lines, "records": parse.records, "continuation_lines": parse.continuation,
            "unparsed_lines": parse.unparsed, "unparsed_samples": parse.unparsed_samples,
            "huge_lines": parse.huge_lines, "binary_lines": parse.binary_lines,
            "truncated_files": parse.truncated_files, "unreadable_files": parse.unreadable_files,
            "formats": dict(sorted(parse.formats.items())),
            "matched": {"exact": st.exact, "moved": st.moved, "unknown": st.unknown},
            "unknown_samples": st.unknown_samples,
            "moved_calls": sorted({_where(code.markers[i]) for i in st.moved_markers}),
            "lines_with_request": st.with_request, "filtered_out": st.filtered_out,
            "clock_jumps": st.clock_jumps, "epochs": st.epochs + 1, "restarts": st.restarts,
            "levels": dict(sorted(st.levels.items())), "first_ts": st.first_ts, "last_ts": st.last_ts,
            # logging calls naming a request that only a DEBUG log shows
            "debug_request_calls": sum(1 for m in code.markers if m.level == "DEBUG" and m.id_args),
            "request_calls": sum(1 for m in code.markers if m.id_args),
            "requests": len(requests) + sum(retired.values()), "outcomes": by_outcome,
            # settled requests counted but not listed (memory), and retired ids seen again
            "not_listed": dict(sorted(retired.items())), "revived": tracer.revived,
        },
        "requests": requests,
    }
