"""Carrier fields produced through return values (``graph.returnflow``): the
connector functions whose returns vLLM stores in ``finished_recving`` are its
producers, and dispatch on ``self`` respects the overrides."""

from __future__ import annotations

import textwrap
from pathlib import Path

from kvflowmap.api import Request, analyse
from kvflowmap.check.stubs import stub_root
from kvflowmap.nav import paths
from kvflowmap.nav.where import edge_sites

FIELD = "vllm.v1.outputs.KVConnectorOutput.finished_recving"
SENDING = "vllm.v1.outputs.KVConnectorOutput.finished_sending"

CONNECTOR = '''
from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1, KVConnectorTransferResults)


class Worker:
    def __init__(self):
        self._futures = {}

    def _pop_done(self):
        done = set()
        for rid, fut in list(self._futures.items()):
            if fut.done():
                done.add(rid)
                del self._futures[rid]
        return done

    def get_finished(self, finished_req_ids):
        recving = self._pop_done()
        return None, recving


class FacadeConnector(KVConnectorBase_V1):
    """Overrides get_finished only: the base get_transfer_results calls it."""

    def __init__(self):
        self.worker = Worker()

    def get_finished(self, finished_req_ids):
        sending, recving = self.worker.get_finished(finished_req_ids)
        return sending, recving


class OwnResultsConnector(KVConnectorBase_V1):
    """Overrides get_transfer_results: vLLM never reaches its get_finished."""

    def get_finished(self, finished_req_ids):
        return set(), set()

    def get_transfer_results(self, finished_req_ids):
        done = set()
        return KVConnectorTransferResults(finished_recving=done)
'''


def _graph(tmp_path: Path, name: str = "rfconn", source: str = CONNECTOR):
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent(source))
    return analyse(Request(sources=[str(pkg)], context=[str(stub_root())],
                           use_cache=False)).graph


def _producers(g, field: str) -> set[str]:
    return {s.node for s in edge_sites(g, field, "in", ("produces",))}


def test_facade_worker_and_helper_produce_through_returns(tmp_path: Path) -> None:
    g = _graph(tmp_path)
    found = _producers(g, FIELD)
    assert {"rfconn.FacadeConnector.get_finished", "rfconn.Worker.get_finished",
            "rfconn.Worker._pop_done", "rfconn.OwnResultsConnector.get_transfer_results"} <= found
    # vLLM 0.33 calls get_transfer_results; this class overrides it, so its
    # get_finished is never what fills the field
    assert "rfconn.OwnResultsConnector.get_finished" not in found


def test_a_constant_none_slot_produces_nothing(tmp_path: Path) -> None:
    g = _graph(tmp_path)
    # Worker.get_finished returns ``None, recving``: nothing of it is a saving
    # report, and the facade hands on only what the worker returns
    assert "rfconn.Worker.get_finished" not in _producers(g, SENDING)
    assert "rfconn.FacadeConnector.get_finished" not in _producers(g, SENDING)
    # OwnResultsConnector.get_finished returns ``set(), set()``: no slot is a report
    assert "rfconn.OwnResultsConnector.get_finished" not in _producers(g, SENDING)


def test_a_literal_empty_slot_produces_nothing(tmp_path: Path) -> None:
    g = _graph(tmp_path, "emptyslot", """
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Worker:
    def __init__(self):
        self._done = set()

    def get_finished(self, finished_req_ids):
        done, self._done = self._done, set()
        return set(), done


class Facade(KVConnectorBase_V1):
    def __init__(self):
        self.worker = Worker()

    def get_finished(self, finished_req_ids):
        return self.worker.get_finished(finished_req_ids)
""")
    assert {"emptyslot.Worker.get_finished", "emptyslot.Facade.get_finished"} <= \
        _producers(g, FIELD)
    assert not {"emptyslot.Worker.get_finished", "emptyslot.Facade.get_finished"} & \
        _producers(g, SENDING)


def test_path_from_the_worker_reaches_the_scheduler_through_returns(tmp_path: Path) -> None:
    g = _graph(tmp_path)
    result = paths.find_paths(g, "rfconn.Worker._pop_done",
                              "vllm.v1.core.sched.scheduler.Scheduler._update_from_kv_xfer_finished")
    assert isinstance(result, paths.PathResult)
    first = result.paths[0]
    assert first[0].kind == "produces" and first[0].note == "its return value"
    assert first[0].dst == FIELD
    # the value climbs through the worker's and the facade's returns to the
    # runner's store: each is a step of the answer, none is skipped
    climbed = [f for f, _, _ in first[0].up]
    assert climbed == ["rfconn.Worker.get_finished", "rfconn.FacadeConnector.get_finished",
                       "vllm.distributed.kv_transfer.kv_connector.v1.base.KVConnectorBase_V1"
                       ".get_transfer_results",
                       "vllm.v1.worker.gpu.kv_connector.ActiveKVConnector.post_forward"], climbed
    text = paths.paths_text(result)
    assert "--return--> rfconn/__init__.py:16\n  rfconn.Worker.get_finished\n" in text
    assert text.index("rfconn.FacadeConnector.get_finished") < text.index("--produces--> ") < \
        text.index(f"  {FIELD}")
    assert '"up": [' in paths.paths_json(result)


