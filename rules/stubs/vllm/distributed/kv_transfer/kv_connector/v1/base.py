"""Base class of the v1 KV connectors (miniature).

vLLM creates one connector per process with a role. The scheduler-side
instance answers ``get_num_new_matched_tokens``, commits in
``update_state_after_alloc`` and packs a plan in ``build_connector_meta``; the
worker-side instance receives that plan through ``bind_connector_metadata``,
loads and saves KV, and reports completions through ``get_finished``.
"""

import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vllm.logger import init_logger

if TYPE_CHECKING:
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.outputs import KVConnectorOutput
    from vllm.v1.request import Request

logger = init_logger(__name__)


@dataclass
class KVConnectorTransferResults:
    """Completed sends and receives seen by one worker."""

    finished_sending: set[str] = field(default_factory=set)
    finished_recving: set[str] = field(default_factory=set)


class KVConnectorRole(enum.Enum):
    """Which process a connector instance lives in."""

    SCHEDULER = 0
    WORKER = 1


class KVConnectorMetadata(ABC):  # noqa: B024
    """Opaque plan built by the scheduler-side connector for the workers."""


class KVConnectorBase_V1(ABC):
    """Base class for KV connectors."""

    def __init__(self, vllm_config: Any, role: KVConnectorRole, kv_cache_config: Any = None):
        self._connector_metadata: KVConnectorMetadata | None = None
        self._vllm_config = vllm_config
        self._role = role

    @property
    def role(self) -> KVConnectorRole:
        """The role of this instance."""
        return self._role

    # ---- worker side ----

    def register_kv_caches(self, kv_caches: dict[str, Any]) -> None:
        """Receive the worker's KV cache tensors, by layer name."""
        return None

    def bind_connector_metadata(self, connector_metadata: KVConnectorMetadata) -> None:
        """Receive this step's plan before the forward pass."""
        self._connector_metadata = connector_metadata

    def clear_connector_metadata(self) -> None:
        """Forget the plan after the forward pass."""
        self._connector_metadata = None

    def has_connector_metadata(self) -> bool:
        """Whether a plan is bound: vLLM skips the layer hooks when not."""
        return self._connector_metadata is not None

    def _get_connector_metadata(self) -> KVConnectorMetadata:
        """The plan bound for the current step."""
        assert self._connector_metadata is not None
        return self._connector_metadata

    def handle_preemptions(self, kv_connector_metadata: KVConnectorMetadata) -> None:
        """Drop in-flight work of requests preempted this step."""
        return None

    @abstractmethod
    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        """Start loading the KV planned for this step."""

    @abstractmethod
    def wait_for_layer_load(self, layer_name: str) -> None:
        """Block until one layer's KV is loaded."""

    @abstractmethod
    def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any) -> None:
        """Start saving one layer's KV."""

    @abstractmethod
    def wait_for_save(self) -> None:
        """Block until this step's saves are queued or done."""

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        """Ids of requests whose async (saves, loads) finished."""
        return None, None

    def get_transfer_results(self, finished_req_ids: set[str]) -> KVConnectorTransferResults:
        """Completed sends and receives, built on ``get_finished``."""
        finished_sending, finished_recving = self.get_finished(finished_req_ids)
        return KVConnectorTransferResults(
            finished_sending=set(finished_sending or ()),
            finished_recving=set(finished_recving or ()),
        )

    def get_block_ids_with_load_errors(self) -> set[int]:
        """Block ids whose load failed since the last call."""
        return set()

    def build_connector_worker_meta(self) -> Any:
        """Worker-side metadata to send back with the output, if any."""
        return None

    # ---- scheduler side ----

    def on_new_request(self, request: "Request") -> None:
        """A request was added to the scheduler."""
        return None

    @abstractmethod
    def get_num_new_matched_tokens(
        self, request: "Request", num_computed_tokens: int
    ) -> tuple[int | None, bool]:
        """(tokens the connector can provide beyond num_computed_tokens or None
        to be asked again later, whether they load asynchronously). May be
        called many times for one request: it must not commit anything."""

    @abstractmethod
    def update_state_after_alloc(
        self, request: "Request", blocks: "KVCacheBlocks", num_external_tokens: int
    ) -> None:
        """Commit point: blocks were allocated for the request."""

    @abstractmethod
    def build_connector_meta(self, scheduler_output: "SchedulerOutput") -> KVConnectorMetadata:
        """Pack this step's plan for the workers and reset the step state."""

    def get_external_cache_hit_sources(
        self, request: "Request", num_external_tokens: int
    ) -> dict[str, int]:
        """Split the external hit by the cache tier that supplied it."""
        return {"external": num_external_tokens}

    def update_connector_output(self, connector_output: "KVConnectorOutput") -> None:
        """See what the workers reported this step."""
        return None

    def request_finished(
        self, request: "Request", block_ids: list[int]
    ) -> tuple[bool, dict[str, Any] | None]:
        """Whether to delay freeing the blocks until the request shows up in
        finished_sending, and transfer params to return to the client."""
        return False, None

    def take_events(self) -> list[Any]:
        """KV cache events gathered since the last call."""
        return []

    def shutdown(self) -> None:
        """Release resources."""
        logger.info("Shutting down KV connector %s", type(self).__name__)
