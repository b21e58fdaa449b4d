"""``compat`` as data: JSON of the matrix or the diff, Markdown (a support
table to paste into a connector's README, checked with ``--check``) and
SARIF for the findings on the newest release."""

from __future__ import annotations

import json

from kvflowmap import __version__
from kvflowmap.compat.diff import Change
from kvflowmap.compat.findings import Matrix
from kvflowmap.compat.output_text import class_label
from kvflowmap.protocol import version_key

BEGIN, END = "<!-- kvflowmap compat -->", "<!-- /kvflowmap compat -->"
_MD = {"ok": "✅", "guarded": "✅ guarded", "warn": "⚠️", "fail": "❌"}
_SARIF_LEVEL = {"error": "error", "warning": "warning", "guarded": "note", "note": "note"}


def matrix_json(m: Matrix) -> str:
    """The matrix as indented, key-sorted JSON."""
    return json.dumps(m.to_json(), indent=2, sort_keys=True) + "\n"


def diff_json(a: str, b: str, changes: list[Change]) -> str:
    """The diff as indented JSON."""
    return json.dumps({"from": a, "to": b, "changes": [c.to_json() for c in changes]},
                      indent=2, sort_keys=True) + "\n"


def matrix_markdown(m: Matrix) -> str:
    """The support table between ``BEGIN``/``END`` markers, then the reasons:
    one numbered note per finding, the releases it holds on listed once."""
    head = ["class", *(f"vLLM {r}" for r in m.releases)]
    rows = [f"| {' | '.join(head)} |", f"|{'---|' * len(head)}"]
    groups = m.grouped(("error", "warning"))
    number = {id(f): n for n, fs in enumerate(groups, 1) for f in fs}
    for k in m.classes:
        cells = []
        for r in m.releases:
            cell = m.cell(k, r)
            refs = [str(number[id(f)]) for f in cell.findings if id(f) in number]
            cells.append(_MD[cell.status] + (f" ({', '.join(refs)})" if refs else ""))
        rows.append(f"| `{class_label(k, m.classes)}` | {' | '.join(cells)} |")
    lines = [f"{n}. `{class_label(fs[-1].cls, m.classes)}` on vLLM "
             f"{', '.join(f.release for f in fs)}: {fs[-1].message} (`{fs[-1].where}`)"
             for n, fs in enumerate(groups, 1)]
    body = "\n".join(rows) + "\n" + ("\n" + "\n".join(lines) + "\n" if lines else "")
    return f"{BEGIN}\n{body}{END}\n"


def stale(expected: str, committed: str) -> bool:
    """Whether the committed text (a whole file, or the block between the
    markers in it, e.g. a README section) differs from ``expected``."""
    if BEGIN in committed and END in committed:
        start = committed.index(BEGIN)
        end = committed.index(END, start) + len(END)
        return committed[start:end].strip() != expected.strip()
    return committed.strip() != expected.strip()


def matrix_sarif(m: Matrix) -> str:
    """SARIF 2.1.0 of the findings (notes left out) on the newest release."""
    newest = max(m.releases, key=version_key) if m.releases else ""
    results: list[dict] = []
    ids: set[str] = set()
    for f in m.findings(newest):
        if f.severity == "note":
            continue
        file, _, line = f.where.rpartition(":")
        ids.add(f"compat/{f.kind}")
        results.append({
            "ruleId": f"compat/{f.kind}", "level": _SARIF_LEVEL[f.severity],
            "message": {"text": f"{class_label(f.cls, m.classes)} on vLLM {newest}: {f.message}"},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": file},
                                                "region": {"startLine": int(line or 1)}}}]})
    rules = sorted(ids)
    run = {"tool": {"driver": {"name": "kvflowmap compat", "version": __version__,
                               "rules": [{"id": r} for r in rules]}},
           "results": results}
    return json.dumps({"version": "2.1.0", "$schema":
                       "https://json.schemastore.org/sarif-2.1.0.json", "runs": [run]},
                      indent=2, sort_keys=True) + "\n"


def diff_markdown(a: str, b: str, changes: list[Change]) -> str:
    """The diff as a Markdown table."""
    rows = [f"| section | change | subject | vLLM {a} | vLLM {b} | detail |",
            "|---|---|---|---|---|---|"]
    for c in changes:
        old = " ".join(p for p in (f"`{c.old}`" if c.old else "", str(c.old_where or "")) if p)
        new = " ".join(p for p in (f"`{c.new}`" if c.new else "", str(c.new_where or "")) if p)
        detail = c.detail.replace("|", "\\|")
        rows.append(f"| {c.section} | {c.kind} | `{c.subject}` | {old or '—'} | {new or '—'} | "
                    f"{detail} |")
    return "\n".join(rows) + "\n"
