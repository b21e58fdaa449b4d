"""Bad input: one warning each, the rest analysed, nothing imported or run."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from kvflowmap.api import Request, analyse
from kvflowmap.cli import main


def test_bad_files_are_named_and_the_rest_is_analysed(tree) -> None:
    root = tree({
        "pkg/__init__.py": "",
        "pkg/good.py": "def ok():\n    return 1\n",
        "pkg/syntax.py": "def broken(:\n    pass\n",
        "pkg/nulls.py": b"x = 1\n\0\n",
        "pkg/latin.py": b"# caf\xe9\nx = 1\n",
    })
    a = analyse(Request(sources=[str(root)]))
    text = "\n".join(a.warnings)
    assert "pkg.good.ok" in a.graph
    assert f"{root / 'pkg/syntax.py'}:1: syntax error" in text
    assert f"{root / 'pkg/nulls.py'}:2: contains null bytes" in text
    assert f"{root / 'pkg/latin.py'}:1: not UTF-8" in text


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_unreadable_file(tree) -> None:
    root = tree({"pkg/__init__.py": "", "pkg/secret.py": "x = 1\n"})
    (root / "pkg/secret.py").chmod(0)
    a = analyse(Request(sources=[str(root)]))
    assert any("secret.py:0: cannot read" in w for w in a.warnings)


def test_missing_src_exits_2(tmp_path: Path, capsys) -> None:
    assert main(["graph", str(tmp_path / "nope"), "--format", "json"]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_symlink_loop_ends(tree) -> None:
    root = tree({"pkg/__init__.py": "", "pkg/a.py": "def f():\n    pass\n"})
    (root / "pkg" / "loop").symlink_to(root / "pkg", target_is_directory=True)
    a = analyse(Request(sources=[str(root)]))
    assert "pkg.a.f" in a.graph


def test_analysed_code_is_never_imported_or_run(tree, tmp_path: Path) -> None:
    marker = tmp_path / "was_run"
    evil = f"open({str(marker)!r}, 'w').write('ran')\n"
    root = tree({"evil/__init__.py": evil, "evil/mod.py": evil + "def f():\n    pass\n",
                 "setup.py": evil, "conftest.py": evil})
    assert main(["graph", str(root), "--format", "json", "-q", "--full"]) == 0
    assert not marker.exists()


def test_pep263_coding_declaration_is_honoured(tree) -> None:
    root = tree({
        "pkg/__init__.py": "",
        "pkg/latin1.py": b"# -*- coding: latin-1 -*-\nNAME = 'caf\xe9'\n\ndef f():\n    return NAME\n",
        "pkg/unknown.py": b"# -*- coding: no-such-codec -*-\nx = 1\n",
    })
    a = analyse(Request(sources=[str(root)]))
    assert "pkg.latin1.f" in a.graph
    assert not any("latin1.py" in w for w in a.warnings)
    assert any(f"{root / 'pkg/unknown.py'}:" in w and "encoding declaration" in w
               for w in a.warnings)


def test_a_fifo_named_py_is_skipped_not_waited_on(tree) -> None:
    root = tree({"pkg/__init__.py": "", "pkg/good.py": "def ok():\n    return 1\n"})
    os.mkfifo(root / "pkg/f.py")
    # A blocking open would wait for a writer forever: fail in 60 s instead.
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("the analysis blocked on the FIFO"))
    signal.alarm(60)
    try:
        a = analyse(Request(sources=[str(root)]))
        # check reports the skipped file and reads its suppressions: no open() on it
        from kvflowmap.cli import main

        assert main(["check", str(root), "-q", "-f", "json"]) in (0, 1)
    finally:
        signal.alarm(0)
    assert "pkg.good.ok" in a.graph
    assert any("f.py" in w and "FIFO" in w for w in a.warnings)


@pytest.mark.parametrize("args", [["check", "-o", "{missing}/x.sarif"],
                                  ["check", "--write-baseline", "{missing}/b.json"],
                                  ["graph", "-o", "{missing}/x.svg"],
                                  ["states", "-o", "{missing}/s.txt"],
                                  ["lifecycle", "-o", "{missing}/l.txt"],
                                  ["docs", "-o", "{file}"]])
def test_unwritable_outputs_fail_before_any_analysis(tmp_path, monkeypatch, capsys, args) -> None:
    import kvflowmap.commands.memo_run as memo_run

    (tmp_path / "a_file").write_text("x")
    fill = {"missing": str(tmp_path / "nowhere"), "file": str(tmp_path / "a_file")}
    monkeypatch.setattr(memo_run, "run_memoised", lambda *a, **k: pytest.fail("analysed"))
    from kvflowmap.cli import main

    assert main([args[0], str(tmp_path), *(a.format(**fill) for a in args[1:])]) == 2
    err = capsys.readouterr().err
    assert "cannot write" in err and (fill["missing"] in err or fill["file"] in err)
