"""States decided by a return value (``graph.returnstates``): vLLM's
scheduler parks a request in ``WAITING_FOR_REMOTE_KVS`` under a test of what
``get_num_new_matched_tokens`` returned, so the connector's probe (and the
half its facade returns from) decides that state, and ``path`` and ``where``
say so."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from kvflowmap.api import Request, analyse
from kvflowmap.check.stubs import stub_root
from kvflowmap.nav import paths
from kvflowmap.nav.where import describe, edge_sites
from kvflowmap.nav.where_render import where_json, where_text

STATE = "vllm.v1.request.RequestStatus.WAITING_FOR_REMOTE_KVS"

CONNECTOR = '''
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class SchedulerHalf:
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        if request.prompt_token_ids is None:
            return self._probe(request)
        hit = self._lookup(request)
        return hit, hit > 0

    def _probe(self, request):
        hit = self._lookup(request)
        return hit, hit > 0

    def _lookup(self, request):
        return 0

    def request_finished(self, request, block_ids):
        self._probe(request)
        return False, None


class FacadeConnector(KVConnectorBase_V1):
    def __init__(self):
        self.scheduler = SchedulerHalf()

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return self.scheduler.get_num_new_matched_tokens(request, num_computed_tokens)

    def request_finished(self, request, block_ids):
        return self.scheduler.request_finished(request, block_ids)
'''


def _graph(tmp_path: Path):
    pkg = tmp_path / "rsconn"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent(CONNECTOR))
    return analyse(Request(sources=[str(pkg)], context=[str(stub_root())],
                           use_cache=False)).graph


def test_the_probe_and_its_facade_decide_the_parked_state(tmp_path: Path) -> None:
    g = _graph(tmp_path)
    deciders = {s.node for s in edge_sites(g, STATE, "in", ("produces",))}
    assert {"rsconn.FacadeConnector.get_num_new_matched_tokens",
            "rsconn.SchedulerHalf.get_num_new_matched_tokens",
            "rsconn.SchedulerHalf._probe"} <= deciders
    # the probe's own helper returns the count (slot 0), not the flag tested
    assert "rsconn.SchedulerHalf._lookup" not in deciders
    text = where_text(describe(g, STATE))
    assert "decided by (its return value is tested where the state is set)" in text
    assert "test: load_kv_async" in text
    # JSON names the relation for what it is, on both ends
    data = json.loads(where_json(describe(g, STATE)))["relations"]
    assert "producers" not in data and {s["node"] for s in data["deciders"]} == deciders
    probe = json.loads(where_json(describe(g, "rsconn.SchedulerHalf._probe")))["relations"]
    assert [s["node"] for s in probe["decides"]] == [STATE]
    assert "decides state" in where_text(describe(g, "rsconn.SchedulerHalf._probe"))


def test_path_from_the_probe_names_the_test(tmp_path: Path) -> None:
    g = _graph(tmp_path)
    r = paths.find_paths(g, "SchedulerHalf.get_num_new_matched_tokens", "WAITING_FOR_REMOTE_KVS")
    assert isinstance(r, paths.PathResult)
    first = r.paths[0]
    assert len(first) == 1 and first[0].kind == "produces"
    assert "tested `load_kv_async` in schedule" in first[0].note


def test_no_path_through_a_return_nobody_tests(tmp_path: Path) -> None:
    # request_finished calls the probe's helper too, but nothing tests what
    # the helper returns there: its return decides the state only on the
    # scheduler's way through get_num_new_matched_tokens
    g = _graph(tmp_path)
    assert paths.find_paths(g, "SchedulerHalf._probe", "WAITING_FOR_REMOTE_KVS",
                            kinds=("call", "dispatch", "bridge", "produces")).paths
    r = paths.find_paths(g, "SchedulerHalf.request_finished", "WAITING_FOR_REMOTE_KVS",
                         kinds=("call", "dispatch", "bridge", "produces"))
    assert isinstance(r, paths.NoPath)
