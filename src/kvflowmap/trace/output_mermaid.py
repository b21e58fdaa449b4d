"""``--format mermaid``: a sequence diagram per request across the
processes it was logged in (one participant per process, a note per line),
then a gantt chart of request lifetimes by outcome."""

from __future__ import annotations

import re
from typing import Any

MAX_SEQUENCES = 20
MAX_GANTT = 200


def _safe(text: str) -> str:
    """Text mermaid accepts inside a note or a task name."""
    return re.sub(r"[;:#{}<>\"`]", " ", text).strip()[:80]


def _pid(name: str) -> str:
    return "p_" + re.sub(r"\W", "_", name)


def sequence(r: dict[str, Any]) -> list[str]:
    """One request's sequence diagram."""
    out = ["sequenceDiagram", f"    title {_safe(r['request_id'])} ({r['outcome']})"]
    procs = list(dict.fromkeys(f"{e['process'] or '-'} {e['pid']}" for e in r["events"]))
    for p in procs:
        out.append(f"    participant {_pid(p)} as {_safe(p)}")
    prev = None
    for e in r["events"]:
        p = _pid(f"{e['process'] or '-'} {e['pid']}")
        fn = ".".join(e["function"].split(".")[-2:]) or "(unknown line)"
        if prev is not None and prev != p:
            out.append(f"    {prev}->>{p}: {_safe(fn)}")
        out.append(f"    Note over {p}: {_safe(e['ts'])} {_safe(fn)} {_safe(e['where'])}")
        prev = p
    for c in r["candidates"][:1]:
        if prev is not None:
            out.append(f"    Note over {prev}: stopped? {_safe(c['function'].split('.')[-1])} {_safe(c['where'])}")
    return out


def gantt(report: dict[str, Any]) -> list[str]:
    """Request lifetimes, one section per outcome."""
    out = ["gantt", "    title request lifetimes", "    dateFormat MM-DD HH:mm:ss",
           "    axisFormat %H:%M:%S"]
    by: dict[str, list[dict[str, Any]]] = {}
    for r in report["requests"][:MAX_GANTT]:
        if r["first_ts"] and r["last_ts"]:
            by.setdefault(r["outcome"], []).append(r)
    for outcome, rs in by.items():
        out.append(f"    section {outcome}")
        for r in rs:
            tag = "crit, " if outcome in ("stuck", "failed") else ""
            end = r["last_ts"] if r["last_ts"] != r["first_ts"] else r["first_ts"]
            out.append(f"    {_safe(r['request_id'])} :{tag}{r['first_ts']}, {end}")
    return out


def render_mermaid(report: dict[str, Any]) -> str:
    """Mermaid text: the sequences (troubled requests first), then the gantt,
    as fenced blocks so a Markdown viewer draws each."""
    reqs = sorted(report["requests"], key=lambda r: (r["outcome"] not in ("stuck", "failed"),
                                                     r["epoch"], r["request_id"]))
    blocks = [sequence(r) for r in reqs[:MAX_SEQUENCES]] + [gantt(report)]
    return "\n".join("```mermaid\n" + "\n".join(b) + "\n```\n" for b in blocks)
