"""A connector that subclasses one of vLLM's own connector classes: vLLM's
inherited methods run on its objects, so ids flow through them into the
subject's overrides, the overrides are reached from the inherited hooks, and
what an override puts into state reaches the report the inherited method
makes (``lifecycle.model._inherited``)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kvflowmap.api import Request, analyse
from kvflowmap.check.engine import run_rules
from kvflowmap.check.loader import default_rule_dirs, load_rules
from kvflowmap.check.stubs import stub_root
from kvflowmap.lifecycle.model import build_lifecycle
from kvflowmap.nav import paths
from kvflowmap.nav.statelinks import with_state_links

# stands for vLLM's own NIXL worker: the context the subject derives from
BASE = '''
ReqId = str


class Meta:
    reqs_to_recv: dict[ReqId, object]


class BaseWorker:
    def __init__(self):
        self._recving = {}

    def start_load_kv(self, metadata: Meta):
        for req_id, meta in metadata.reqs_to_recv.items():
            self._read_for_req(req_id, meta)

    def _read_for_req(self, req_id, meta):
        raise NotImplementedError

    def get_transfer_results(self):
        done = set()
        for req_id in list(self._recving):
            del self._recving[req_id]
            done.add(req_id)
        return self._results(done)

    def _results(self, done):
        return None, done
'''

SUBJECT = '''
from ctxnixl.base import BaseWorker


class MyWorker(BaseWorker):
    def _read_for_req(self, req_id, meta):
        try:
            handle = meta.start()
        except Exception:
            return
        self._recving[req_id] = handle

    def get_transfer_results(self):
        return super().get_transfer_results()
'''


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    root: Path = tmp_path_factory.mktemp("inherited")
    for rel, text in (("ctx/ctxnixl/__init__.py", ""), ("ctx/ctxnixl/base.py", BASE),
                      ("src/mine/__init__.py", ""), ("src/mine/worker.py", SUBJECT)):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text).lstrip())
    return analyse(Request(sources=[str(root / "src" / "mine")],
                           context=[str(stub_root()), str(root / "ctx")], use_cache=False))


def test_ids_flow_through_the_inherited_hook_into_the_override(analysis) -> None:
    lc = build_lifecycle(analysis.linker)
    override = "mine.worker.MyWorker._read_for_req"
    assert "req_id" in lc.state.of(override).ids
    assert "ctxnixl.base.BaseWorker.start_load_kv" in lc.inherited
    # reached from the inherited ``start_load_kv`` on the worker side
    assert lc.connected(override) and "worker" in lc.sides.get(override, ())
    # the base ``get_transfer_results`` runs too, through ``super()``
    assert "mine.worker.MyWorker" in lc.inherited["ctxnixl.base.BaseWorker.get_transfer_results"]


def test_what_the_override_stores_reaches_the_inherited_report(analysis) -> None:
    g = with_state_links(analysis.linker)
    result = paths.find_paths(g, "MyWorker._read_for_req", "BaseWorker.get_transfer_results")
    assert isinstance(result, paths.PathResult)
    assert [s.kind for s in result.paths[0]] == ["produces", "consumes"]
    assert result.paths[0][1].line == 21  # the base's loop over ``self._recving``


def test_an_override_that_drops_an_id_is_checked(analysis) -> None:
    rules = [r for r in load_rules(default_rule_dirs())[0] if r.id == "kvc-request-id-not-dropped"]
    found = run_rules(analysis, rules)
    assert [(f.function, f.line) for f in found] == [("mine.worker.MyWorker._read_for_req", 7)]


def test_the_lifecycle_table_shows_the_inherited_removal(analysis) -> None:
    # ``lifecycle``'s row of the subject's container lists the removal vLLM's
    # inherited ``get_transfer_results`` makes, not "remove -"
    from kvflowmap.nav.lifecycle_summary import summarise

    rows = [c for p in summarise(build_lifecycle(analysis.linker)) for c in p.containers]
    (row,) = [c for c in rows if c.label == "MyWorker._recving"]
    assert [(r.function, r.line) for r in row.adds] == [("MyWorker._read_for_req", 10)]
    assert [(r.function, r.line, r.module) for r in row.removes] == \
        [("BaseWorker.get_transfer_results", 22, "ctxnixl.base")]
