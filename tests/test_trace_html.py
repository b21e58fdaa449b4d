"""The trace HTML page's filters: the page has what its script reads (a
structural check, always), and the script itself, run by Node.js against
the page's own requests, shows the ones a filter by id and outcome should
(skipped without ``node``; ``.ci/run`` installs Debian's ``nodejs``)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from kvflowmap.trace.code import CodeIndex
from kvflowmap.trace.output_html import render_html
from kvflowmap.trace.run import trace
from tests.trace_support import connector_index
from tests.test_trace_unit import CONNECTOR, _write, story_lines

IDS = ("cmpl-AbC-0001", "cmpl-abd-0002", "chat-xyz-0003", "cmpl-abc-0004")


class _Page(HTMLParser):
    """The elements of the page the filter script touches."""

    def __init__(self) -> None:
        super().__init__()
        self.by_id: dict[str, tuple[str, dict[str, str | None]]] = {}
        self.reqs: list[dict[str, str | None]] = []
        self.options: list[str | None] = []
        self.scripts: list[str] = []
        self._in: str | None = None
        self._text: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.by_id[str(a["id"])] = (tag, a)
        if "req" in (a.get("class") or "").split():
            self.reqs.append(a)
        if tag == "option" and self._in == "o":
            self.options.append(a.get("value"))
        if tag == "select":
            self._in = a.get("id")
        if tag in ("script", "span") and (tag == "script" or a.get("id")):
            self._in = "script" if tag == "script" else a.get("id")
            self._text[self._in or ""] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self.scripts.append(self._text.get("script", ""))
        if tag in ("script", "select", "span"):
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in in self._text:
            self._text[self._in or ""] += data

    def text(self, element_id: str) -> str:
        return self._text.get(element_id, "")


@pytest.fixture(scope="module")
def code(tmp_path_factory) -> CodeIndex:
    return connector_index(tmp_path_factory.mktemp("tinyhtml"), "tiny", CONNECTOR)


@pytest.fixture(scope="module")
def page(code: CodeIndex, tmp_path_factory) -> _Page:
    lines = [ln for n, rid in enumerate(IDS) for ln in story_lines(rid, 3 * n, finish=n % 2 == 0)]
    report = trace(code, [_write(tmp_path_factory.mktemp("log"), lines)])
    p = _Page()
    p.feed(render_html(report))
    return p


def test_the_page_has_what_the_filter_script_reads(page: _Page) -> None:
    (script,) = page.scripts
    # every element the script looks up by id is on the page, of the kind it reads
    looked_up = set(re.findall(r"getElementById\('(\w+)'\)", script))
    assert looked_up == {"q", "o", "n"}
    assert page.by_id["q"][0] == "input" and page.by_id["q"][1].get("oninput") == "f()"
    assert page.by_id["o"][0] == "select" and page.by_id["o"][1].get("onchange") == "f()"
    assert "function f()" in script
    # the rows it filters: the selector it walks, each with the data it compares
    assert re.findall(r"querySelectorAll\('([^']+)'\)", script) == [".req"]
    assert set(re.findall(r"dataset\.(\w+)", script)) == {"id", "outcome"}
    assert sorted(r["data-id"] or "" for r in page.reqs) == sorted(IDS)
    outcomes = {r["data-outcome"] for r in page.reqs}
    assert outcomes == {"finished", "stuck"}
    # one option per outcome present, and "all"; the count starts at every row
    assert page.options[0] == "" and set(page.options[1:]) == outcomes
    assert page.text("n") == str(len(IDS))


def _expected(q: str, o: str, reqs: list[dict[str, str | None]]) -> list[str]:
    return [str(r["data-id"]) for r in reqs
            if (not q or q.lower() in str(r["data-id"]).lower()) and (not o or r["data-outcome"] == o)]


_HARNESS = """
const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const rows = input.rows.map(r => ({dataset: {id: r.id, outcome: r.outcome}, style: {display: ''}}));
const els = {q: {value: ''}, o: {value: ''}, n: {textContent: ''}};
globalThis.document = {
  getElementById: k => { if (!(k in els)) throw new Error('no element ' + k); return els[k]; },
  querySelectorAll: s => { if (s !== '.req') throw new Error('selector ' + s); return rows; },
};
(0, eval)(input.script);
const out = input.cases.map(([q, o]) => {
  els.q.value = q; els.o.value = o; f();
  return {shown: rows.filter(r => r.style.display !== 'none').map(r => r.dataset.id),
          n: String(els.n.textContent)};
});
console.log(JSON.stringify(out));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js (Debian's nodejs)")
def test_the_filter_script_shows_what_it_should(page: _Page) -> None:
    (script,) = page.scripts
    cases = [("", ""), ("abc", ""), ("ABD", ""), ("", "stuck"), ("", "finished"),
             ("cmpl", "stuck"), ("nothing", ""), ("chat", "finished"), ("", "")]
    rows = [{"id": r["data-id"], "outcome": r["data-outcome"]} for r in page.reqs]
    run = subprocess.run(["node", "-e", _HARNESS], input=json.dumps(
        {"script": script, "rows": rows, "cases": cases}), capture_output=True, text=True,
        timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    want = [{"shown": (e := _expected(q, o, page.reqs)), "n": str(len(e))} for q, o in cases]
    assert got == want
    # the cases tell filters apart: by id (case-insensitive), by outcome, both, none
    assert len({json.dumps(w["shown"]) for w in want}) >= 6