UNPACKED = '''
from vllm.v1.outputs import KVConnectorOutput


class Worker:
    def _notifs(self):
        return {"sent"}

    def _done(self):
        return {"received"}

    def get_finished(self):
        return self._notifs(), self._done()


class Runner:
    def step(self, worker: Worker):
        out = KVConnectorOutput()
        out.finished_sending, out.finished_recving = worker.get_finished()
        return out
'''


def test_a_tuple_unpacked_into_fields_keeps_its_slots(tmp_path: Path) -> None:
    # ``out.finished_sending, out.finished_recving = worker.get_finished()``:
    # the second slot's producers fill finished_recving, not the first's
    g = _graph(tmp_path, "unpacked", UNPACKED)
    assert "unpacked.Worker._done" in _producers(g, FIELD)
    assert "unpacked.Worker._notifs" not in _producers(g, FIELD)
    assert "unpacked.Worker._notifs" in _producers(g, SENDING)


def test_a_conditional_with_an_empty_arm_keeps_the_other_arms_origin() -> None:
    import libcst as cst

    from kvflowmap.index.extract_data import origin_of

    def origin(text: str) -> str | None:
        return origin_of(cst.parse_expression(text))

    assert origin('self.t.get() if self.role == "c" else set()') == "self.t.get()"
    assert origin("None if closed else self._done") == "self._done"
    assert origin("self._a if c else self._b") is None  # two values: neither is the origin


FUTURES = '''
import asyncio
from concurrent.futures import ThreadPoolExecutor

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Worker:
    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.pool = ThreadPoolExecutor(1)
        self.recved = set()
        self.sent = set()

    async def _fetch_recved(self):
        done, self.recved = self.recved, set()
        return done

    def _fetch_sent(self):
        done, self.sent = self.sent, set()
        return done

    def get_finished(self, finished_req_ids):
        recv_fut = asyncio.run_coroutine_threadsafe(self._fetch_recved(), self.loop)
        send_fut = self.pool.submit(self._fetch_sent)
        recving = recv_fut.result() if recv_fut else set()
        return send_fut.result(), recving


class Conn(KVConnectorBase_V1):
    def __init__(self):
        self.worker = Worker()

    def get_finished(self, finished_req_ids):
        return self.worker.get_finished(finished_req_ids)
'''


def test_a_future_s_result_is_what_the_function_it_runs_returns(tmp_path: Path) -> None:
    # the Mooncake connectors' get_finished: run_coroutine_threadsafe(...).result()
    g = _graph(tmp_path, "futconn", FUTURES)
    assert "futconn.Worker._fetch_recved" in _producers(g, FIELD)
    assert "futconn.Worker._fetch_sent" in _producers(g, SENDING)
    assert "futconn.Worker._fetch_sent" not in _producers(g, FIELD)


def test_a_path_from_a_helper_goes_up_to_the_caller_that_returns_its_value(
        tmp_path: Path) -> None:
    """The scheduler half builds the metadata its facade returns to vLLM:
    the path from the half starts by handing the value up, then takes the
    facade's bridge to the worker side."""
    g = _graph(tmp_path, "upconn", """
from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1, KVConnectorMetadata)


class Meta(KVConnectorMetadata):
    def __init__(self, jobs):
        self.jobs = jobs


class Half:
    def build_connector_meta(self, scheduler_output):
        return Meta(jobs={1: 2})


class Worker:
    def start_jobs(self, meta):
        return list(meta.jobs)


class Facade(KVConnectorBase_V1):
    def __init__(self):
        self.half = Half()
        self.worker = Worker()

    def build_connector_meta(self, scheduler_output):
        return self.half.build_connector_meta(scheduler_output)

    def start_load_kv(self, forward_context, **kwargs):
        self.worker.start_jobs(self._get_connector_metadata())
""")
    assert isinstance(paths.find_paths(g, "upconn.Half.build_connector_meta",
                                       "upconn.Worker.start_jobs"), paths.PathResult)
    # the stub runner reads the field straight into start_load_kv; vLLM 0.33.0's
    # does not hand it to the calls that follow (the real offloading case), so
    # the way up through the facade is asked for on its own here
    result = paths._through_callers(g, "upconn.Half.build_connector_meta",
                                    "upconn.Worker.start_jobs", 5, paths.ALL_KINDS)
    assert isinstance(result, paths.PathResult)
    first = result.paths[0]
    assert (first[0].kind, first[0].dst) == ("return", "upconn.Facade.build_connector_meta")
    assert first[-1].dst == "upconn.Worker.start_jobs"
    # with calls only, no data goes up
    assert isinstance(paths.find_paths(g, "upconn.Half.build_connector_meta",
                                       "upconn.Worker.start_jobs", kinds=paths.CONTROL_KINDS),
                      paths.NoPath)


