"""``kvflowmap trace``: which placeholders of a logging call carry a request
id, by data flow (the lifecycle model) before names, on a tiny connector
whose names say little (``key``, ``k``, ``what``) or mislead
(``worker_req_id`` holds a worker's name), with arguments the index keeps
only in part (``sorted(ids)``, f-strings)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvflowmap.trace.code import CodeIndex, Marker
from kvflowmap.trace.ids import FLOW, NAME, name_says_id, string_placeholders
from kvflowmap.trace.match import split_ids
from kvflowmap.trace.run import trace
from tests.trace_support import connector_index

CONNECTOR = '''\
import logging

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1

logger = logging.getLogger(__name__)


class FlowConnector(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        super().__init__(vllm_config, role, kv_cache_config)
        self._jobs = {}
        self._worker = "worker-0007"

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        key = request.request_id
        handle = self._submit(key)
        logger.info("[Flow] queued %s as %s", handle, key)
        worker_req_id = self._worker
        logger.info("[Flow] worker=%s serving %s", worker_req_id, key)
        logger.info("[Flow] alloc %s blocks=%d", key, num_external_tokens)
        self._jobs[key] = handle

    def _submit(self, what):
        logger.info("[Flow] submit %s", what)
        return "job-" + what

    def get_finished(self, finished_req_ids):
        for k in list(self._jobs):
            logger.info("[Flow] done %s", k)
            logger.info(f"[Flow] f-done {len(self._jobs)} {k}")
        logger.info("[Flow] sorted %s n=%s", sorted(finished_req_ids), len(finished_req_ids))
        logger.info("[Flow] finished reqs=%s", finished_req_ids)
        req_id = self._worker
        logger.info("[Flow] polled by %s", req_id)
        self._jobs.clear()
        ready = self._poll()
        logger.info("[Flow] ready %s", sorted(ready))
        return None, ready

    def _poll(self):
        return set()
'''


def _line(text: str) -> int:
    return next(i for i, ln in enumerate(CONNECTOR.splitlines(), 1) if text in ln)


@pytest.fixture(scope="module")
def code(tmp_path_factory) -> CodeIndex:
    return connector_index(tmp_path_factory.mktemp("flow"), "flowc", CONNECTOR)


def _marker(code: CodeIndex, text: str) -> Marker:
    return next(m for m in code.markers if m.message.startswith(text))


def test_ids_by_data_flow_whatever_the_names(code: CodeIndex) -> None:
    # (message, the placeholder of the request, related ones, how it was found)
    expected = {
        "[Flow] queued %s as %s": ((1,), (), FLOW),  # key = request.request_id
        "[Flow] worker=%s serving %s": ((1,), (0,), FLOW),  # the name of arg 0 misleads
        "[Flow] alloc %s blocks=%d": ((0,), (), FLOW),
        "[Flow] submit %s": ((0,), (), FLOW),  # the id passed as an argument
        "[Flow] done %s": ((0,), (), FLOW),  # a key of a request-keyed container
        "[Flow] finished reqs=%s": ((0,), (), FLOW),  # the hook's id collection
        "[Flow] polled by %s": ((0,), (), NAME),  # no flow: the name is all there is
        # the arguments as written (the index keeps only ``len()``, ``sorted()``):
        "[Flow] f-done {} {}": ((1,), (), FLOW),  # an f-string's parts; len() is a number
        "[Flow] sorted %s n=%s": ((0,), (), FLOW),  # sorted() keeps the ids, len() does not
        "[Flow] ready %s": ((0,), (), FLOW),  # what get_finished hands back: finished ids
    }
    got = {msg: (m.id_args, m.related_args, m.id_how)
           for msg in expected for m in [_marker(code, msg)]}
    assert got == expected


def test_numbers_never_carry_an_id() -> None:
    assert string_placeholders("req=%s n=%d t=%.2f r=%r", 4) == [True, False, False, True]
    assert string_placeholders("{} after {}", 2) == [True, True]
    assert string_placeholders("100%% of %s", 1) == [True]
    assert name_says_id("request.request_id", {"request_id"})
    assert name_says_id("req_ids", set()) and not name_says_id("num_blocks", set())


def test_split_ids_of_a_logged_record_takes_its_request_id() -> None:
    assert split_ids("{'failure_type': 'timeout', 'request_id': 'cmpl-7', 'n': 3}") == ["cmpl-7"]
    assert split_ids("{'cmpl-1': 4, 'cmpl-2': 5}") == ["cmpl-1", "cmpl-2"]
    assert split_ids("{'cmpl-1', 'cmpl-2'}") == ["cmpl-1", "cmpl-2"]
    assert split_ids("dict_keys(['cmpl-3'])") == ["cmpl-3"]
    assert split_ids("None") == [] and split_ids("cmpl-4") == ["cmpl-4"]


def _vline(ts: str, place: str, msg: str, proc: str = "EngineCore_DP0", pid: int = 10) -> str:
    return f"({proc} pid={pid}) INFO 12-02 10:00:{ts} [{place}] {msg}\n"


def test_lines_grouped_by_the_ids_the_flow_found(code: CodeIndex, tmp_path: Path) -> None:
    c = "connector.py"
    out = []
    for n, rid in enumerate(("cmpl-a1b2c3-0", "cmpl-d4e5f6-0")):
        t = f"{n:02d}"
        out += [_vline(t, f"{c}:{_line('submit %s')}", f"[Flow] submit {rid}"),
                _vline(t, f"{c}:{_line('queued %s')}", f"[Flow] queued job-{rid} as {rid}"),
                _vline(t, f"{c}:{_line('worker=%s')}", f"[Flow] worker=worker-0007 serving {rid}"),
                _vline(t, f"{c}:{_line('alloc %s')}", f"[Flow] alloc {rid} blocks=16"),
                _vline(t, f"{c}:{_line('done %s')}", f"[Flow] done {rid}")]
    out.append(_vline("09", f"{c}:{_line('finished reqs')}",
                      "[Flow] finished reqs={'cmpl-a1b2c3-0', 'cmpl-d4e5f6-0'}"))
    log = tmp_path / "flow.log"
    log.write_text("".join(out), encoding="utf-8")
    report = trace(code, [str(log)])
    assert report["summary"]["matched"]["exact"] == len(out)
    lines = {r["request_id"]: r["lines"] for r in report["requests"]}
    # neither the job handle nor the worker's name is a request
    assert lines == {"cmpl-a1b2c3-0": 6, "cmpl-d4e5f6-0": 6}
