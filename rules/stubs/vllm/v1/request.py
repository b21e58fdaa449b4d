"""Requests and their lifecycle states."""

import enum


class RequestStatus(enum.IntEnum):
    """Status of a request."""

    WAITING = enum.auto()
    WAITING_FOR_REMOTE_KVS = enum.auto()
    RUNNING = enum.auto()
    PREEMPTED = enum.auto()
    # Anything after PREEMPTED is a finished status.
    FINISHED_STOPPED = enum.auto()
    FINISHED_ABORTED = enum.auto()
    FINISHED_ERROR = enum.auto()

    @staticmethod
    def is_finished(status: "RequestStatus") -> bool:
        """True for the FINISHED_* statuses."""
        return status > RequestStatus.PREEMPTED


class Request:
    """One generation request as the scheduler tracks it."""

    def __init__(self, request_id: str, prompt_token_ids: list[int]) -> None:
        self.request_id = request_id
        self.prompt_token_ids = prompt_token_ids
        self.status = RequestStatus.WAITING
        self.num_computed_tokens = 0
        self.num_preemptions = 0
        self.kv_transfer_params: dict | None = None

    @property
    def num_tokens(self) -> int:
        """Number of prompt tokens."""
        return len(self.prompt_token_ids)

    def is_finished(self) -> bool:
        """True once the request reached a FINISHED_* status."""
        return RequestStatus.is_finished(self.status)
