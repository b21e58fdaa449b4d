"""The v1 scheduler, reduced to what touches the KV connector."""

from collections import deque
from collections.abc import Iterable
from typing import Any

from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
from vllm.distributed.kv_transfer.kv_connector.v1 import KVConnectorRole
from vllm.logger import init_logger
from vllm.v1.core.kv_cache_manager import KVCacheManager
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.outputs import KVConnectorOutput, ModelRunnerOutput
from vllm.v1.request import Request, RequestStatus

logger = init_logger(__name__)


class Scheduler:
    """Decides which requests run each step and drives the KV connector."""

    def __init__(self, vllm_config: Any, kv_cache_manager: KVCacheManager, token_budget: int) -> None:
        self.vllm_config = vllm_config
        self.kv_cache_manager = kv_cache_manager
        self.token_budget = token_budget
        self.requests: dict[str, Request] = {}
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.finished_req_ids: set[str] = set()
        self.preempted_req_ids: set[str] = set()
        # Requests parked in WAITING_FOR_REMOTE_KVS whose load was reported done.
        self.finished_recving_kv_req_ids: set[str] = set()
        self.failed_recving_kv_req_ids: set[str] = set()

        # One connector per process; this one has the SCHEDULER role.
        self.connector = None
        if vllm_config.kv_transfer_config is not None:
            self.connector = KVConnectorFactory.create_connector(
                config=vllm_config, role=KVConnectorRole.SCHEDULER
            )

    def add_request(self, request: Request) -> None:
        """Queue a new request."""
        self.requests[request.request_id] = request
        self.waiting.append(request)
        if self.connector is not None:
            self.connector.on_new_request(request)

    def schedule(self) -> SchedulerOutput:
        """Pick this step's requests, asking the connector for external hits."""
        num_scheduled_tokens: dict[str, int] = {}
        budget = self.token_budget

        # 1. Running requests first; preempt the newest when blocks run out.
        for request in list(self.running):
            if request not in self.running:
                continue
            num_new = max(1, request.num_tokens - request.num_computed_tokens)
            while self.kv_cache_manager.allocate_slots(request, num_new) is None:
                victim = self.running.pop()
                self._preempt_request(victim)
                if victim is request:
                    break
            else:
                num_scheduled_tokens[request.request_id] = num_new
                budget -= num_new

        # 2. Waiting requests.
        skipped: deque[Request] = deque()
        while self.waiting and budget > 0:
            request = self.waiting.popleft()
            if self._is_blocked_waiting_status(request.status):
                if not self._handle_blocked_waiting_request(request):
                    skipped.append(request)
                    continue

            num_local = self.kv_cache_manager.get_num_computed_tokens(request)
            num_external = 0
            load_kv_async = False
            if self.connector is not None:
                ext_tokens, load_kv_async = self.connector.get_num_new_matched_tokens(
                    request, num_local
                )
                if ext_tokens is None:
                    # The connector needs more time: ask again next step.
                    skipped.append(request)
                    continue
                num_external = ext_tokens

            num_computed = num_local + num_external
            num_new = 0 if load_kv_async else request.num_tokens - num_computed
            new_blocks = self.kv_cache_manager.allocate_slots(
                request, num_new, num_external_computed_tokens=num_external
            )
            if new_blocks is None:
                skipped.append(request)
                break

            if self.connector is not None:
                self.connector.update_state_after_alloc(request, new_blocks, num_external)

            if load_kv_async:
                # Park the request until its id arrives in finished_recving.
                request.status = RequestStatus.WAITING_FOR_REMOTE_KVS
                logger.info("Request %s waits for remote KV", request.request_id)
                skipped.append(request)
                continue

            request.num_computed_tokens = num_computed
            request.status = RequestStatus.RUNNING
            self.running.append(request)
            num_scheduled_tokens[request.request_id] = num_new
            budget -= num_new

        self.waiting.extendleft(reversed(skipped))

        scheduler_output = SchedulerOutput(
            num_scheduled_tokens=num_scheduled_tokens,
            finished_req_ids=self.finished_req_ids,
            preempted_req_ids=self.preempted_req_ids,
        )
        # 3. The connector packs its plan for the workers.
        if self.connector is not None:
            meta = self.connector.build_connector_meta(scheduler_output)
            scheduler_output.kv_connector_metadata = meta
        self.finished_req_ids = set()
        self.preempted_req_ids = set()
        return scheduler_output

    def _preempt_request(self, request: Request) -> None:
        """Free a running request's blocks and put it back in the queue."""
        assert request.status == RequestStatus.RUNNING, "only running requests are preempted"
        self.kv_cache_manager.free(request)
        request.status = RequestStatus.PREEMPTED
        request.num_computed_tokens = 0
        request.num_preemptions += 1
        self.preempted_req_ids.add(request.request_id)
        self.waiting.appendleft(request)

    @staticmethod
    def _is_blocked_waiting_status(status: RequestStatus) -> bool:
        """Statuses that must be cleared before a request can be scheduled."""
        return status == RequestStatus.WAITING_FOR_REMOTE_KVS

    def _handle_blocked_waiting_request(self, request: Request) -> bool:
        """True when a parked request may be scheduled this step."""
        if request.status == RequestStatus.WAITING_FOR_REMOTE_KVS:
            if request.request_id not in self.finished_recving_kv_req_ids:
                return False
            self._update_waiting_for_remote_kv(request)
            if request.num_preemptions:
                request.status = RequestStatus.PREEMPTED
            else:
                request.status = RequestStatus.WAITING
        return True

    def _update_waiting_for_remote_kv(self, request: Request) -> None:
        """Cache the loaded blocks (or drop them after a failed load)."""
        if request.request_id in self.failed_recving_kv_req_ids:
            if request.num_computed_tokens:
                self.kv_cache_manager.cache_blocks(request, request.num_computed_tokens)
            else:
                self.kv_cache_manager.free(request)
            self.failed_recving_kv_req_ids.remove(request.request_id)
        else:
            self.kv_cache_manager.cache_blocks(request, request.num_computed_tokens)
        self.finished_recving_kv_req_ids.remove(request.request_id)

    def update_from_output(
        self, scheduler_output: SchedulerOutput, model_runner_output: ModelRunnerOutput
    ) -> list[str]:
        """Advance requests after a step and absorb the connector's report."""
        kv_connector_output = model_runner_output.kv_connector_output
        if kv_connector_output and kv_connector_output.invalid_block_ids:
            self._update_requests_with_invalid_blocks(
                self.waiting, kv_connector_output.invalid_block_ids
            )

        finished: list[str] = []
        for req_id, num_tokens in scheduler_output.num_scheduled_tokens.items():
            request = self.requests.get(req_id)
            if request is None or request.status != RequestStatus.RUNNING:
                continue
            request.num_computed_tokens += num_tokens
            if request.num_computed_tokens >= request.num_tokens:
                finished.append(req_id)
        self.finish_requests(finished, RequestStatus.FINISHED_STOPPED)

        if kv_connector_output:
            self._update_from_kv_xfer_finished(kv_connector_output)
        return finished

    def _update_requests_with_invalid_blocks(
        self, requests: Iterable[Request], invalid_block_ids: set[int]
    ) -> set[str]:
        """Mark parked requests whose blocks failed to load; they recompute."""
        affected: set[str] = set()
        for request in requests:
            if request.status != RequestStatus.WAITING_FOR_REMOTE_KVS:
                continue
            block_ids = self.kv_cache_manager.get_block_ids(request.request_id)
            if invalid_block_ids.intersection(block_ids):
                self.failed_recving_kv_req_ids.add(request.request_id)
                request.num_computed_tokens = 0
                affected.add(request.request_id)
        return affected

    def _update_from_kv_xfer_finished(self, kv_connector_output: KVConnectorOutput) -> None:
        """Record finished loads (to promote parked requests) and free sent ones."""
        if self.connector is not None:
            self.connector.update_connector_output(kv_connector_output)

        for req_id in kv_connector_output.finished_recving or ():
            logger.info("Finished recving KV transfer for request %s", req_id)
            req = self.requests[req_id]
            if req.status == RequestStatus.WAITING_FOR_REMOTE_KVS:
                self.finished_recving_kv_req_ids.add(req_id)
            else:
                assert RequestStatus.is_finished(req.status)
                self._free_blocks(req)
        for req_id in kv_connector_output.finished_sending or ():
            self._free_blocks(self.requests[req_id])

    def finish_requests(self, request_ids: Iterable[str], finished_status: RequestStatus) -> None:
        """Finish requests (stopped, aborted or failed)."""
        assert RequestStatus.is_finished(finished_status)
        for req_id in request_ids:
            request = self.requests.get(req_id)
            if request is None or request.is_finished():
                continue
            if request.status == RequestStatus.RUNNING:
                self.running.remove(request)
            elif request.status == RequestStatus.WAITING_FOR_REMOTE_KVS:
                self.finished_recving_kv_req_ids.discard(req_id)
            request.status = finished_status
            self._free_request(request)

    def _free_request(self, request: Request) -> dict[str, Any] | None:
        """Free a finished request now, or later if the connector still sends."""
        delay_free_blocks, kv_xfer_params = self._connector_finished(request)
        self.finished_req_ids.add(request.request_id)
        if not delay_free_blocks:
            self._free_blocks(request)
        return kv_xfer_params

    def _connector_finished(self, request: Request) -> tuple[bool, dict[str, Any] | None]:
        """Ask the connector whether it still needs the request's blocks."""
        if self.connector is None:
            return False, None
        block_ids = self.kv_cache_manager.get_block_ids(request.request_id)
        return self.connector.request_finished(request, block_ids)

    def _free_blocks(self, request: Request) -> None:
        """Give the request's blocks back and forget it."""
        assert request.is_finished()
        self.kv_cache_manager.free(request)
        del self.requests[request.request_id]

    def shutdown(self) -> None:
        """Shut the connector down."""
        if self.connector is not None:
            self.connector.shutdown()
