"""KV connector hooks of the model runner (worker process)."""

from typing import TYPE_CHECKING, Any

from vllm.distributed.kv_transfer import get_kv_transfer_group, has_kv_transfer_group
from vllm.v1.outputs import KVConnectorOutput, ModelRunnerOutput

if TYPE_CHECKING:
    from vllm.v1.core.sched.output import SchedulerOutput


class KVConnectorModelRunnerMixin:
    """Drives the worker-side connector around each forward pass."""

    @staticmethod
    def kv_connector_no_forward(scheduler_output: "SchedulerOutput") -> ModelRunnerOutput:
        """Run the connector's step when there is no model work to do."""
        KVConnectorModelRunnerMixin._start_kv_connector_step(scheduler_output, None)
        output = KVConnectorModelRunnerMixin._get_kv_connector_output(scheduler_output)
        return ModelRunnerOutput(req_ids=[], kv_connector_output=output)

    @staticmethod
    def _start_kv_connector_step(scheduler_output: "SchedulerOutput", forward_context: Any) -> None:
        """Bind the scheduler's plan and start this step's loads."""
        kv_connector = get_kv_transfer_group()
        metadata = scheduler_output.kv_connector_metadata
        assert metadata is not None
        kv_connector.bind_connector_metadata(metadata)
        kv_connector.handle_preemptions(metadata)
        kv_connector.start_load_kv(forward_context)

    @staticmethod
    def _get_kv_connector_output(scheduler_output: "SchedulerOutput") -> KVConnectorOutput | None:
        """Finish the step and collect what the connector reports."""
        if not has_kv_transfer_group():
            return None
        kv_connector = get_kv_transfer_group()
        kv_connector.wait_for_save()
        results = kv_connector.get_transfer_results(scheduler_output.finished_req_ids)
        output = KVConnectorOutput(
            finished_sending=results.finished_sending,
            finished_recving=results.finished_recving,
            invalid_block_ids=kv_connector.get_block_ids_with_load_errors(),
        )
        kv_connector.clear_connector_metadata()
        return output
