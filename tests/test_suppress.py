"""Inline suppressions: parsing, applying, and reporting bad ones."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kvflowmap.check.model import Finding
from kvflowmap.check.suppress import (
    BAD_SUPPRESSION, apply_suppressions, parse_suppressions, read_suppressions)

KNOWN = {"parked-released", "no-blocking", "paired-lease"}


def _write(tmp_path: Path, source: str, name: str = "w.py") -> Path:
    path = tmp_path / "root" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
    return path


def _f(path: Path, line: int, rule: str = "parked-released") -> Finding:
    return Finding(rule, "error", "msg", path.name, line, 5, "pkg.w.f", root="conn",
                   abspath=str(path), anchor=f"a{line}")


def test_parse_forms():
    sups = parse_suppressions(textwrap.dedent("""\
        x = 1  # kvflowmap: ignore[parked-released] -- handed over to the engine
        # kvflowmap: ignore[no-blocking, paired-lease]   --   bounded by timeout
        y = 2  #kvflowmap:ignore[a,a , b]
        z = "# kvflowmap: ignore[in-string] -- not a comment"
        # kvflowmap: ignore -- everything
        # kvflowmap: ignore[] -- nothing
        """))
    assert [(s.line, s.rule_ids, s.reason, s.own_line) for s in sups] == [
        (1, ("parked-released",), "handed over to the engine", False),
        (2, ("no-blocking", "paired-lease"), "bounded by timeout", True),
        (3, ("a", "b"), "", False),
        (5, (), "", True),
        (6, (), "nothing", True),
    ]
    assert sups[0].column == 8
    assert sups[3].malformed and sups[4].malformed


def test_parse_falls_back_to_regex_on_tokenize_error():
    sups = parse_suppressions('def f(:\n    x = """unterminated\n# kvflowmap: ignore[r] -- why\n')
    assert [(s.line, s.rule_ids, s.reason) for s in sups] == [(3, ("r",), "why")]


def test_read_unreadable_file(tmp_path: Path):
    assert read_suppressions(str(tmp_path / "missing.py")) == []
    assert read_suppressions(str(tmp_path)) == []


def test_same_line_and_line_above(tmp_path: Path):
    path = _write(tmp_path, """
        def f(self):
            self._p[k] = 1  # kvflowmap: ignore[parked-released] -- released by the engine
            # kvflowmap: ignore[no-blocking] -- bounded wait
            time.sleep(1)
            other()
        """)
    same, above, after = _f(path, 2), _f(path, 4, "no-blocking"), _f(path, 5, "no-blocking")
    kept, suppressed, problems = apply_suppressions([same, above, after], KNOWN, [str(path)])
    assert kept == [after]
    assert [f.line for f in suppressed] == [2, 4]
    assert all(f.suppressed for f in suppressed)
    assert dict(suppressed[0].extra)["suppression"] == "released by the engine"
    assert problems == []


def test_trailing_comment_does_not_cover_next_line(tmp_path: Path):
    path = _write(tmp_path, """
        a = 1  # kvflowmap: ignore[parked-released] -- reason
        b = 2
        """)
    kept, suppressed, problems = apply_suppressions([_f(path, 2)], KNOWN, [str(path)])
    assert kept and not suppressed
    assert [p.message for p in problems] == [
        "suppression of 'parked-released' suppresses nothing here: remove it"]


def test_other_rule_not_suppressed(tmp_path: Path):
    path = _write(tmp_path, "x = 1  # kvflowmap: ignore[no-blocking] -- why\n")
    kept, suppressed, _ = apply_suppressions([_f(path, 1)], KNOWN, [str(path)])
    assert len(kept) == 1 and not suppressed


def test_problems_reported(tmp_path: Path):
    path = _write(tmp_path, """
        a = 1  # kvflowmap: ignore[parked-released]
        b = 2  # kvflowmap: ignore[parked-releasd] -- typo
        # kvflowmap: ignore -- everything
        c = 3
        """)
    kept, suppressed, problems = apply_suppressions([_f(path, 1)], KNOWN, [str(path)],
                                                    roots={"conn": str(path.parent)})
    assert len(suppressed) == 1 and not kept
    assert all(p.rule == BAD_SUPPRESSION and p.severity == "warning" for p in problems)
    by_line = {p.line: p.message for p in problems}
    assert "gives no reason" in by_line[1]
    assert "unknown rule 'parked-releasd'" in by_line[2] and "did you mean 'parked-released'" \
        in by_line[2]
    assert "names no rule" in by_line[3] and "ignore[rule-id] -- reason" in by_line[3]
    assert {(p.file, p.root, p.abspath) for p in problems} == {("w.py", "conn", str(path))}
    assert len({p.fingerprint for p in problems}) == 3


def test_unused_only_in_analysed_files_and_active_rules(tmp_path: Path):
    path = _write(tmp_path, """
        x = 1  # kvflowmap: ignore[parked-released, no-blocking] -- why
        """)
    # not analysed: a file only known through a finding is not reported as unused
    _, _, problems = apply_suppressions([_f(path, 1)], KNOWN, [])
    assert problems == []
    _, _, problems = apply_suppressions([_f(path, 1)], KNOWN, [str(path)])
    assert [p.message for p in problems] == [
        "suppression of 'no-blocking' suppresses nothing here: remove it"]
    # a rule that did not run (--select) cannot be judged unused
    _, _, problems = apply_suppressions([_f(path, 1)], KNOWN, [str(path)],
                                        active_rule_ids={"parked-released"})
    assert problems == []


def test_analysed_file_without_findings(tmp_path: Path):
    path = _write(tmp_path, "# kvflowmap: ignore[paired-lease] -- why\nx = 1\n", "pkg/m.py")
    root = str(tmp_path / "root")
    kept, suppressed, problems = apply_suppressions([], KNOWN, [str(path)],
                                                    roots={"conn": root})
    assert kept == suppressed == []
    assert [(p.file, p.root, p.line, p.column) for p in problems] == [("pkg/m.py", "conn", 1, 1)]


def test_bad_suppression_findings_are_not_suppressible(tmp_path: Path):
    path = _write(tmp_path, "x = 1  # kvflowmap: ignore[bad-suppression] -- no\n")
    bad = Finding(BAD_SUPPRESSION, "warning", "m", "w.py", 1, 1, "", abspath=str(path))
    kept, suppressed, _ = apply_suppressions([bad], KNOWN | {BAD_SUPPRESSION}, [str(path)])
    assert kept == [bad] and suppressed == []


def test_unreadable_finding_file_is_kept(tmp_path: Path):
    missing = tmp_path / "gone.py"
    kept, suppressed, problems = apply_suppressions([_f(missing, 1)], KNOWN, [str(missing)])
    assert len(kept) == 1 and suppressed == [] and problems == []


@pytest.mark.parametrize("source", ["\ufeffx = 1  # kvflowmap: ignore[no-blocking] -- bom\n",
                                    "# -*- coding: latin-1 -*-\ns = 'é'  # kvflowmap: "
                                    "ignore[no-blocking] -- latin\n"])
def test_encodings(tmp_path: Path, source: str):
    path = tmp_path / "enc.py"
    encoding = "latin-1" if "latin" in source else "utf-8"
    path.write_bytes(source.encode(encoding))
    sups = read_suppressions(str(path))
    assert [s.rule_ids for s in sups] == [("no-blocking",)]
