"""KV connector driver of the GPU model runner (worker process)."""

from typing import TYPE_CHECKING, Any

from vllm.distributed.kv_transfer import get_kv_transfer_group
from vllm.v1.outputs import KVConnectorOutput

if TYPE_CHECKING:
    from vllm.v1.core.sched.output import SchedulerOutput


class KVConnector:
    """Used when no KV connector is configured: every hook does nothing."""

    def pre_forward(self, scheduler_output: "SchedulerOutput") -> None:
        return None

    def post_forward(self, scheduler_output: "SchedulerOutput") -> KVConnectorOutput | None:
        return None


class ActiveKVConnector(KVConnector):
    """Runs the worker-side connector's hooks around each forward pass."""

    def __init__(self, kv_caches: dict[str, Any]) -> None:
        self.kv_connector = get_kv_transfer_group()
        self.kv_connector.register_kv_caches(kv_caches)

    def pre_forward(self, scheduler_output: "SchedulerOutput") -> None:
        """Hand over the scheduler's plan and start this step's loads."""
        metadata = scheduler_output.kv_connector_metadata
        assert metadata is not None
        self.kv_connector.handle_preemptions(metadata)
        self.kv_connector.bind_connector_metadata(metadata)
        self.kv_connector.start_load_kv(None)

    def post_forward(self, scheduler_output: "SchedulerOutput") -> KVConnectorOutput:
        """Wait for saves and report finished transfers and failed blocks."""
        self.kv_connector.wait_for_save()
        results = self.kv_connector.get_transfer_results(scheduler_output.finished_req_ids)
        output = KVConnectorOutput(
            finished_sending=results.finished_sending,
            finished_recving=results.finished_recving,
            invalid_block_ids=self.kv_connector.get_block_ids_with_load_errors(),
        )
        self.kv_connector.clear_connector_metadata()
        return output