MERGED = '''
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class RecvThread:
    def __init__(self):
        self.done = set()

    def take_done(self):
        out, self.done = self.done, set()
        return out


class Worker:
    def __init__(self):
        self.threads = [RecvThread()]
        self.loading = {}

    def _pulled(self):
        return set(self.loading)

    def get_finished(self, finished_req_ids):
        recving = set()
        recving |= self.threads[0].take_done()
        recving = recving | self._pulled()
        sending = set(finished_req_ids)
        sending -= self._pulled()
        return sending, recving


class Facade(KVConnectorBase_V1):
    def __init__(self):
        self.worker = Worker()

    def get_finished(self, finished_req_ids):
        return self.worker.get_finished(finished_req_ids)
'''


def test_ids_merged_in_with_or_are_produced_and_taken_out_with_minus_are_not(
        tmp_path: Path) -> None:
    # ``recving |= t.take_done()`` and ``recving = recving | self._pulled()``
    # put what the calls return into the report; ``sending -= self._pulled()``
    # takes it out of the other one
    g = _graph(tmp_path, "merged", MERGED)
    recving = _producers(g, FIELD)
    assert {"merged.RecvThread.take_done", "merged.Worker._pulled"} <= recving
    assert "merged.Worker._pulled" not in _producers(g, SENDING)


EXTENDED = '''
from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1, KVConnectorTransferResults)


class BaseWorker:
    def _collect(self):
        return set()

    def get_transfer_results(self):
        done = self._collect()
        return KVConnectorTransferResults(finished_sending=done)


class PushWorker(BaseWorker):
    def get_transfer_results(self):
        results = super().get_transfer_results()
        pushed = results.finished_sending
        pushed.add("r")
        return results


class Facade(KVConnectorBase_V1):
    def __init__(self, worker: BaseWorker):
        self.worker = worker

    def get_transfer_results(self, finished_req_ids):
        return self.worker.get_transfer_results()
'''


def test_an_override_returning_its_bases_results_produces_too(tmp_path: Path) -> None:
    """The facade's call reaches the base worker's return first; the push
    worker's ``super()`` call reaches it again and still hands it on (vLLM
    0.34's NIXL push worker adds its finished WRITEs to the base's results)."""
    g = _graph(tmp_path, "extconn", EXTENDED)
    assert {"extconn.BaseWorker.get_transfer_results",
            "extconn.PushWorker.get_transfer_results"} <= _producers(g, SENDING)


SUPER_RESULTS = '''
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Worker:
    def __init__(self):
        self._done = set()
        self._late = set()

    def get_finished(self, finished_req_ids):
        done, self._done = self._done, set()
        return None, done

    def take_late(self):
        late, self._late = self._late, set()
        return late


class Conn(KVConnectorBase_V1):
    def __init__(self):
        self.worker = Worker()

    def get_finished(self, finished_req_ids):
        return self.worker.get_finished(finished_req_ids)

    def get_transfer_results(self, finished_req_ids):
        results = super().get_transfer_results(finished_req_ids)
        results.finished_sending = self.worker.take_late()
        return results
'''


def test_an_override_that_calls_super_still_runs_the_bases_self_calls(tmp_path: Path) -> None:
    """vLLM 0.34.0's offloading connector overrides get_transfer_results but
    calls super(), whose self.get_finished() is then its own; and it writes
    a field of the results it returns (results.failed_recving = ...)."""
    g = _graph(tmp_path, "supconn", SUPER_RESULTS)
    assert {"supconn.Worker.get_finished", "supconn.Conn.get_finished"} <= _producers(g, FIELD)
    assert "supconn.Worker.take_late" in _producers(g, SENDING)
    result = paths.find_paths(g, "supconn.Worker.get_finished", FIELD)
    assert isinstance(result, paths.PathResult)
    climbed = [f for f, _, _ in result.paths[0][0].up]
    # back through the base's get_transfer_results into the override that
    # called it, not from the base straight to the runner
    assert climbed[:3] == [
        "supconn.Conn.get_finished",
        "vllm.distributed.kv_transfer.kv_connector.v1.base.KVConnectorBase_V1.get_transfer_results",
        "supconn.Conn.get_transfer_results"], climbed
