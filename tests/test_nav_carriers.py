"""Carrier fields read and written on receivers of a known type, and hooks
vLLM never reaches, in ``path`` and the bridges.

vLLM 0.33.0's NIXL connector showed both: the push worker reads
``super().get_transfer_results().finished_sending`` (a
``KVConnectorTransferResults``, not the ``KVConnectorOutput`` carrier), the
model runner writes ``output.failed_recving = results.failed_recving`` (a
write of the carrier, not a read), and ``NixlBaseConnector.get_finished`` is
a legacy wrapper nobody calls: NIXL overrides ``get_transfer_results``,
which vLLM calls, without calling it."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from kvflowmap.api import Request, analyse
from kvflowmap.check.stubs import stub_root
from kvflowmap.nav import paths

OUTPUT = "vllm.v1.outputs.KVConnectorOutput"
RESULTS = "vllm.distributed.kv_transfer.kv_connector.v1.base.KVConnectorTransferResults"
RECVING = f"{OUTPUT}.finished_recving"
SENDING = f"{OUTPUT}.finished_sending"
UPDATE = "vllm.v1.core.sched.scheduler.Scheduler._update_from_kv_xfer_finished"

# A worker hierarchy like NIXL's (base worker, push worker calling super()),
# a connector with NIXL's legacy get_finished wrapper, another connector, and
# a runner-like function writing the carrier from the results.
CONNECTOR = '''
from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1, KVConnectorTransferResults)
from vllm.v1.outputs import KVConnectorOutput


class BaseWorker:
    def __init__(self):
        self._done = set()

    def _pop_done(self) -> set[str]:
        done = set(self._done)
        self._done.clear()
        return done

    def get_transfer_results(self) -> KVConnectorTransferResults:
        return KVConnectorTransferResults(finished_recving=self._pop_done())

    def get_finished(self):
        """Compatibility wrapper for the legacy completion API."""
        results = self.get_transfer_results()
        return results.finished_sending, results.finished_recving


class PushWorker(BaseWorker):
    def get_transfer_results(self) -> KVConnectorTransferResults:
        results = super().get_transfer_results()
        done_sending = results.finished_sending
        done_sending.add("x")
        return results


class LegacyWrapperConnector(KVConnectorBase_V1):
    """Overrides get_transfer_results (what vLLM calls) without calling
    get_finished: its get_finished never runs."""

    def __init__(self, vllm_config, role):
        self.worker = PushWorker()

    def get_finished(self, finished_req_ids):
        return self.worker.get_finished()

    def get_transfer_results(self, finished_req_ids) -> KVConnectorTransferResults:
        return self.worker.get_transfer_results()


class FinishedOnlyConnector(KVConnectorBase_V1):
    """Overrides get_finished only: the base get_transfer_results calls it."""

    def get_finished(self, finished_req_ids):
        return set(), set()


class SuperResultsConnector(KVConnectorBase_V1):
    """Overrides get_transfer_results, but calls the base one, which calls
    get_finished on this object."""

    def get_finished(self, finished_req_ids):
        return set(), set()

    def get_transfer_results(self, finished_req_ids) -> KVConnectorTransferResults:
        results = super().get_transfer_results(finished_req_ids)
        return results


def collect(connector: KVConnectorBase_V1) -> KVConnectorOutput:
    output = KVConnectorOutput()
    results = connector.get_transfer_results(set())
    output.finished_recving = results.finished_recving
    output.finished_sending = output.finished_sending or set()
    return output
'''

PKG = "carrierconn"


def _analyse(tmp_path: Path, context: Path | None = None, text: str = CONNECTOR):
    pkg = tmp_path / PKG
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent(text))
    return analyse(Request(sources=[str(pkg)], context=[str(context or stub_root())],
                           use_cache=False))


def _line(text: str) -> int:
    """The line of the fixture that holds ``text``."""
    return next(i for i, line in enumerate(CONNECTOR.splitlines(), 1) if text in line)


def _edges(g, u: str, v: str, kind: str) -> list[dict]:
    if not g.has_edge(u, v):
        return []
    return [d for d in g[u][v].values() if d.get("kind") == kind]


# -- 1. the type of the receiver decides whose field is read or written --------

def test_super_call_result_has_the_type_its_target_returns(tmp_path: Path) -> None:
    lk = _analyse(tmp_path).linker
    assert lk.values.eval((PKG, "PushWorker.get_transfer_results"), "results") == \
        (("inst", RESULTS),)


def test_a_field_of_another_class_is_no_carrier_read(tmp_path: Path) -> None:
    g = _analyse(tmp_path).graph
    # ``results.finished_sending`` of ``super().get_transfer_results()``
    push = f"{PKG}.PushWorker.get_transfer_results"
    assert not _edges(g, SENDING, push, "consumes")
    assert not _edges(g, f"{PKG}.BaseWorker.get_finished", SENDING, "consumes")


def test_a_carrier_write_is_no_read(tmp_path: Path) -> None:
    g = _analyse(tmp_path).graph
    collect = f"{PKG}.collect"
    # ``output.finished_recving = results.finished_recving``: a write of the
    # carrier from another class's field
    assert [d["line"] for d in _edges(g, collect, RECVING, "produces")] == \
        [_line("output.finished_recving = results")]
    assert not _edges(g, RECVING, collect, "consumes")
    # ``output.finished_sending = output.finished_sending or set()`` reads it too
    assert [d["line"] for d in _edges(g, SENDING, collect, "consumes")] == \
        [_line("output.finished_sending = output")]


def test_no_path_through_a_write_into_another_connector(tmp_path: Path) -> None:
    g = _analyse(tmp_path).graph
    result = paths.find_paths(g, f"{PKG}.BaseWorker._pop_done", UPDATE, max_paths=20)
    assert isinstance(result, paths.PathResult)
    for p in result.paths:
        # never: the field "read" where collect writes it, then collect's call
        # of the base hook, dispatched to an unrelated connector's bridge
        assert all(s.dst != f"{PKG}.collect" for s in p), paths.paths_text(result)


# -- 2. a hook the class's override of vLLM's call never reaches --------------

def test_path_from_a_legacy_wrapper_nobody_calls_is_none(tmp_path: Path) -> None:
    g = _analyse(tmp_path).graph
    result = paths.find_paths(g, f"{PKG}.LegacyWrapperConnector.get_finished", UPDATE)
    # its worker's get_transfer_results returns into the field only when
    # vLLM calls it, not when the legacy wrapper does
    assert isinstance(result, paths.NoPath), paths.paths_text(result)
    assert result.returned
    assert "does not hand it on" in paths.paths_text(result)


def test_path_from_the_hook_vllm_calls_still_answers(tmp_path: Path) -> None:
    g = _analyse(tmp_path).graph
    live = paths.find_paths(g, f"{PKG}.LegacyWrapperConnector.get_transfer_results", UPDATE)
    assert isinstance(live, paths.PathResult)
    assert live.paths[0][0].kind == "bridge"
    # from a helper whose return value vLLM takes: the chain starts there
    helper = paths.find_paths(g, f"{PKG}.BaseWorker._pop_done", UPDATE)
    assert isinstance(helper, paths.PathResult)
    assert helper.paths[0][0].note == "its return value"


def _untraceable_stubs(tmp_path: Path) -> Path:
    """The stub vLLM with the runners storing a copy of what the connector
    returns (``results.finished_recving.copy()``): nothing is followed back
    through return values, so the bridges are decided by the calls alone."""
    root = tmp_path / "stubs"
    shutil.copytree(stub_root(), root)
    for rel in ("vllm/v1/worker/kv_connector_model_runner_mixin.py",
                "vllm/v1/worker/gpu/kv_connector.py"):
        f = root / rel
        text = f.read_text()
        for field in ("finished_sending", "finished_recving"):
            old = f"{field}=results.{field},"
            assert old in text
            text = text.replace(old, f"{field}=results.{field}.copy(),")
        f.write_text(text)
    return root


def test_bridges_only_from_the_hooks_vllm_reaches(tmp_path: Path) -> None:
    # without ``collect``, whose write of the carrier would be followed back
    without_collect = CONNECTOR[:CONNECTOR.index("def collect")]
    g = _analyse(tmp_path, _untraceable_stubs(tmp_path), without_collect).graph
    assert not any(d.get("via") == "return" for *_, d in g.in_edges(RECVING, data=True))

    def bridged(src: str) -> bool:
        return any(_edges(g, src, UPDATE, "bridge"))

    assert bridged(f"{PKG}.LegacyWrapperConnector.get_transfer_results")
    assert not bridged(f"{PKG}.LegacyWrapperConnector.get_finished")
    # the base get_transfer_results runs these get_finished on their object
    assert bridged(f"{PKG}.FinishedOnlyConnector.get_finished")
    assert bridged(f"{PKG}.SuperResultsConnector.get_finished")
