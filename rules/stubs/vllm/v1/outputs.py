"""Messages the workers send back to the scheduler."""

from dataclasses import dataclass, field


@dataclass
class KVConnectorOutput:
    """What the worker-side connector reports after a step."""

    # ids of requests whose KV save / load finished
    finished_sending: set[str] | None = None
    finished_recving: set[str] | None = None
    # ids of externally computed KV blocks that failed to load
    invalid_block_ids: set[int] = field(default_factory=set)

    def is_empty(self) -> bool:
        """True when there is nothing to report."""
        return (
            not self.finished_sending
            and not self.finished_recving
            and not self.invalid_block_ids
        )


@dataclass
class ModelRunnerOutput:
    """Result of one model step."""

    req_ids: list[str]
    kv_connector_output: KVConnectorOutput | None = None
