"""Link templates per root: parsing, choice, known releases, config, CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvflowmap.render import links
from kvflowmap.render.dot import _link
from kvflowmap.sources.config import load_config


def test_parse_named_and_default_templates() -> None:
    t = links.parse(["vllm=https://g/v/blob/v{version}/{file}#L{line}",
                     "https://x/blob/main/{file}?a=b#L{line}"])
    assert t == {"vllm": "https://g/v/blob/v{version}/{file}#L{line}",
                 "": "https://x/blob/main/{file}?a=b#L{line}"}
    with pytest.raises(ValueError):
        links.parse([" "])


def test_pick_by_label_then_name_then_default_then_known_release() -> None:
    t = {"pegaflow": "P/{file}", "": "D/{file}"}
    assert links.pick(t, "pegaflow") == "P/{file}"
    assert links.pick(t, "lmcache 0.5.6") == "D/{file}"
    # a table that names some roots: a known release it leaves out gets its host
    assert links.pick({"pegaflow": "P/{file}"}, "vllm 0.33.0") == links.KNOWN["vllm"]
    assert links.pick({"pegaflow": "P/{file}"}, "lmcache 0.5.6") is None
    assert links.pick({"": "D/{file}"}, "vllm 0.33.0") == "D/{file}"
    assert links.pick("S/{file}", "vllm 0.33.0") == "S/{file}"
    assert links.pick(None, "vllm 0.33.0") is None


def test_each_root_links_to_its_own_host() -> None:
    roots = {"vllm 0.33.0": "/cache/vllm-0.33.0", "pegaflow": "/src/pegaflow"}
    t = {"pegaflow": "https://p/blob/main/src/{file}#L{line}"}
    assert _link(t, roots, "vllm 0.33.0", "vllm/v1/core/sched/scheduler.py", 10) == \
        "https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/core/sched/scheduler.py#L10"
    assert _link(t, roots, "pegaflow", "pegaflow/connector/__init__.py", 3) == \
        "https://p/blob/main/src/pegaflow/connector/__init__.py#L3"


def test_check_names_a_bad_template() -> None:
    with pytest.raises(ValueError, match=r"\{repo\}|repo"):
        links.check({"vllm": "https://x/{repo}/{file}"})
    links.check({"vllm": links.KNOWN["vllm"], "": "file://{path}/{file}#L{line}"})


def test_config_table_and_command_line_merge(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.kvflowmap]\nlink_template = "D/{file}"\n'
        'link_templates = {pegaflow = "P/{file}", vllm = "V/{file}"}\n', encoding="utf-8")
    cfg = load_config(tmp_path)
    assert cfg.link_templates == {"pegaflow": "P/{file}", "vllm": "V/{file}"}
    assert links.merged(["vllm=W/{file}"], cfg.link_template, cfg.link_templates) == \
        {"pegaflow": "P/{file}", "vllm": "W/{file}", "": "D/{file}"}
    assert links.merged([], None, None) is None
    (tmp_path / "pyproject.toml").write_text(
        "[tool.kvflowmap]\nlink_templates = {vllm = 3}\n", encoding="utf-8")
    with pytest.raises(Exception, match="link_templates: expected a table of strings"):
        load_config(tmp_path)


def test_an_empty_template_means_no_link_and_known_names_the_host() -> None:
    assert links.pick({"pegaflow": "", "": "D/{file}"}, "pegaflow") == ""
    assert links.known("vllm 0.33.0") == links.KNOWN["vllm"]
    assert links.known("vllm") is None and links.known("pegaflow-llm 0.25.1") is None
    assert _link({"pegaflow": ""}, {}, "pegaflow", "pegaflow/x.py", 3) is None


def test_docs_links_per_root_without_a_template(tmp_path: Path) -> None:
    """No template: a vLLM release links to its tag on GitHub (pages and
    flow.svg), another release gets no link (no machine path in a page), a
    local root links relative to the page (flow.svg was ``root/file``: a
    link that went nowhere)."""
    from kvflowmap.docs.markup import Links
    from kvflowmap.sources.roots import Root

    roots = [Root(tmp_path / "repo" / "src", "conn", True),
             Root(tmp_path / "cache" / "vllm-0.33.0", "vllm 0.33.0", False),
             Root(tmp_path / "cache" / "lmcache-0.5.6", "lmcache 0.5.6", False)]
    lk = Links(roots, tmp_path / "repo" / "docs", None)
    assert lk.target("vllm 0.33.0", "vllm/v1/a.py", 7, "kv-load.md") == (
        "https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/a.py#L7", True)
    assert lk.target("lmcache 0.5.6", "lmcache/a.py", 7, "kv-load.md")[1] is False
    svg = lk.svg_templates("flow.svg")
    assert svg == {"conn": "../src/{file}#L{line}", "lmcache 0.5.6": "",
                   "vllm 0.33.0": links.KNOWN["vllm"]}
    paths = {"conn": "conn", "vllm 0.33.0": "vllm 0.33.0", "lmcache 0.5.6": "lmcache 0.5.6"}
    assert _link(svg, paths, "conn", "conn/c.py", 4) == "../src/conn/c.py#L4"
    assert _link(svg, paths, "lmcache 0.5.6", "lmcache/a.py", 4) is None
