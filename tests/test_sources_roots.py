"""SRC arguments become import roots: two parts of one package are both the subject."""

from __future__ import annotations

from pathlib import Path

from kvflowmap.api import Request, analyse
from kvflowmap.request import make_roots


def _package(tmp_path: Path) -> Path:
    pkg = tmp_path / "pkg" / "conn"
    (pkg / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "worker.py").write_text("class Worker:\n    def run(self):\n        return 1\n")
    (pkg / "facade.py").write_text(
        "from pkg.conn.sub.worker import Worker\n\n\nclass Facade:\n"
        "    def run(self):\n        return Worker().run()\n")
    (pkg / "other.py").write_text("def unrelated():\n    return 2\n")
    return pkg


def test_two_srcs_in_one_package_are_one_root_with_both_parts(tmp_path: Path) -> None:
    pkg = _package(tmp_path)
    roots = make_roots(Request(sources=[str(pkg / "sub"), str(pkg / "facade.py")]))
    assert len(roots) == 1
    assert roots[0].subject and set(roots[0].only) == {pkg / "sub", pkg / "facade.py"}
    assert roots[0].label == "pkg.conn"  # the package both parts are in


def test_every_src_is_subject_whatever_their_order(tmp_path: Path) -> None:
    pkg = _package(tmp_path)
    for order in ([pkg / "sub", pkg / "facade.py"], [pkg / "facade.py", pkg / "sub"]):
        a = analyse(Request(sources=[str(p) for p in order], use_cache=False))
        subject = {n for n, d in a.graph.nodes(data=True) if d.get("subject")}
        assert "pkg.conn.facade.Facade.run" in subject
        assert "pkg.conn.sub.worker.Worker.run" in subject
        assert "pkg.conn.other.unrelated" not in subject  # not asked for
