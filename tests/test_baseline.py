"""Baselines: write, load (with clear errors), and split new from known findings."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from kvflowmap.check.baseline import BaselineError, filter_new, load_baseline, write_baseline
from kvflowmap.check.model import Finding


def _f(rule: str = "parked-released", function: str = "pkg.W.start", anchor: str = "_pending",
       line: int = 10, file: str = "pkg/w.py", message: str = "id never reported") -> Finding:
    return Finding(rule, "error", message, file, line, 1, function, anchor=anchor)


def test_write_then_load_roundtrip(tmp_path: Path):
    findings = [_f(), _f(rule="no-blocking", anchor="sleep"), _f(file="a.py", function="pkg.a")]
    path = tmp_path / "baseline.json"
    assert write_baseline(path, findings) == 3
    assert load_baseline(path) == {f.fingerprint for f in findings}
    doc = json.loads(path.read_text())
    assert doc["version"] == 1
    entries = doc["findings"]
    assert [e["file"] for e in entries] == ["a.py", "pkg/w.py", "pkg/w.py"]
    assert set(entries[0]) == {"rule", "file", "function", "fingerprint", "message"}


def test_write_is_deterministic_and_deduplicated(tmp_path: Path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    findings = [_f(), _f(rule="x"), _f()]
    write_baseline(a, findings)
    write_baseline(b, list(reversed(findings)))
    assert a.read_bytes() == b.read_bytes()
    assert len(json.loads(a.read_text())["findings"]) == 2


def test_fingerprint_survives_line_moves_not_rule_or_function():
    f = _f()
    assert dataclasses.replace(f, line=99, column=7).fingerprint == f.fingerprint
    assert dataclasses.replace(f, function="pkg.W.other").fingerprint != f.fingerprint
    assert dataclasses.replace(f, rule="other").fingerprint != f.fingerprint


def test_filter_new_splits_and_keeps_order(tmp_path: Path):
    old = [_f(), _f(rule="no-blocking", anchor="sleep")]
    path = tmp_path / "b.json"
    write_baseline(path, old)
    moved = dataclasses.replace(old[0], line=42)
    fresh = _f(anchor="_pending_saves")
    new, known = filter_new([fresh, moved, old[1]], load_baseline(path))
    assert new == [fresh]
    assert known == [moved, old[1]]


def test_filter_new_empty_baseline():
    findings = [_f(), _f(rule="y")]
    assert filter_new(findings, set()) == (findings, [])


@pytest.mark.parametrize("content, expected", [
    ("{not json", "not valid JSON (line 1"),
    ("[]", "expected a JSON object"),
    ('{"version": 7, "findings": []}', "unsupported version 7"),
    ('{"version": 1, "findings": {}}', "'findings' must be a list"),
    ('{"version": 1, "findings": [{"rule": "x"}]}', "findings[0] has no 'fingerprint'"),
    ('{"version": 1, "findings": ["abc"]}', "findings[0] has no 'fingerprint'"),
])
def test_malformed_baseline_names_the_file(tmp_path: Path, content: str, expected: str):
    path = tmp_path / "bad-baseline.json"
    path.write_text(content)
    with pytest.raises(BaselineError) as err:
        load_baseline(path)
    assert str(path) in str(err.value) and expected in str(err.value)
    assert "--write-baseline" in str(err.value)


def test_missing_and_unreadable_baseline(tmp_path: Path):
    with pytest.raises(BaselineError, match="file not found"):
        load_baseline(tmp_path / "nope.json")
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(BaselineError, match="bin.json"):
        load_baseline(tmp_path / "bin.json")
    with pytest.raises(BaselineError, match="cannot read"):
        load_baseline(tmp_path)
