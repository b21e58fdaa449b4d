"""The scheduler's plan for one step, sent to every worker."""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorMetadata


@dataclass
class SchedulerOutput:
    """Requests scheduled this step and the connector's plan for them."""

    num_scheduled_tokens: dict[str, int]
    finished_req_ids: set[str] = field(default_factory=set)
    preempted_req_ids: set[str] = field(default_factory=set)
    # Built by the scheduler-side connector, read by the worker-side one.
    kv_connector_metadata: "KVConnectorMetadata | None" = None
