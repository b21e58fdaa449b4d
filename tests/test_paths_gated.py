"""``path`` into a helper whose writes depend on a parameter: each call takes
only the arm its literal arguments open (Mooncake's ``add_new_req(...,
load_remote_cache=False)`` fills the send list, never the receive list)."""

from __future__ import annotations

from pathlib import Path

from kvflowmap.api import Request, analyse
from kvflowmap.check.stubs import stub_root
from kvflowmap.nav import paths
from kvflowmap.nav.statelinks import with_state_links

SOURCE = '''
from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1, KVConnectorMetadata)


class Meta(KVConnectorMetadata):
    def __init__(self):
        self.to_recv = {}
        self.to_send = {}

    def add(self, request_id, blocks, load_remote=True):
        if load_remote:
            self.to_recv[request_id] = blocks
        else:
            self.to_send[request_id] = blocks


class Conn(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self._need_recv = {}
        self._need_send = {}

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        self._need_recv[request.request_id] = blocks

    def request_finished(self, request, block_ids):
        self._need_send[request.request_id] = block_ids
        return True, None

    def build_connector_meta(self, scheduler_output):
        meta = Meta()
        for rid, blocks in self._need_recv.items():
            meta.add(rid, blocks)
        for rid, blocks in self._need_send.items():
            meta.add(rid, blocks, load_remote=False)
        self._need_recv.clear()
        self._need_send.clear()
        return meta

    def start_load_kv(self, forward_context, **kwargs):
        meta = self._get_connector_metadata()
        for rid in meta.to_recv:
            self._pull(rid)
        for rid in meta.to_send:
            self._push(rid)

    def _pull(self, rid):
        return rid

    def _push(self, rid):
        return rid
'''


def _graph(tmp_path: Path, name: str = "gated", source: str = SOURCE):
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text(source)
    a = analyse(Request(sources=[str(pkg)], context=[str(stub_root())], use_cache=False))
    return with_state_links(a.linker)


def _call_into_add(result) -> paths.Step:
    assert isinstance(result, paths.PathResult)
    return next(s for p in result.paths for s in p
                if s.kind == "call" and s.dst == "gated.Meta.add")


def test_each_call_takes_only_the_arm_its_literals_open(tmp_path: Path) -> None:
    g = _graph(tmp_path)
    # the receive list's ids reach Meta.to_recv through the call with the default
    recv = _call_into_add(paths.find_paths(g, "gated.Conn.update_state_after_alloc",
                                           "gated.Meta.to_recv"))
    assert (recv.line, recv.lines) == (33, ())
    send = _call_into_add(paths.find_paths(g, "gated.Conn.request_finished", "gated.Meta.to_send"))
    assert (send.line, send.lines) == (35, ())
    # that call passes no False, and the other call does not read the receive list
    assert isinstance(paths.find_paths(g, "gated.Conn.update_state_after_alloc",
                                       "gated.Meta.to_send"), paths.NoPath)
    assert isinstance(paths.find_paths(g, "gated.Conn.request_finished", "gated.Meta.to_recv"),
                      paths.NoPath)


READER = '''
import asyncio

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Conn(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self._loads = {}
        self._saves = {}
        self.loop = asyncio.new_event_loop()

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        self._loads[request.request_id] = blocks

    def request_finished(self, request, block_ids):
        self._saves[request.request_id] = block_ids
        return True, None

    def wait_for_save(self):
        if self._saves:
            asyncio.run_coroutine_threadsafe(
                self._send(list(self._saves)), self.loop)
        for rid in list(self._loads):
            self._load(rid)

    async def _send(self, rids):
        return rids

    def _load(self, rid):
        return rid
'''


def test_a_reader_passes_a_field_only_to_the_calls_that_depend_on_it(tmp_path: Path) -> None:
    # the call on a continuation line of a statement depends on that statement
    g = _graph(tmp_path, "reader", READER)
    assert isinstance(paths.find_paths(g, "reader.Conn.request_finished", "reader.Conn._send"),
                      paths.PathResult)
    assert isinstance(paths.find_paths(g, "reader.Conn.update_state_after_alloc",
                                       "reader.Conn._load"), paths.PathResult)
    assert isinstance(paths.find_paths(g, "reader.Conn.update_state_after_alloc",
                                       "reader.Conn._send"), paths.NoPath)
