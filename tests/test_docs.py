"""``kvflowmap docs`` on the minivllm fixture: golden pages, determinism,
links, ``--check``."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from kvflowmap.check.stubs import stub_root
from kvflowmap.cli import main
from kvflowmap.docs import DocsOptions, check_pages, generate, write_pages

try:  # tests/ may or may not be a package
    from tests.navdocs_support import (MINIVLLM, TEMPLATE, assert_golden, fixed_rules,
                                       minivllm_analysis)
except ImportError:
    from navdocs_support import MINIVLLM, TEMPLATE, assert_golden, fixed_rules, minivllm_analysis

PAGES = {"README.md", "lifecycle.md", "request-lifecycle.md", "kv-load.md", "kv-save.md",
         "log-markers.md", "rules.md", "connectors/miniflow.connector.MiniKVConnector.md"}
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _pages(out: Path, template: str | None = TEMPLATE, svg: bool = False) -> dict[str, bytes]:
    return generate(minivllm_analysis(), DocsOptions(out_dir=out, link_template=template,
                                                     rules=fixed_rules(), svg=svg))


def test_docs_golden(tmp_path: Path) -> None:
    pages = _pages(tmp_path)
    assert set(pages) == PAGES
    for rel, data in pages.items():
        if rel != "rules.md":  # rendered by the rule catalogue, tested there
            assert_golden("docs/" + rel, data)


def test_docs_content(tmp_path: Path) -> None:
    pages = {k: v.decode() for k, v in _pages(tmp_path).items()}
    life = pages["lifecycle.md"]
    assert "WAITING_FOR_REMOTE_KVS --> WAITING : Scheduler._handle_blocked_waiting_request" in life
    assert "[t-states](rules.md#t-states)" in life.replace("`", "")
    load = pages["kv-load.md"]
    assert "```mermaid\nsequenceDiagram" in load
    for name in ("get_num_new_matched_tokens", "start_load_kv", "finished_recving",
                 "WAITING_FOR_REMOTE_KVS → WAITING"):
        assert name in load
    conn = pages["connectors/miniflow.connector.MiniKVConnector.md"]
    assert "`SchedulerConnector.get_num_new_matched_tokens`" in conn
    assert "../rules.md#t-probe" in conn and "## Base methods left to their defaults" in conn
    assert "container" in conn and "`self." in conn
    logs = pages["log-markers.md"]
    assert "`[MiniFlow] finished saves=%d loads=%d`" in logs
    assert "## start_load_kv (worker side)" in logs
    ids = pages["request-lifecycle.md"]
    assert "## Package `miniflow`" in ids and "### Containers (5)" in ids
    row = next(x for x in ids.splitlines() if x.startswith("| `SchedulerConnector._pending_loads`"))
    assert "`update_state_after_alloc` `minivllm/miniflow/connector/scheduler.py#L45`" in row
    assert "`request_finished` `minivllm/miniflow/connector/scheduler.py#L66`" in row
    assert "#### `SchedulerConnector` (`miniflow.connector.scheduler`)" in ids
    assert "`self._scheduler.request_finished` (handover :102) |" in ids
    assert "`StoreClient` (3)" in ids  # reached from hooks, moves no ids
    readme = pages["README.md"]
    assert "[Request ids in the connectors](request-lifecycle.md)" in readme
    assert "MiniKVConnector" in readme and "## Start reading here" in readme
    for rel in PAGES - {"README.md"}:
        assert f"]({rel})" in readme or rel.startswith("connectors/")


def test_request_lifecycle_caps_long_lists(tmp_path: Path) -> None:
    """Cells and name lists are cut like ``kvflowmap lifecycle``'s are long:
    the first few, then how many more."""
    from kvflowmap.docs import request_lifecycle as rl
    from kvflowmap.docs.context import DocContext
    from kvflowmap.docs.markup import Links
    from kvflowmap.nav.lifecycle_summary import (ClassRows, ContainerRow, FunctionRow, Hand,
                                                 PackageLifecycle, SiteRow)

    analysis = minivllm_analysis()
    ctx = DocContext(analysis, Links(analysis.roots, tmp_path, TEMPLATE), None, svg=False)
    owner = "miniflow.connector.scheduler.SchedulerConnector"
    adds = tuple(SiteRow("SchedulerConnector.request_finished", 60 + i,
                         "miniflow.connector.scheduler") for i in range(rl.MAX_SITES + 3))
    box = ContainerRow("SchedulerConnector._many", owner, "_many", adds, (), (), ())
    busy = FunctionRow("request_finished", "SchedulerConnector.request_finished", 64,
                       ("scheduler",), tuple(f"SchedulerConnector._c{i}" for i in range(9)),
                       (), (), tuple(Hand("handover", f"self.f{i}", 70 + i) for i in range(8)),
                       ())
    idle = tuple(FunctionRow(f"idle{i}", f"SchedulerConnector.idle{i}", 80 + i, ("scheduler",),
                             (), (), (), (), ()) for i in range(rl.MAX_IDLE + 2))
    pkg = PackageLifecycle("miniflow", (box,), (ClassRows(owner, True, (busy, *idle)),))
    text = rl.request_lifecycle_page(ctx, [pkg]).decode()
    row = next(x for x in text.splitlines() if x.startswith("| `SchedulerConnector._many`"))
    assert row.count("scheduler.py#L") == rl.MAX_SITES and "(+3 more)" in row
    assert "`request_finished` `minivllm/miniflow/connector/scheduler.py#L60`" in row
    fn = next(x for x in text.splitlines() if x.startswith("| `request_finished`"))
    assert "`_c5`<br>(+3 more)" in fn and "`self.f5` (handover :75)<br>(+2 more)" in fn
    assert f"`idle{rl.MAX_IDLE - 1}`, (+2 more)." in text
    assert "could not be built" in rl.request_lifecycle_page(ctx, None).decode()


def test_docs_deterministic(tmp_path: Path) -> None:
    """Two analyses, two generations (SVGs included): the same bytes."""
    from kvflowmap.api import Request, analyse

    first = _pages(tmp_path, svg=True)
    again = analyse(Request(sources=[str(MINIVLLM)], context=[str(stub_root())],
                            use_cache=False))
    second = generate(again, DocsOptions(out_dir=tmp_path, link_template=TEMPLATE,
                                         rules=fixed_rules(), svg=True))
    assert first.keys() == second.keys()
    assert [k for k in first if first[k] != second[k]] == []
    if "flow.svg" in first:  # Graphviz installed
        assert b"graphviz version" not in first["flow.svg"]
        assert str(MINIVLLM).encode() not in first["flow.svg"]


def test_no_machine_paths_with_template(tmp_path: Path) -> None:
    for rel, data in _pages(tmp_path, svg=True).items():
        for path in (str(MINIVLLM), str(stub_root()), str(tmp_path)):
            assert path.encode() not in data, (rel, path)


def test_relative_links_resolve(tmp_path: Path) -> None:
    """Without a template, links are relative to each page and land on a
    real line of a real file; links between pages land on a page."""
    pages = _pages(tmp_path, template=None)
    write_pages(pages, tmp_path)
    seen = 0
    for rel, data in pages.items():
        for target in MD_LINK.findall(data.decode()):
            if target.startswith(("http", "#")):
                continue
            path, _, anchor = target.partition("#")
            dest = (tmp_path / rel).parent / path
            assert dest.is_file(), (rel, target)
            if anchor.startswith("L") and anchor[1:].isdigit():
                n = len(dest.read_text(encoding="utf-8").splitlines())
                assert 1 <= int(anchor[1:]) <= n, (rel, target)
                seen += 1
    assert seen > 50


def test_write_and_check(tmp_path: Path) -> None:
    out = tmp_path / "site"
    pages = _pages(out)
    assert check_pages(pages, out) != []
    report = write_pages(pages, out)
    assert sorted(report.written) == sorted(pages)
    assert check_pages(pages, out) == []
    assert write_pages(pages, out).written == []
    (out / "lifecycle.md").write_text("edited\n")
    stale = out / "connectors" / "gone.md"
    stale.write_text("# x\n\n<!-- Generated by `kvflowmap docs`. Do not edit -->\n")
    (out / "notes.md").write_text("hand written\n")
    problems = check_pages(pages, out)
    assert problems == ["lifecycle.md: differs from the code",
                        "connectors/gone.md: no longer generated"]
    report = write_pages(pages, out)
    assert report.written == ["lifecycle.md"] and report.removed == ["connectors/gone.md"]
    assert (out / "notes.md").is_file()


def test_cli_docs_check(tmp_path: Path, capsys) -> None:
    out = tmp_path / "pages"
    args = ["docs", str(MINIVLLM), "--context", str(stub_root()), "--no-cache", "-q",
            "--out", str(out), "--link-template", TEMPLATE]
    assert main(args) == 0
    assert (out / "README.md").is_file()
    assert main([*args, "--check"]) == 0
    (out / "kv-save.md").write_text("stale\n")
    capsys.readouterr()
    assert main([*args, "--check"]) == 1
    err = capsys.readouterr().err
    assert "kv-save.md: differs from the code" in err and "1 page(s) stale" in err


def test_url_template_makes_links(tmp_path: Path) -> None:
    pages = _pages(tmp_path, template="https://code.example/{root}/blob/main/{file}#L{line}")
    readme = pages["README.md"].decode()
    assert ("[miniflow/connector/\\_\\_init\\_\\_.py:22](https://code.example/minivllm/blob/main/"
            "miniflow/connector/__init__.py#L22)") in readme  # link text escaped, the URL not


def test_bad_link_template(tmp_path: Path, capsys) -> None:
    args = ["docs", str(MINIVLLM), "--context", str(stub_root()), "--no-cache", "-q",
            "--out", str(tmp_path), "--link-template", "https://x/{repo}/{file}"]
    assert main(args) == 2
    assert "{root}, {path} (or {root_path}), {version}, {file} and {line}" in capsys.readouterr().err
    assert not (tmp_path / "README.md").exists()


def test_link_templates_take_the_same_placeholders(tmp_path: Path) -> None:
    """``{path}`` (and the old ``{root_path}``) work in ``docs`` and ``graph`` alike."""
    from kvflowmap.render.dot import _link

    roots = {"mini": "/src/mini"}
    for i, name in enumerate(("path", "root_path")):
        template = "https://h{" + name + "}/{file}#L{line}"
        assert _link(template, roots, "mini", "a.py", 3) == "https://h/src/mini/a.py#L3"
        pages = _pages(tmp_path / str(i), template=template)
        assert f"https://h{MINIVLLM}/miniflow/" in pages["README.md"].decode()
    out = tmp_path / "g.svg"
    args = ["graph", str(MINIVLLM), "--context", str(stub_root()), "--no-cache", "-q",
            "--out", str(out), "--link-template", "https://h/{root}/{path}/{file}#L{line}"]
    assert main(args) == 0 and "https://h/" in out.read_text()


@pytest.mark.skipif(os.environ.get("KVFLOWMAP_UPDATE_GOLDEN") == "1", reason="regenerating")
def test_golden_folder_has_no_orphans() -> None:
    folder = Path(__file__).parent / "golden" / "docs"
    on_disk = {p.relative_to(folder).as_posix() for p in folder.rglob("*.md")}
    assert on_disk == PAGES - {"rules.md"}
