"""``--format html``: one self-contained page (no network): the summary, a
timeline of every request (a bar from its first to its last line, coloured
by outcome), filters by id and outcome, and each request's lines linking to
the code that wrote them (the link templates of the other commands)."""

from __future__ import annotations

import html
import json
from typing import Any

from kvflowmap.trace.output_text import summary_lines
from kvflowmap.trace.story import seconds

COLOURS = {"stuck": "#d62728", "failed": "#ff7f0e", "aborted": "#bcbd22", "finished": "#2ca02c",
           "preempted": "#17becf", "open": "#999999"}

_STYLE = """
body{font:13px/1.4 system-ui,sans-serif;margin:1em 2em;color:#222}
h1{font-size:18px} .sum{color:#555;white-space:pre-wrap;font-family:monospace}
#filters{margin:1em 0;position:sticky;top:0;background:#fff;padding:.5em 0}
.req{border-top:1px solid #ddd;padding:.3em 0}
.req summary{cursor:pointer} .bar{display:inline-block;height:9px;border-radius:2px;vertical-align:middle}
.track{display:inline-block;width:360px;height:9px;background:#f3f3f3;position:relative;margin-right:.6em}
.track .bar{position:absolute;top:0}
.oc{font-weight:bold} table{border-collapse:collapse;margin:.3em 0 .3em 1em}
td{padding:1px 6px;vertical-align:top;font-family:monospace;font-size:12px} .dim{color:#888}
.cand{margin-left:1em} .prob{color:#d62728}
"""

_SCRIPT = """
function f(){var q=document.getElementById('q').value.toLowerCase();
var o=document.getElementById('o').value;var n=0;
document.querySelectorAll('.req').forEach(function(e){
var ok=(!q||e.dataset.id.toLowerCase().indexOf(q)>=0)&&(!o||e.dataset.outcome===o);
e.style.display=ok?'':'none';if(ok)n++;});document.getElementById('n').textContent=n;}
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _link(url: str | None, text: str) -> str:
    return f'<a href="{_e(url)}">{_e(text)}</a>' if url else _e(text)


def render_html(report: dict[str, Any]) -> str:
    """The page."""
    reqs = report["requests"]
    times = [t for r in reqs for t in (seconds(r["first_ts"]) if r["first_ts"] else None,
                                       seconds(r["last_ts"]) if r["last_ts"] else None) if t is not None]
    t0, t1 = (min(times), max(times)) if times else (0.0, 1.0)
    span = max(t1 - t0, 1.0)
    outcomes = [o for o, n in report["summary"]["outcomes"].items() if n]
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           "<title>kvflowmap trace</title>", f"<style>{_STYLE}</style>", f"<script>{_SCRIPT}</script>",
           "</head><body>", "<h1>kvflowmap trace: " + _e(", ".join(report["logs"])) + "</h1>",
           '<div class="sum">' + _e("\n".join(summary_lines(report))) + "</div>",
           '<div id="filters">request id <input id="q" oninput="f()"> outcome <select id="o" onchange="f()">'
           '<option value="">all</option>'
           + "".join(f'<option value="{_e(o)}">{_e(o)} ({report["summary"]["outcomes"][o]})</option>'
                     for o in outcomes)
           + f'</select> <span id="n">{len(reqs)}</span> shown</div>']
    for r in reqs:
        a = seconds(r["first_ts"]) if r["first_ts"] else None
        b = seconds(r["last_ts"]) if r["last_ts"] else None
        left = 0.0 if a is None else (a - t0) / span * 100
        width = 0.5 if a is None or b is None else max(0.5, (b - a) / span * 100)
        colour = COLOURS.get(r["outcome"], "#999")
        opened = " open" if r["outcome"] == "stuck" else ""
        out.append(f'<details class="req" data-id="{_e(r["request_id"])}" data-outcome="{_e(r["outcome"])}"{opened}>')
        out.append(f'<summary><span class="track"><span class="bar" style="left:{left:.2f}%;'
                   f'width:{width:.2f}%;background:{colour}"></span></span>'
                   f'<span class="oc" style="color:{colour}">{_e(r["outcome"])}</span> '
                   f'{_e(r["request_id"])}' + (f' <span class="dim">epoch {r["epoch"]}</span>' if r["epoch"] else "")
                   + f' <span class="dim">{_e(r["first_ts"])} → {_e(r["last_ts"])}, {r["lines"]} lines</span>'
                   + "".join(f' <span class="prob">{_e(p)}</span>' for p in r["problems"]) + "</summary>")
        states = " → ".join(s["state"] for s in r["states"]) or "-"
        out.append(f'<div class="dim">states {_e(states)}; hooks {_e(", ".join(r["hooks"]) or "-")}; '
                   f'reports {_e(json.dumps(r["reports"]))}</div>')
        out.append("<table>")
        for e in r["events"]:
            out.append("<tr>" + "".join(f"<td>{c}</td>" for c in (
                _e(e["ts"]), _e(f"{e['process']} {e['pid']}"), _e(e["level"]),
                _link(e["url"], f"{'.'.join(e['function'].split('.')[-2:])} {e['where']}"),
                _e(e["match"]), _e(e.get("text") or e["message"]))) + "</tr>")
        out.append("</table>")
        if r["lines_dropped"]:
            out.append(f'<div class="dim">{r["lines_dropped"]} lines in the middle not kept</div>')
        for i, c in enumerate(r["candidates"], 1):
            out.append(f'<div class="cand">{i}. {_link(c["url"], c["function"])} '
                       f'<span class="dim">score {c["score"]}</span><br>'
                       + "<br>".join(_e("– " + why) for why in c["reasons"]) + "</div>")
        for i, c in enumerate(r.get("owed", ()), 1):
            out.append(f'<div class="cand">owed report {i}. {_link(c["url"], c["function"])}<br>'
                       + "<br>".join(_e("– " + why) for why in c["reasons"]) + "</div>")
        out.append("</details>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
