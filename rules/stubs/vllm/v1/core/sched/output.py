"""The scheduler's plan for one step, sent to every worker."""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorMetadata


@dataclass
class CachedRequestData:
    """The running requests scheduled again this step, by position."""

    req_ids: list[str]
    # a request resumed after preemption: its new_block_ids are its whole table
    resumed_req_ids: set[str]
    new_block_ids: list[tuple[list[int], ...] | None]
    num_computed_tokens: list[int]


@dataclass
class SchedulerOutput:
    """Requests scheduled this step and the connector's plan for them."""

    scheduled_cached_reqs: CachedRequestData
    num_scheduled_tokens: dict[str, int]
    finished_req_ids: set[str] = field(default_factory=set)
    preempted_req_ids: set[str] = field(default_factory=set)
    # Built by the scheduler-side connector, read by the worker-side one.
    kv_connector_metadata: "KVConnectorMetadata | None" = None
