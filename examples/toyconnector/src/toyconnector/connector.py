"""ToyConnector: one class serves both roles, checking ``self.role`` per hook.

Scheduler side: a prompt prefix found in the store is loaded asynchronously,
so the scheduler parks the request (WAITING_FOR_REMOTE_KVS). Worker side: the
load copies blocks from the store and reports the request in
``finished_recving``, which releases it. Finished requests are saved to the
store; their blocks stay allocated until the save shows up in
``finished_sending``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toyconnector.store import STORE, InMemoryKVStore
from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
)

if TYPE_CHECKING:
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.request import Request

logger = logging.getLogger(__name__)


@dataclass
class ToyMetadata(KVConnectorMetadata):
    """This step's plan: request id -> (prompt prefix, block ids)."""

    loads: dict[str, tuple[list[int], list[int]]] = field(default_factory=dict)
    saves: dict[str, tuple[list[int], list[int]]] = field(default_factory=dict)


class ToyConnector(KVConnectorBase_V1):
    """Loads prompt prefixes from, and saves finished requests to, a dict."""

    def __init__(self, vllm_config: Any, role: KVConnectorRole, kv_cache_config: Any = None):
        super().__init__(vllm_config, role, kv_cache_config)
        self._store: InMemoryKVStore = STORE
        self._block_size: int = vllm_config.cache_config.block_size
        # scheduler side
        self._loads: dict[str, tuple[list[int], list[int]]] = {}
        self._saves: dict[str, tuple[list[int], list[int]]] = {}
        # worker side
        self._kv: dict[int, bytes] = {}
        self._recved: set[str] = set()
        self._sent: set[str] = set()
        self._failed_blocks: set[int] = set()

    # ---- scheduler side ----

    def get_num_new_matched_tokens(self, request: Request, num_computed_tokens: int) -> tuple[int | None, bool]:
        """A probe: how many more tokens the store holds. Commits nothing."""
        hit = self._store.longest_prefix(request.prompt_token_ids, self._block_size)
        extra = hit - num_computed_tokens
        if extra <= 0:
            return 0, False
        return extra, True  # load asynchronously: the scheduler parks the request

    def update_state_after_alloc(self, request: Request, blocks: KVCacheBlocks, num_external_tokens: int) -> None:
        """Commit: remember which blocks to fill for this request."""
        if num_external_tokens > 0:
            prefix = request.prompt_token_ids[: request.num_computed_tokens + num_external_tokens]
            self._loads[request.request_id] = (prefix, blocks.get_block_ids())

    def build_connector_meta(self, scheduler_output: SchedulerOutput) -> ToyMetadata:
        """Send this step's loads and saves to the workers."""
        meta = ToyMetadata(loads=self._loads, saves=self._saves)
        self._loads, self._saves = {}, {}
        return meta

    def request_finished(self, request: Request, block_ids: list[int]) -> tuple[bool, dict | None]:
        """Save the prompt's blocks; keep them allocated until the save is done."""
        if self.role != KVConnectorRole.SCHEDULER or not block_ids:
            return False, None
        self._saves[request.request_id] = (request.prompt_token_ids, list(block_ids))
        return True, None

    # ---- worker side ----

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        """Copy planned blocks from the store; a miss is a reported failure."""
        meta = self._get_connector_metadata()
        assert isinstance(meta, ToyMetadata)
        for req_id, (prefix, block_ids) in meta.loads.items():
            saved = self._store.get(prefix)
            if saved is None:
                self._failed_blocks.update(block_ids)
            else:
                self._kv.update(zip(block_ids, saved))
            self._recved.add(req_id)  # reported even on failure: releases the request
        logger.info("toy: loaded %d request(s)", len(meta.loads))

    def wait_for_layer_load(self, layer_name: str) -> None:
        """Loads are synchronous here."""

    def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any) -> None:
        """Nothing per layer: whole requests are saved in wait_for_save."""

    def wait_for_save(self) -> None:
        """Save every planned request to the store."""
        meta = self._get_connector_metadata()
        assert isinstance(meta, ToyMetadata)
        for req_id, (prefix, block_ids) in meta.saves.items():
            self._store.put(prefix, [self._kv.get(b, b"") for b in block_ids])
            self._sent.add(req_id)

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        """(saved, loaded) request ids since the last call."""
        sent, self._sent = self._sent, set()
        recved, self._recved = self._recved, set()
        return sent or None, recved or None

    def get_block_ids_with_load_errors(self) -> set[int]:
        """Blocks whose prefix had vanished from the store."""
        failed, self._failed_blocks = self._failed_blocks, set()
        return failed
