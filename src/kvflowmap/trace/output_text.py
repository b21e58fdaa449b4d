"""``--format text``: the summary table of requests by outcome, then each
stuck (or otherwise troubled) request's story and where it may have stopped.
rich styles it; with no terminal the output is plain and deterministic."""

from __future__ import annotations

import io
import sys
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

OUTCOME_STYLE = {"stuck": "bold red", "failed": "red", "aborted": "yellow", "finished": "green",
                 "preempted": "cyan", "open": "dim"}
MAX_STORIES = 20  # troubled requests told in full; the rest are listed


def _console(width: int | None) -> Console:
    tty = sys.stdout.isatty()
    return Console(file=io.StringIO(), force_terminal=tty, color_system="auto" if tty else None,
                   highlight=False, soft_wrap=True, emoji=False, width=width or 120)


def _secs(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}s"


def _short(name: str) -> str:
    return ".".join(name.split(".")[-2:])


def summary_lines(report: dict[str, Any]) -> list[str]:
    """The robustness summary: what was read and what was not understood."""
    s = report["summary"]
    m = s["matched"]
    out = [f"{s['lines']} lines, {s['records']} records ({', '.join(f'{k} {v}' for k, v in s['formats'].items()) or 'none'}), "
           f"{s['continuation_lines']} continuation lines; matched: exact {m['exact']}, moved {m['moved']}, "
           f"unknown {m['unknown']}; {s['lines_with_request']} lines name a request"]
    odd = [(k, s[k]) for k in ("unparsed_lines", "huge_lines", "binary_lines", "clock_jumps", "filtered_out")
           if s[k]]
    if odd:
        out.append("; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in odd))
    if s.get("not_listed"):
        out.append("settled requests counted but not listed (memory stays flat): "
                   + ", ".join(f"{k} {v}" for k, v in s["not_listed"].items())
                   + (f"; {s['revived']} of them logged again later" if s.get("revived") else ""))
    if s["epochs"] > 1:
        out.append(f"{s['epochs']} epochs (a process came back with another pid): " + "; ".join(s["restarts"][:3]))
    for f in s["truncated_files"]:
        out.append(f"truncated: {f}")
    for f in s["unreadable_files"]:
        out.append(f"unreadable: {f}")
    if s["moved_calls"]:
        out.append(f"{len(s['moved_calls'])} logging calls matched by their format at another line "
                   "(the log is from another release): " + ", ".join(s["moved_calls"][:5]))
    if s["lines"] and not s["levels"].get("DEBUG") and s.get("debug_request_calls"):
        out.append(f"the log has no DEBUG line: {s['debug_request_calls']} of the "
                   f"{s['request_calls']} logging calls that name a request log at DEBUG, so a "
                   "request's path shows only in part (VLLM_LOGGING_LEVEL=DEBUG logs it all)")
    for u in s["unknown_samples"][:3]:
        out.append(f"not matched: {u}")
    for u in s["unparsed_samples"][:3]:
        out.append(f"not parsed: {u}")
    return out


def _story(c: Console, r: dict[str, Any]) -> None:
    head = Text()
    head.append(f"{r['request_id']}", style="bold")
    if r["epoch"]:
        head.append(f" (epoch {r['epoch']})")
    head.append("  ")
    head.append(r["outcome"], style=OUTCOME_STYLE.get(r["outcome"], ""))
    if r["problems"]:
        head.append("  " + ", ".join(r["problems"]), style="red")
    c.print(head)
    states = " -> ".join(f"{s['state']}" + ("" if s["from"] == "message" else " (code)") for s in r["states"])
    c.print(f"  states: {states or '-'}    hooks: {', '.join(r['hooks']) or '-'}    "
            f"reports: {', '.join(f'{k}×{v}' for k, v in r['reports'].items()) or 'none'}")
    last = r["last"]
    if last:
        c.print(f"  last: {_short(last['function'])} ({last['where']})"
                + (f", step {last['step']}" if last["step"] else "")
                + f"; silent {_secs(r['silent_for_s'])} at the end, longest gap {_secs(r['longest_gap_s'])}"
                + (f" (finished requests: {_secs(r['typical_gap_s'])})" if r.get("typical_gap_s") is not None else ""))
    if r.get("silent_by_process"):
        c.print("  silent per process: " + ", ".join(f"{p} {_secs(v)}" for p, v in r["silent_by_process"].items()))
    if r["lines_dropped"]:
        c.print(f"  ({r['lines_dropped']} lines in the middle not kept)")
    events = r["events"]
    for n, e in enumerate(events):
        if _repeats(events, n):
            continue  # the same line again: counted on the first of the run
        run = 1
        while n + run < len(events) and _repeats(events, n + run):
            run += 1
        line = Text("    ")
        line.append(f"{e['ts'] or '-'} ", style="dim")
        line.append(f"{e['process'] or '-':<15} ")
        line.append(f"{e['level']:<7} ")
        line.append(f"{_short(e['function'])}", style="cyan")
        line.append(f" {e['where']}", style="dim")
        if e["match"] != "exact":
            line.append(f" [{e['match']}]", style="yellow")
        line.append(f"  {(e.get('text') or e['message'])[:100]}")
        c.print(line)
        if run > 1:
            c.print(f"    ... and {run - 1} more times from the same call, until "
                    f"{events[n + run - 1]['ts'] or '-'}", style="dim")
    if r["candidates"]:
        c.print("  where it may have stopped:", style="bold")
        for i, cand in enumerate(r["candidates"], 1):
            c.print(f"   {i}. {_short(cand['function'])} ({cand['where'] or 'outside the analysed code'})"
                    f"  score {cand['score']}")
            c.print(f"      via {' -> '.join(_short(v) for v in cand['via'])}", style="dim")
            for why in cand["reasons"]:
                c.print(f"      - {why}")
    for i, cand in enumerate(r.get("owed", ()), 1):
        if i == 1:
            c.print("  where its owed report is made (these ran for other requests, never "
                    "for it):", style="bold")
        c.print(f"   {i}. {_short(cand['function'])} ({cand['where']})")
        if len(cand["via"]) > 1:
            c.print(f"      via {' -> '.join(_short(v) for v in cand['via'])}", style="dim")
        for why in cand["reasons"]:
            c.print(f"      - {why}")
    if r["would_have_logged"]:
        c.print("  on the paths on from there, never logged for it:", style="bold")
        for w in r["would_have_logged"][:5]:
            c.print(f"    {w['level']:<7} {_short(w['function'])} {w['where']}  {w['message'][:70]}")


def _repeats(events: list[dict[str, Any]], n: int) -> bool:
    """Event ``n`` is the line before it again: the same call in the same
    process (``is still in WAITING_FOR_REMOTE_KVS`` every step)."""
    return n > 0 and all(events[n][k] == events[n - 1][k] for k in ("where", "process", "pid"))


def render_text(report: dict[str, Any], width: int | None = None) -> str:
    """The text report."""
    c = _console(width)
    for line in summary_lines(report):
        c.print(line)
    reqs = report["requests"]
    table = Table(title=None, show_lines=False, box=None, pad_edge=False)
    for col in ("outcome", "requests", "problems", "examples"):
        table.add_column(col)
    for outcome, n in report["summary"]["outcomes"].items():
        if not n:
            continue
        these = [r for r in reqs if r["outcome"] == outcome]
        problems: dict[str, int] = {}
        for r in these:
            for p in r["problems"]:
                problems[p] = problems.get(p, 0) + 1
        table.add_row(Text(outcome, style=OUTCOME_STYLE.get(outcome, "")), str(n),
                      ", ".join(f"{p} {k}" for p, k in sorted(problems.items())) or "-",
                      ", ".join(r["request_id"] for r in these[:3]) + (" ..." if len(these) > 3 else ""))
    c.print()
    c.print(table)
    troubled = [r for r in reqs if r["outcome"] == "stuck" or r["problems"]]
    if report.get("request") is not None:
        troubled = reqs
    for r in troubled[:MAX_STORIES]:
        c.print()
        _story(c, r)
    if len(troubled) > MAX_STORIES:
        c.print(f"\n{len(troubled) - MAX_STORIES} more requests with problems: see --format json")
    out = c.file.getvalue()  # type: ignore[attr-defined]
    return "\n".join(ln.rstrip() for ln in out.splitlines()) + "\n"
