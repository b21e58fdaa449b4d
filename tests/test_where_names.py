"""``where`` by the names code really uses: a module-level alias of a class
resolves to the class (saying so), a short name several classes declare is
ambiguous even when only one of them is a graph node, and an enum member is
defined at its own line, not at its ``class`` line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kvflowmap.api import Request, analyse
from kvflowmap.check.stubs import stub_root
from kvflowmap.cli import main
from kvflowmap.nav import where_render
from kvflowmap.nav.where import Ambiguous, WhereResult, where

WORKER = '''
class PullWorker:
    def start_load_kv(self, requests):
        return requests


class PushWorker:
    pass


# kept for old imports
LegacyWorker = PullWorker
'''

INIT = '''
from conn.worker import PullWorker
from conn.worker import PushWorker as RenamedPush

__all__ = ["PullWorker", "RenamedPush"]
'''

RESULTS = '''
from dataclasses import dataclass, field


@dataclass
class MyResults:
    done: set[str] = field(default_factory=set)
    finished_recving: set[str] = field(default_factory=set)
'''

OUTPUT_FIELD = "vllm.v1.outputs.KVConnectorOutput.finished_recving"
STATE = "vllm.v1.request.RequestStatus.WAITING_FOR_REMOTE_KVS"


def _package(tmp_path_factory) -> Path:
    root: Path = tmp_path_factory.mktemp("where_names") / "conn"
    root.mkdir()
    (root / "__init__.py").write_text(textwrap.dedent(INIT))
    (root / "worker.py").write_text(textwrap.dedent(WORKER))
    (root / "results.py").write_text(textwrap.dedent(RESULTS))
    return root


@pytest.fixture(scope="module")
def pkg(tmp_path_factory) -> Path:
    return _package(tmp_path_factory)


@pytest.fixture(scope="module")
def analysis(pkg):
    return analyse(Request(sources=[str(pkg)], context=[str(stub_root())], use_cache=False))


def test_module_level_alias_resolves_to_the_class(analysis) -> None:
    g = analysis.graph
    assert "conn.worker.LegacyWorker" not in g
    found = where(g, "LegacyWorker", analysis.linker.model)
    assert isinstance(found, WhereResult) and found.node == "conn.worker.PullWorker"
    assert [(a.node, a.file, a.line) for a in found.aliases] == [
        ("conn.worker.LegacyWorker", "conn/worker.py", 12)]
    text = where_render.where_text(found)
    assert "LegacyWorker is an alias of it: conn.worker.LegacyWorker at conn/worker.py:12" in text
    # the full id of the alias, and a member through it
    assert isinstance(full := where(g, "conn.worker.LegacyWorker"), WhereResult)
    assert full.node == "conn.worker.PullWorker"
    member = where(g, "LegacyWorker.start_load_kv")
    assert isinstance(member, WhereResult)
    assert member.node == "conn.worker.PullWorker.start_load_kv"


def test_reexport_under_another_name_resolves(analysis) -> None:
    g = analysis.graph
    found = where(g, "RenamedPush")
    assert isinstance(found, WhereResult) and found.node == "conn.worker.PushWorker"
    assert [(a.node, a.line) for a in found.aliases] == [("conn.RenamedPush", 3)]
    # a re-export under its own name (listed in ``__all__``) by its full id
    same = where(g, "conn.PullWorker")
    assert isinstance(same, WhereResult) and same.node == "conn.worker.PullWorker"
    # the class's own name says nothing about aliases
    own = where(g, "PullWorker")
    assert isinstance(own, WhereResult) and own.aliases == ()
    assert "alias" not in where_render.where_json(own)


def test_short_name_declared_by_several_classes_is_ambiguous(analysis) -> None:
    g, model = analysis.linker.graph, analysis.linker.model
    assert "conn.results.MyResults.finished_recving" not in g  # not a carrier: no node
    found = where(g, "finished_recving", model)
    assert isinstance(found, Ambiguous)
    nodes = {c.node: c for c in found.candidates}
    assert OUTPUT_FIELD in nodes and nodes[OUTPUT_FIELD].kind == "field"
    mine = nodes["conn.results.MyResults.finished_recving"]
    assert (mine.kind, mine.file, mine.line) == ("attribute", "conn/results.py", 8)
    assert "matches" in where_render.where_text(found)
    # more of the name, or the full id, is exact
    exact = where(g, "KVConnectorOutput.finished_recving", model)
    assert isinstance(exact, WhereResult) and exact.node == OUTPUT_FIELD
    attr = where(g, "MyResults.finished_recving", model)
    assert isinstance(attr, WhereResult) and (attr.kind, attr.line) == ("attribute", 8)
    assert "no node of the graph" in where_render.where_text(attr)
    # a name only one class declares stays that class's
    done = where(g, "done", model)
    assert isinstance(done, WhereResult) and done.node == "conn.results.MyResults.done"


def test_cli_ambiguous_field_exits_1_and_alias_0(pkg, capsys) -> None:
    args = [str(pkg), "--context", str(stub_root()), "--no-cache", "-q"]
    assert main(["where", "finished_recving", *args]) == 1
    out = capsys.readouterr().out
    assert "conn.results.MyResults.finished_recving" in out and OUTPUT_FIELD in out
    assert main(["where", "LegacyWorker", *args]) == 0
    assert "is an alias of it" in capsys.readouterr().out


STATUS = '''
from vllm.v1.request import RequestStatus


def park(request):
    request.status = RequestStatus.WAITING_FOR_REMOTE_KVS
'''


def test_state_is_defined_at_the_member_line(tmp_path_factory) -> None:
    root: Path = tmp_path_factory.mktemp("where_state") / "park"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "status.py").write_text(textwrap.dedent(STATUS))
    g = analyse(Request(sources=[str(root)], context=[str(stub_root())],
                        use_cache=False)).graph
    lines = (stub_root() / "vllm" / "v1" / "request.py").read_text().splitlines()
    member = next(i for i, t in enumerate(lines, 1) if t.strip().startswith(
        "WAITING_FOR_REMOTE_KVS ="))
    cls = next(i for i, t in enumerate(lines, 1) if t.startswith("class RequestStatus"))
    assert member != cls
    found = where(g, "WAITING_FOR_REMOTE_KVS")
    assert isinstance(found, WhereResult) and found.node == STATE
    assert (found.file, found.line) == ("vllm/v1/request.py", member)
