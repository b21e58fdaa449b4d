"""Bugs a connector fixed in a later release: ``check`` reports each on the
release before the fix, at the function the fix changed, and not on the
release after it (the fixed corpus is triaged in ``test_real_findings``)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.integration.conftest import release, release_cache_dir
from tests.integration.corpora import Corpus, check_corpus

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class FixedBug:
    """A finding on the release before a fix, gone on the release after it."""

    name: str
    before: Corpus
    after: Corpus
    rule: str
    function: str
    # the same function's name after the fix, when its module moved
    after_function: str | None = None
    # a text the finding's message holds (the field, the container), when the
    # function keeps another finding of the same rule after the fix
    detail: str = ""


def _pegaflow(version: str) -> Corpus:
    return Corpus(f"pegaflow-llm {version}", f"pegaflow-llm=={version}", "pegaflow")


def _lmcache(version: str) -> Corpus:
    return Corpus(f"lmcache {version}", f"lmcache=={version}", "lmcache/integration/vllm")


def _ascend(version: str) -> Corpus:
    return Corpus(f"vllm-ascend {version}", f"vllm-ascend=={version}", "vllm_ascend/distributed")


def _vllm(version: str) -> Corpus:
    return Corpus(f"vllm {version} connectors", f"vllm=={version}",
                  "vllm/distributed/kv_transfer/kv_connector/v1", f"vllm=={version}")


def _kvbm(version: str) -> Corpus:
    return Corpus(f"kvbm {version}", f"kvbm=={version}", "kvbm/vllm_integration")


def _tpu(version: str, vllm: str) -> Corpus:
    return Corpus(f"tpu-inference {version}", f"tpu-inference=={version}",
                  "tpu_inference/distributed", vllm)


def _mooncake(version: str, vllm: str = "vllm==0.11.1") -> Corpus:
    return Corpus(f"mooncake-transfer-engine {version}",
                  f"mooncake-transfer-engine=={version}", "mooncake", vllm)


def _ucm(version: str, vllm: str = "vllm==0.11.0") -> Corpus:
    # Huawei's Unified Cache Management (uc-manager): first checked 2026-12-07,
    # after every rule here was written
    return Corpus(f"uc-manager {version}", f"uc-manager=={version}", "ucm/integration/vllm",
                  vllm)


BUGS = (
    # The same bug in vLLM's MoRIIO connector, found by the rule after it was
    # written from NIXL's: 0.22.1 recorded a deadline per delayed request but
    # nothing ever tested it, so a free notification that never came held the
    # prefill blocks. 0.23.0 reaps the deferred sends whose deadline passed
    # ("hanging indefinitely waiting for a free notification that never comes").
    FixedBug("vllm moriio delayed free ends only with the decode side's notification",
             _vllm("0.22.1"),
             _vllm("0.23.0"),
             "kvc-delayed-free-expires",
             "vllm.distributed.kv_transfer.kv_connector.v1.moriio.moriio_connector"
             ".MoRIIOConnectorScheduler.request_finished"),
    # vLLM 0.9.2's NIXL connector delayed the prefill side's free until the
    # decode side's notification said it had read the blocks; nothing else
    # ever reported the request in finished_sending, so a decode side that
    # died or aborted first left the blocks held. 0.10.0 records a deadline
    # per delayed request (VLLM_NIXL_ABORT_REQUEST_TIMEOUT).
    FixedBug("vllm nixl delayed free ends only with the decode side's notification",
             _vllm("0.9.2"),
             _vllm("0.10.0"),
             "kvc-delayed-free-expires",
             "vllm.distributed.kv_transfer.kv_connector.v1.nixl_connector.NixlConnectorScheduler"
             ".request_finished"),
    # Mooncake's prefill side answered a decode side's pull from an executor
    # task: send_kv_to_decode, then queue the identity for the thread that
    # answers. A failed transfer (RuntimeError in _send_blocks) ended the task
    # in a future nobody keeps, and the peer never got its answer. 0.3.9
    # answers TRANS_ERROR on failure.
    FixedBug("mooncake handshake task loses the peer's answer on a failed transfer",
             _mooncake("0.3.8.post1"),
             _mooncake("0.3.9"),
             "kvc-future-completed",
             "mooncake.mooncake_connector_v1.MooncakeConnectorWorker._handle_handshake"),
    # vllm-ascend 0.18.0's store receiving thread reported a load finished at
    # the end of _handle_request; any failure before (the get, an empty key
    # list) went to run(), which only logs: the request waited in
    # WAITING_FOR_REMOTE_KVS for good. 0.23.0 reports it in every case.
    FixedBug("vllm-ascend store receiving thread loses a request on a failed get",
             _ascend("0.18.0"),
             _ascend("0.23.0"),
             "kvc-request-id-not-dropped",
             "vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.kv_transfer"
             ".KVCacheStoreRecvingThread._handle_request"),
    # Its pool worker read stored_requests through self.kv_send_thread, which
    # holds a KVCacheStoreLayerSendingThread (no such member) in layerwise
    # mode: AttributeError in get_finished. 0.23.0 gives that thread the member.
    FixedBug("vllm-ascend pool worker reads a member the layerwise thread lacks",
             _ascend("0.18.0"),
             _ascend("0.23.0"),
             "kvc-field-members-exist",
             "vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.pool_worker"
             ".KVPoolWorker.get_and_clear_finished_requests"),
    # Its store sending thread decremented the per-request pending-save count
    # only at the end of _handle_request; an exception before it went to
    # run(), which only logs: the count never reached 0 and the delayed-free
    # request was never in finished_sending. 0.23.0 decrements in a finally
    # and logs a failed save, which is right for a save (no failure channel).
    FixedBug("vllm-ascend store sending thread loses a delayed free on a failed save",
             _ascend("0.18.0"),
             _ascend("0.23.0"),
             "kvc-request-id-not-dropped",
             "vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.kv_transfer"
             ".KVCacheStoreSendingThread._handle_request"),
    # LMCache 0.3.3's build_connector_meta returned early in its branch for an
    # older vLLM's list of cached requests, before handing the step's pinned
    # lookups to the metadata: they were never unpinned. 0.3.4 hands them over
    # on that path too.
    FixedBug("lmcache early return skips the hand-over of the step's lookups",
             _lmcache("0.3.3"),
             _lmcache("0.3.4"),
             "kvc-step-releases-on-every-exit",
             "lmcache.integration.vllm.vllm_v1_adapter.LMCacheConnectorV1Impl"
             ".build_connector_meta"),
    # Dynamo's KVBM connector overrode bind_connector_metadata to hand the
    # metadata to its worker, without super(): has_connector_metadata() stayed
    # False and vLLM never called save_kv_layer. 0.8.0 calls super() first.
    FixedBug("kvbm bind_connector_metadata override never binds the base's metadata",
             _kvbm("0.7.1"),
             _kvbm("0.8.0"),
             "kvc-override-keeps-base-state",
             "kvbm.vllm_integration.connector.dynamo_connector.DynamoConnector"
             ".bind_connector_metadata"),
    # KVBM 0.8.1's leader read CachedRequestData.resumed_from_preemption,
    # which vLLM had replaced by resumed_req_ids: AttributeError in
    # build_connector_meta on every step with a running request. 0.9.0 reads
    # resumed_req_ids.
    FixedBug("kvbm reads a field of vLLM's CachedRequestData that vLLM removed",
             _kvbm("0.8.1"),
             _kvbm("0.9.0"),
             "kvc-vllm-members-exist",
             "kvbm.vllm_integration.connector_leader.KvConnectorLeader.build_connector_meta"),
    # vLLM 0.9.0's MultiConnector kept which child answered the probe in
    # _requests_to_connector and popped it only in update_state_after_alloc:
    # a request aborted while waiting left its entry. 0.9.1 pops it in
    # request_finished.
    FixedBug("vllm multi-connector probe entry removed only on allocation",
             _vllm("0.9.0"),
             _vllm("0.9.1"),
             "kvc-request-state-balanced",
             "vllm.distributed.kv_transfer.kv_connector.v1.multi_connector.MultiConnector"
             ".request_finished"),
    # LMCache 0.3.3's start_load_kv returned when the forward context had no
    # attention metadata, before it unpinned the step's lookups in one call
    # (lookup_unpin(metadata.lookup_requests_in_step)). 0.3.4 unpins first.
    FixedBug("lmcache early return skips the step's batch unpin",
             _lmcache("0.3.3"),
             _lmcache("0.3.4"),
             "kvc-step-releases-on-every-exit",
             "lmcache.integration.vllm.vllm_v1_adapter.LMCacheConnectorV1Impl.start_load_kv"),
    # LMCache 0.3.10.post2's wait_for_save read
    # request.disagg_spec.num_transferred_tokens for every producer request;
    # disagg_spec (Optional in ReqMeta) is None without disaggregation
    # parameters (shared-storage PD), and the worker's step raised. 0.3.11
    # tests the spec first.
    FixedBug("lmcache producer save reads a disaggregation spec it may not have",
             _lmcache("0.3.10.post2"),
             _lmcache("0.3.11"),
             "kvc-optional-field-tested",
             "lmcache.integration.vllm.vllm_v1_adapter.LMCacheConnectorV1Impl.wait_for_save",
             detail="disagg_spec"),
    # LMCache 0.3.13's extract_request_configs read sampling_params.extra_args
    # of the request's sampling_params, which vLLM leaves None for a pooling
    # request. 0.3.14 tests sampling_params first.
    FixedBug("lmcache request configs read a pooling request's missing sampling params",
             _lmcache("0.3.13"),
             _lmcache("0.3.14"),
             "kvc-optional-field-tested",
             "lmcache.integration.vllm.vllm_v1_adapter.extract_request_configs"),
    # LMCache 0.5.5's worker adapter returned from submit_store_request when the
    # heartbeat found the server unhealthy, with no completion receipt; in lazy
    # offload the scheduler waits for one per rank before it unpins the
    # request's blocks. 0.5.6 records the receipt on that exit.
    FixedBug("lmcache store dropped on an unhealthy server sends no receipt",
             _lmcache("0.5.5"),
             _lmcache("0.5.6"),
             "kvc-request-id-not-dropped",
             "lmcache.integration.vllm.vllm_multi_process_adapter.LMCacheMPWorkerAdapter"
             ".submit_store_request"),
    # PegaFlow's save thread called _process_save_batch with nothing around it
    # but ``except queue.Empty``: one failed batch ended the only save thread,
    # and every later request stayed held. 0.25.1 wraps it (_run_save_batch,
    # "If it died on an unexpected error every later request would stay held").
    # Mooncake's own copy of its connector imported backend_name_to_enum and
    # _Backend at module level; vLLM 0.11.1 removed them, and the module could
    # not be imported. 0.3.8.post1 imports them only on vLLM 0.11.0.
    FixedBug("mooncake connector imports a selector helper vLLM 0.11.1 removed",
             _mooncake("0.3.7.post2"),
             _mooncake("0.3.8.post1"),
             "kvc-imports-resolve",
             "mooncake.mooncake_connector_v1"),
    # Its decode side waited for the prefill side's answer with a blocking
    # recv() and no timeout; 0.3.9 sets RCVTIMEO.
    FixedBug("mooncake connector's pull waits for the prefill side with no timeout",
             _mooncake("0.3.8.post1"),
             _mooncake("0.3.9"),
             "kvc-no-unbounded-wait-in-background-work",
             "mooncake.mooncake_connector_v1.MooncakeConnectorWorker.receive_kv"),
    # PegaFlow 0.22.3 mirrored each running request's block table by extending
    # it with new_block_ids; a request resumed after preemption gets its whole
    # new table there, so the freed blocks stayed in front. 0.22.4 replaces the
    # table for a request in resumed_req_ids.
    FixedBug("pegaflow appends a resumed request's new block table to its freed one",
             _pegaflow("0.22.3"),
             _pegaflow("0.22.4"),
             "kvc-resumed-blocks-replaced",
             "pegaflow.connector.scheduler.SchedulerConnector.build_connector_meta"),
    # PegaFlow 0.24.1 replaced a resumed request's block mirror but kept counting
    # its scheduled tokens from the first life (set up together with the mirror
    # in update_state_after_alloc); 0.24.2 rebases them in the same arm.
    FixedBug("pegaflow resumes a request with its first life's token count",
             _pegaflow("0.24.1"),
             _pegaflow("0.24.2"),
             "kvc-resumed-state-rebased",
             "pegaflow.connector.scheduler.SchedulerConnector.build_connector_meta"),
    # vLLM's LMCache MP connector did the same until 0.14.0 added
    # ``if request_id not in cached_reqs.resumed_req_ids``.
    FixedBug("vllm lmcache mp connector appends a resumed request's blocks",
             _vllm("0.13.0"),
             _vllm("0.14.0"),
             "kvc-resumed-blocks-replaced",
             "vllm.distributed.kv_transfer.kv_connector.v1.lmcache_mp_connector."
             "LMCacheMPConnector._process_cached_requests"),
    # LMCache 0.5.4's worker adapter logged a failed retrieve and reported the
    # request finished with none of its blocks in error_block_ids (its only
    # block-reporting loop drains every in-flight retrieve when the server is
    # gone); 0.5.5 records the failed retrieve's blocks.
    FixedBug("lmcache mp adapter drops a failed retrieve's blocks",
             _lmcache("0.5.4"),
             _lmcache("0.5.5"),
             "kvc-failed-blocks-reported",
             "lmcache.integration.vllm.vllm_multi_process_adapter.LMCacheMPWorkerAdapter.get_finished"),
    # vllm-ascend 0.13.0's layerwise connector logged a failed metadata fetch
    # and then used agent_meta, bound only in the try: UnboundLocalError out
    # of save_kv_layer. 0.18.0 returns from the handler.
    FixedBug("vllm-ascend layerwise connector reads metadata its handler never bound",
             _ascend("0.13.0"),
             _ascend("0.18.0"),
             "kvc-bound-past-handler",
             "vllm_ascend.distributed.mooncake_layerwise_connector."
             "MooncakeLayerwiseConnectorWorker.update_decoder_info",
             "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_layerwise_connector."
             "MooncakeLayerwiseConnectorWorker.update_decoder_info"),
    # Its done-sending signal sent through ensure_zmq_send(sock, ...) and then
    # waited for the ACK with a plain recv() and no timeout; 0.18.0 polls.
    FixedBug("vllm-ascend layerwise connector waits for an ACK with no timeout",
             _ascend("0.13.0"),
             _ascend("0.18.0"),
             "kvc-no-unbounded-wait-in-background-work",
             "vllm_ascend.distributed.mooncake_layerwise_connector."
             "MooncakeLayerwiseConnectorWorker.send_done_send_signal",
             "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_layerwise_connector."
             "MooncakeLayerwiseConnectorWorker.send_done_send_signal"),
    FixedBug("pegaflow save thread dies on a failed batch",
             _pegaflow("0.22.0"),
             _pegaflow("0.25.1"),
             "kvc-thread-loop-survives",
             "pegaflow.connector.worker.WorkerConnector._save_worker"),
    # PegaFlow 0.18.0's save thread asserted a per-request layer counter that
    # went negative when a request's saves spanned two steps: the assert ended
    # the only save thread. 0.19.0 dropped the counter (one save per step).
    FixedBug("pegaflow save thread dies on a layer-counter assert",
             _pegaflow("0.18.0"),
             _pegaflow("0.19.0"),
             "kvc-thread-loop-survives",
             "pegaflow.connector.worker.WorkerConnector._decrement_layer_counter"),
    # The same bug on the release pair that fixed it: from 0.23.11 the task is
    # built by a helper (``put(self._make_save_task(metadata.save_intents))``),
    # which hid the queue's request work until a request-keyed collection
    # named in the put counted as such.
    FixedBug("pegaflow save thread dies on a failed batch (0.24.1 -> 0.24.2)",
             _pegaflow("0.24.1"),
             _pegaflow("0.24.2"),
             "kvc-thread-loop-survives",
             "pegaflow.connector.worker.WorkerConnector._save_worker"),
    # The same fix, the batch itself: ``_process_save_batch`` collects the
    # batch's request ids, then a ``raise RuntimeError`` on a malformed intent
    # skips ``_complete_save_requests``; only the save thread runs it, so no
    # hook sees the exception (0.24.2 completes them in a ``finally``).
    FixedBug("pegaflow save batch raises between collecting and reporting its ids",
             _pegaflow("0.24.1"),
             _pegaflow("0.24.2"),
             "kvc-request-id-not-dropped",
             "pegaflow.connector.worker.WorkerConnector._process_save_batch"),
    # The probe recorded ``_prefetch_start_times[req_id]`` for a query still
    # loading; a probe dropped then never cleared it (0.23.1 moved the write).
    FixedBug("pegaflow probe records a prefetch start it may never clear",
             _pegaflow("0.23.0"),
             _pegaflow("0.23.1"),
             "kvc-probe-commits-nothing",
             "pegaflow.connector.scheduler.SchedulerConnector._count_available_block_prefix"),
    # The D->P prefill sender thread ran post_prefill_request with only a
    # ``finally`` around it: any exception it let out (it caught HTTPError and
    # URLError) ended the thread, and every later prefill request waited.
    # 0.22.6 runs each request as a task that catches Exception and reports
    # the failure (failure_callback).
    FixedBug("pegaflow prefill sender thread dies on an unexpected error",
             _pegaflow("0.22.5"),
             _pegaflow("0.22.6"),
             "kvc-thread-loop-survives",
             "pegaflow.pd_connector.prefill.AsyncPrefillSender._run"),
    # The D->P prefill sender ran post_prefill_request on its thread: a failed
    # connection (URLError) was only logged, with the request's id, and
    # nothing told the decode side's pending wait. 0.22.6 reports it
    # (failure_callback).
    FixedBug("pegaflow failed prefill HTTP call only logged on the sender thread",
             _pegaflow("0.22.5"),
             _pegaflow("0.22.6"),
             "kvc-request-id-not-dropped",
             "pegaflow.pd_connector.prefill.post_prefill_request"),
    # The decode side's RDMA-done waiter thread took (req_id, submitted) off
    # its queue and waited for the transfer: a failed wait was only logged,
    # and the request was never failed (0.22.6 reports it through a failure
    # callback in _run_task).
    FixedBug("pegaflow failed RDMA done wait only logged on the waiter thread",
             _pegaflow("0.22.5"),
             _pegaflow("0.22.6"),
             "kvc-request-id-not-dropped",
             "pegaflow.pd_connector.decode_worker._AsyncRdmaDoneWaiter._run"),
    # wait_for_save queued a save task for a request every step it had work,
    # but marked it pending in a set: the first task to finish took it out and
    # reported it while a later one still saved its blocks. 0.23.6 counts the
    # pending tasks per request (_req_pending_save_tasks).
    FixedBug("pegaflow pending saves kept in a set while tasks repeat",
             _pegaflow("0.23.5"),
             _pegaflow("0.23.6"),
             "kvc-pending-counts",
             "pegaflow.connector.worker.WorkerConnector.wait_for_save"),
    # update_state_after_alloc unpinned the request's query probe before its
    # hash-mismatch raise, but the block-count ``assert`` before it raised
    # with the probe still pinned (no hook sees the exception). 0.22.4 turns
    # the assert into a raise that releases the probe first.
    FixedBug("pegaflow assert in update_state_after_alloc keeps the query probe pinned",
             _pegaflow("0.22.3"),
             _pegaflow("0.22.4"),
             "kvc-released-on-every-exit",
             "pegaflow.connector.scheduler.SchedulerConnector.update_state_after_alloc"),
    # PegaFlow's get_finished logged a load whose state came back negative
    # ("async_load_failed") and reported the request received, while the
    # facade's get_block_ids_with_load_errors returned a constant set(): vLLM
    # took the failed blocks as loaded. 0.21.0 records them
    # (_failed_load_block_ids) and the hook returns them.
    FixedBug("pegaflow failed load reported as loaded: the failed-blocks hook returns set()",
             _pegaflow("0.20.0"),
             _pegaflow("0.21.0"),
             "kvc-failed-blocks-reported",
             "pegaflow.connector.worker.WorkerConnector.get_finished"),
    # The same release pair: get_finished polled each pending load's state
    # and let it go only when is_ready(); a load the server never finished
    # kept its request waiting for good. 0.21.0 adds the load timeout arm.
    FixedBug("pegaflow pending loads polled with no timeout",
             _pegaflow("0.20.0"),
             _pegaflow("0.21.0"),
             "kvc-pending-loads-expire",
             "pegaflow.connector.worker.WorkerConnector.get_finished"),
    # The same release pair: a load RPC that answered not-ok raised
    # RuntimeError out of start_load_kv (the worker dies with every request);
    # 0.21.0 records the request's blocks as load errors and reports it.
    FixedBug("pegaflow failed load RPC raised out of start_load_kv",
             _pegaflow("0.20.0"),
             _pegaflow("0.21.0"),
             "kvc-failed-blocks-reported",
             "pegaflow.connector.worker.WorkerConnector.start_load_kv"),
    # vLLM 0.11.0's NIXL worker raised RuntimeError from get_finished for a
    # transfer in neither DONE nor PROC state; 0.11.1 marks its blocks
    # invalid, releases the handle and reports the request done.
    FixedBug("vllm nixl failed transfer raised out of get_finished",
             _vllm("0.11.0"),
             _vllm("0.11.1"),
             "kvc-failed-blocks-reported",
             "vllm.distributed.kv_transfer.kv_connector.v1.nixl_connector.NixlConnectorWorker"
             "._pop_done_transfers"),
    # The same release pair: the handshake, run on an executor, sent
    # GET_META_MSG and waited in sock.recv() with no timeout; a peer that died
    # mid-handshake held it for good. 0.11.1 sets zmq.RCVTIMEO on the socket.
    FixedBug("vllm nixl handshake waits for the peer's reply without a timeout",
             _vllm("0.11.0"),
             _vllm("0.11.1"),
             "kvc-no-unbounded-wait-in-background-work",
             "vllm.distributed.kv_transfer.kv_connector.v1.nixl_connector.NixlConnectorWorker"
             "._nixl_handshake"),
    # The same release pair: the handshake future's done-callback put the
    # request on the ready queue without looking at the future, so a failed
    # handshake went on to the read. 0.11.1 checks f.result() and fails it.
    FixedBug("vllm nixl done-callback hands the request on without checking the handshake",
             _vllm("0.11.0"),
             _vllm("0.11.1"),
             "kvc-request-id-not-dropped",
             "vllm.distributed.kv_transfer.kv_connector.v1.nixl_connector.NixlConnectorWorker"
             "._background_nixl_handshake.request_ready"),
    # MultiConnector forwarded its hooks to its child connectors but not
    # handle_preemptions (the base's does nothing): a child that stops work
    # for preempted requests never heard of them. 0.16.0 forwards it.
    FixedBug("vllm MultiConnector does not forward handle_preemptions",
             _vllm("0.15.1"),
             _vllm("0.16.0"),
             "kvc-composite-forwards-hooks",
             "vllm.distributed.kv_transfer.kv_connector.v1.multi_connector.MultiConnector"),
    # Mooncake's prefill side awaited each request's ready event with no
    # timeout in the coroutine that builds the transfer; 0.16.0 waits for
    # them with asyncio.wait(..., timeout=ABORT_REQUEST_TIMEOUT) and fails the rest.
    FixedBug("vllm mooncake awaits a request's ready event without a timeout",
             _vllm("0.15.1"),
             _vllm("0.16.0"),
             "kvc-no-unbounded-wait-in-background-work",
             "vllm.distributed.kv_transfer.kv_connector.v1.mooncake_connector"
             ".MooncakeConnectorWorker._build_transfer_params"),
    # vLLM's Mooncake connector only logged a failed pull on the decode side
    # and had no failed-blocks hook (the base's set() answered); 0.30.0 adds
    # _invalid_block_ids, filled on failure, and the hook that returns them.
    FixedBug("vllm mooncake failed pull only logged, no failed-blocks hook",
             _vllm("0.29.0"),
             _vllm("0.30.0"),
             "kvc-failed-blocks-reported",
             "vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_connector"
             ".MooncakeConnectorWorker.receive_kv_from_single_worker"),
    # LMCache's MP connector recorded each lookup in its scheduler adapter
    # (``_pending_lookups.add(request_id)``) from the probe and cleaned it only
    # in update_state_after_alloc: a request aborted before allocation leaked
    # it. 0.5.5 cleans the lookup state when the request finishes.
    FixedBug("lmcache probe leaks lookup state of requests aborted before allocation",
             _lmcache("0.5.4"),
             _lmcache("0.5.5"),
             "kvc-probe-commits-nothing",
             "lmcache.integration.vllm.vllm_multi_process_adapter.LMCacheMPSchedulerAdapter"
             ".maybe_submit_lookup_request"),
    # The same bug seen from the hook the fix changed: the connector's
    # request_finished never removed the lookup state its scheduler adapter
    # keeps for the probe (three containers), which only update_state_after_alloc
    # cleaned. 0.5.5 cleans it when the request finishes.
    FixedBug("lmcache request_finished leaves its adapter's lookup state",
             _lmcache("0.5.4"),
             _lmcache("0.5.5"),
             "kvc-request-state-balanced",
             "lmcache.integration.vllm.lmcache_mp_connector.LMCacheMPConnector.request_finished"),
    # LMCache 0.4.1's MP scheduler adapter waited for the server's lookup
    # answers with a bare ``future.result()``; only vLLM's LMCacheMPConnector
    # (the host, context code) calls the adapter from get_num_new_matched_tokens,
    # so the wait was found only once host modules were analysed. 0.4.2 bounds
    # both waits (``result(timeout=...)``) and marks the server unhealthy.
    FixedBug("lmcache scheduler adapter waits for a lookup with no timeout",
             _lmcache("0.4.1"),
             _lmcache("0.4.2"),
             "kvc-no-blocking-in-scheduler-hooks",
             "lmcache.integration.vllm.vllm_multi_process_adapter.LMCacheMPSchedulerAdapter"
             ".maybe_submit_lookup_request"),
    FixedBug("lmcache scheduler adapter polls a lookup result with no timeout",
             _lmcache("0.4.1"),
             _lmcache("0.4.2"),
             "kvc-no-blocking-in-scheduler-hooks",
             "lmcache.integration.vllm.vllm_multi_process_adapter.LMCacheMPSchedulerAdapter"
             ".check_lookup_result"),
    # With the LMCache server marked unhealthy, the worker adapter flagged the
    # blocks as errors and returned before recording the request: the id
    # vLLM parked never reached finished_recving. 0.5.0 keeps it
    # (``_dropped_retrieves``) for get_finished to report.
    FixedBug("lmcache retrieve on an unhealthy server drops the parked request",
             _lmcache("0.4.7"),
             _lmcache("0.5.0"),
             "kvc-request-id-not-dropped",
             "lmcache.integration.vllm.vllm_multi_process_adapter.LMCacheMPWorkerAdapter"
             ".submit_retrieve_request"),
    # The same release pair: the connector's shutdown shut the worker adapter
    # down and never the scheduler adapter, whose message-queue client (closed
    # only on a failed start) kept its socket open. 0.5.0 gives the scheduler
    # adapter a shutdown that closes it, called from the connector's.
    FixedBug("lmcache shutdown leaves the scheduler adapter's client open",
             _lmcache("0.4.7"),
             _lmcache("0.5.0"),
             "kvc-shutdown-closes-what-it-owns",
             "lmcache.integration.vllm.lmcache_mp_connector.LMCacheMPConnector.shutdown"),
    # The worker adapter registered its KV caches with the LMCache server and
    # waited on the reply with no timeout: an absent or hung server hung
    # worker start-up. 0.4.2 waits with DEFAULT_MQ_TIMEOUT and raises a
    # ConnectionError naming the server.
    FixedBug("lmcache registration waits on the server with no timeout",
             _lmcache("0.4.1"),
             _lmcache("0.4.2"),
             "kvc-no-unbounded-peer-wait-at-setup",
             "lmcache.integration.vllm.vllm_multi_process_adapter.LMCacheMPWorkerAdapter"
             ".register_kv_caches"),
    # vLLM's Mooncake sender marked each id of a decode's batch as being sent
    # (expiry off) and returned on the first id it could not find, leaving the
    # marked ids and the rest of the batch with no report. 0.16.0 counts
    # sends and answers the decode per request.
    FixedBug("vllm mooncake sender abandons the batch on a missing id",
             _vllm("0.15.1"),
             _vllm("0.16.0"),
             "kvc-request-id-not-dropped",
             "vllm.distributed.kv_transfer.kv_connector.v1.mooncake_connector"
             ".MooncakeConnectorWorker.send_kv_to_decode",
             "vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_connector"
             ".MooncakeConnectorWorker.send_kv_to_decode"),
    # NIXL's handshake done-callback (on the executor's thread) added failed
    # requests to plain sets that get_finished copied and then cleared with no
    # lock: one added in between was lost and its request hung. 0.22.0 hands
    # them over through a queue.Queue. Reported at both halves of the race.
    FixedBug("vllm nixl handshake failure lost between get_finished's copy and clear",
             _vllm("0.21.0"),
             _vllm("0.22.1"),
             "kvc-shared-state-locked",
             "vllm.distributed.kv_transfer.kv_connector.v1.nixl.worker.NixlConnectorWorker"
             "._background_nixl_handshake.request_ready"),
    # vLLM's Mooncake store sending thread: an exception from the store step
    # (batch_is_exist re-raised) skipped dec_stored_request, so the request's
    # in-flight count never reached 0 and it was never reported in
    # finished_sending. 0.23.0 decrements in a ``finally``.
    FixedBug("vllm mooncake store send raises past the in-flight count",
             _vllm("0.22.1"),
             _vllm("0.23.0"),
             "kvc-request-id-not-dropped",
             "vllm.distributed.kv_transfer.kv_connector.v1.mooncake.store.worker"
             ".KVCacheStoreSendingThread._handle_request"),
    # NIXL's handshake done-callback (the executor's thread) added failed
    # requests to a plain set that get_finished copied into done_recving and
    # then cleared, with no lock: a failure added in between was lost and its
    # request waited forever. 0.22.0 hands them over through a queue.Queue.
    FixedBug("vllm nixl failed handshakes lost between get_finished's copy and clear",
             _vllm("0.21.0"),
             _vllm("0.22.0"),
             "kvc-shared-state-locked",
             "vllm.distributed.kv_transfer.kv_connector.v1.nixl.worker.NixlConnectorWorker"
             ".get_finished"),
    # NIXL's failed-transfer handler popped the request's _recving_metadata
    # and the request was still reported done; get_finished then popped it
    # again and asserted it: AssertionError on every failed transfer. 0.14.0
    # reads the entry with .get() in the handler.
    FixedBug("vllm nixl get_finished asserts metadata the failure handler popped",
             _vllm("0.13.0"),
             _vllm("0.14.0"),
             "kvc-asserted-entry-may-be-gone",
             "vllm.distributed.kv_transfer.kv_connector.v1.nixl_connector.NixlConnectorWorker"
             "._handle_failed_transfer"),
    # vLLM's Mooncake store scheduler dropped a request's tracker on
    # preemption and asserted it in request_finished: a preempted request
    # aborted before it resumed crashed the scheduler. 0.22.0 keeps the
    # tracker and treats a missing one as nothing to save.
    FixedBug("vllm mooncake store request_finished asserts a tracker preemption dropped",
             _vllm("0.21.0"),
             _vllm("0.22.0"),
             "kvc-asserted-entry-may-be-gone",
             "vllm.distributed.kv_transfer.kv_connector.v1.mooncake.store.scheduler"
             ".MooncakeStoreScheduler.request_finished"),
    # vLLM's LMCache MP connector answered get_block_ids_with_load_errors with
    # a constant set() while its worker adapter only logged a failed retrieve
    # (``if not all(r_result): logger.error``) and reported the request loaded.
    # Found once the adapter import with a fallback bound vLLM's own copy and
    # ``futures[request_ids[0]]`` counted as keyed by a request; 0.18.0 tracks
    # the failed blocks and delegates to the adapter.
    FixedBug("vllm lmcache mp failed retrieve only logged, no failed-blocks channel",
             _vllm("0.17.1"),
             _vllm("0.18.0"),
             "kvc-failed-blocks-reported",
             "vllm.distributed.kv_transfer.kv_connector.v1.lmcache_integration"
             ".multi_process_adapter.LMCacheMPWorkerAdapter.get_finished"),
    # The same fix, at the hook the fix changed: a connector whose probe may
    # answer load_kv_async=True with a failed-blocks hook that is a constant
    # set() (a TODO) is reported at that hook too.
    FixedBug("vllm lmcache mp failed-blocks hook is a stub in an async-loading connector",
             _vllm("0.17.1"),
             _vllm("0.18.0"),
             "kvc-failed-blocks-reported",
             "vllm.distributed.kv_transfer.kv_connector.v1.lmcache_mp_connector"
             ".LMCacheMPConnector.get_block_ids_with_load_errors"),
    # PegaFlow 0.20.0's facade, the same shape at the hook.
    FixedBug("pegaflow failed-blocks hook is a stub in an async-loading connector",
             _pegaflow("0.20.0"),
             _pegaflow("0.21.0"),
             "kvc-failed-blocks-reported",
             "pegaflow.connector.PegaKVConnector.get_block_ids_with_load_errors"),
    # MoRIIO's read poll let a request go only when status_list[-1].Succeeded():
    # a failed RDMA read stayed in _recving_transfers and its request waited
    # forever. 0.23.0 adds a Failed() arm that notifies and removes it.
    FixedBug("vllm moriio poll lets only succeeded transfers go",
             _vllm("0.22.1"),
             _vllm("0.23.0"),
             "kvc-polled-failures-handled",
             "vllm.distributed.kv_transfer.kv_connector.v1.moriio.moriio_connector"
             ".MoRIIOConnectorWorker._pop_done_transfers"),
    # MoRIIO's write worker thread ran its tasks with nothing around them: one
    # failed write ended the thread and every later write hung. 0.23.0 catches
    # around each task (the deferred ones too) and marks the request done.
    FixedBug("vllm moriio write thread dies on a failed write",
             _vllm("0.22.1"),
             _vllm("0.23.0"),
             "kvc-thread-loop-survives",
             "vllm.distributed.kv_transfer.kv_connector.v1.moriio.moriio_engine"
             ".MoRIIOWriter._write_worker_loop"),
    # LMCache's wait_for_save unpinned, for every request of the step, what
    # the scheduler's lookup pinned, but a consumer returned before that
    # loop: its pins leaked. 0.4.3 unpins them before returning.
    FixedBug("lmcache consumer wait_for_save returns before unpinning the step's requests",
             _lmcache("0.4.2"),
             _lmcache("0.4.3"),
             "kvc-step-releases-on-every-exit",
             "lmcache.integration.vllm.vllm_v1_adapter.LMCacheConnectorV1Impl.wait_for_save"),
    # Mooncake's sender coroutine deleted reqs_need_send[transfer_id] after
    # awaiting the transfer, while expiry and reqs_not_processed removed
    # entries too: a KeyError ended the sender task before it answered the
    # decode side. 0.19.0 pops with a default.
    FixedBug("vllm mooncake sender deletes an entry another path removed",
             _vllm("0.18.1"),
             _vllm("0.19.0"),
             "kvc-asserted-entry-may-be-gone",
             "vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_connector"
             ".MooncakeConnectorWorker.send_kv_to_decode"),
    # vllm-ascend's Mooncake task tracker reported a DONE_RECVING request
    # whether or not it was still delayed: after the expiry had force-freed
    # and reported it, a late completion reported it again and parked it in
    # record_finished_requests for good. 0.13.0 reports only ids still being
    # processed.
    FixedBug("vllm-ascend mooncake late completion reports a force-freed request again",
             _ascend("0.11.0"),
             _ascend("0.13.0"),
             "kvc-reported-once",
             "vllm_ascend.distributed.mooncake_connector.KVCacheTaskTracker"
             ".update_done_task_count"),
    # NIXL's scheduler put every prefill-for-remote-decode request in
    # reqs_in_batch (the P worker tracks it in _reqs_to_process) but an
    # aborted one returned (False, None) from request_finished and told the
    # worker nothing: its entry stayed for good. 0.11.1 forwards such ids as
    # reqs_not_processed.
    FixedBug("vllm nixl aborted prefill request never leaves the worker's set",
             _vllm("0.11.0"),
             _vllm("0.11.1"),
             "kvc-finish-tells-workers",
             "vllm.distributed.kv_transfer.kv_connector.v1.nixl_connector"
             ".NixlConnectorScheduler.request_finished"),
    # Mooncake's scheduler announced a prefill request with empty blocks in
    # update_state_after_alloc (the worker creates a reqs_need_send entry
    # that never expires) and an aborted one returned (False, None) from
    # request_finished: the entry stayed and a decode pull for it waited.
    # 0.16.0 forwards such ids as reqs_not_processed.
    FixedBug("vllm mooncake aborted prefill request never leaves reqs_need_send",
             _vllm("0.15.1"),
             _vllm("0.16.0"),
             "kvc-finish-tells-workers",
             "vllm.distributed.kv_transfer.kv_connector.v1"
             ".mooncake_connector.MooncakeConnectorScheduler.request_finished",
             "vllm.distributed.kv_transfer.kv_connector.v1.mooncake"
             ".mooncake_connector.MooncakeConnectorScheduler.request_finished"),
    # vLLM 0.25.1's NIXL push scheduler announced a D-side request aborted
    # before scheduling (do_remote_prefill still set) with empty blocks, but
    # without the remote_block_ids the commit hook seeds: build_connector_meta's
    # add_new_req_to_recv subscripts it, KeyError in the scheduler. 0.26.0
    # seeds it on that path too.
    FixedBug("vllm nixl push aborted request announced without remote_block_ids",
             _vllm("0.25.1"),
             _vllm("0.26.0"),
             "kvc-finish-tells-workers",
             "vllm.distributed.kv_transfer.kv_connector.v1.nixl.push_scheduler"
             ".NixlPushConnectorScheduler.request_finished"),
    # The same two bugs on the workers' side, where the fixes also landed
    # (the worker discards reqs_not_processed from the set / dict it filled).
    FixedBug("vllm nixl worker takes announced ids it is never told to drop",
             _vllm("0.11.0"),
             _vllm("0.11.1"),
             "kvc-finish-tells-workers",
             "vllm.distributed.kv_transfer.kv_connector.v1.nixl_connector"
             ".NixlConnectorWorker.start_load_kv"),
    FixedBug("vllm mooncake worker takes announced ids it is never told to drop",
             _vllm("0.15.1"),
             _vllm("0.16.0"),
             "kvc-finish-tells-workers",
             "vllm.distributed.kv_transfer.kv_connector.v1"
             ".mooncake_connector.MooncakeConnectorWorker.record_send_reqs",
             "vllm.distributed.kv_transfer.kv_connector.v1.mooncake"
             ".mooncake_connector.MooncakeConnectorWorker.record_send_reqs"),
    # vLLM 0.10.2's P2P NCCL engine set send_request_id_to_tensor_ids only for
    # the PUT modes; in GET mode the listener thread's GET branch read it
    # (have_sent_tensor_id) and died with AttributeError, and the peer's
    # blocking recv never returned. 0.11.0 sets it in every mode.
    FixedBug("vllm p2p nccl engine reads a field GET mode never sets",
             _vllm("0.10.2"),
             _vllm("0.11.0"),
             "kvc-field-set-in-every-mode",
             "vllm.distributed.kv_transfer.kv_connector.v1.p2p.p2p_nccl_engine"
             ".P2pNcclEngine.__init__",
             detail="send_request_id_to_tensor_ids"),
    # LMCache 0.3.9's start_load_kv only logged when the retrieve returned fewer
    # tokens than the scheduler was promised, and the connector had no
    # failed-blocks hook: the missing blocks were taken as loaded. 0.3.9.post2
    # records them and the facade forwards get_block_ids_with_load_errors.
    FixedBug("lmcache partial retrieve only logged",
             _lmcache("0.3.9"),
             _lmcache("0.3.9.post2"),
             "kvc-failed-blocks-reported",
             "lmcache.integration.vllm.vllm_v1_adapter.LMCacheConnectorV1Impl.start_load_kv"),
    # vLLM 0.9.1's NIXL request_finished never tested do_remote_prefill, which
    # update_state_after_alloc clears once it has announced the request: a
    # decode request aborted before it was scheduled left the prefill side's
    # blocks held. 0.9.2 tests it and announces an empty entry.
    FixedBug("vllm nixl request_finished never asks whether the commit hook ran",
             _vllm("0.9.1"),
             _vllm("0.9.2"),
             "kvc-finish-tells-workers",
             "vllm.distributed.kv_transfer.kv_connector.v1.nixl_connector"
             ".NixlConnectorScheduler.request_finished"),
    # vLLM 0.9.1's NIXL _pop_done_transfers reported a request, and deleted its
    # entry, at the first of its handles that was done; the next done handle
    # deleted it again. 0.9.2 removes it after the loop, when none is in progress.
    FixedBug("vllm nixl request done at its first done handle",
             _vllm("0.9.1"),
             _vllm("0.9.2"),
             "kvc-entry-removed-after-its-parts",
             "vllm.distributed.kv_transfer.kv_connector.v1.nixl_connector"
             ".NixlConnectorWorker._pop_done_transfers"),
    # PegaFlow 0.23.0's probe recorded when a prefetch started (for a
    # request whose lookup was still loading) and popped it only when a later
    # probe call saw the lookup ready: a request aborted meanwhile was never
    # probed again and its entry stayed. 0.23.1 pops it when request_finished
    # releases the request's probe state.
    FixedBug("pegaflow prefetch start time left by an aborted request",
             _pegaflow("0.23.0"),
             _pegaflow("0.23.1"),
             "kvc-request-state-balanced",
             "pegaflow.connector.scheduler.SchedulerConnector.request_finished",
             detail="_prefetch_start_times"),
    # vllm-ascend 0.18.0's Mooncake worker queued each pull to its receiving
    # thread before it registered the request ids with the thread's task
    # tracker, whose completion path drops (with an error log) an id it does
    # not know: a pull that ended first was never reported. 0.23.0 registers
    # the ids first (its hybrid connector's copy still queues first).
    FixedBug("vllm-ascend mooncake pulls queued before their ids are registered",
             _ascend("0.18.0"),
             _ascend("0.23.0"),
             "kvc-registered-before-handoff",
             "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector"
             ".MooncakeConnectorWorker.start_load_kv"),
    # vLLM 0.29.0's LMCacheMPConnectorUpstream moved the request's tracker to
    # WAITING_FOR_LOAD whenever the lookup had found chunks, also when
    # MultiConnector had chosen another connector (num_external_tokens == 0):
    # the lookup's locks stayed held. 0.30.0 tests num_external_tokens > 0.
    FixedBug("vllm lmcache-mp tracker waits for a load it was not chosen for",
             _vllm("0.29.0"),
             _vllm("0.30.0"),
             "kvc-load-recorded-only-when-chosen",
             "vllm.distributed.kv_transfer.kv_connector.v1.lmcache_mp_connector"
             ".LMCacheMPConnectorUpstream.update_state_after_alloc"),
    # vLLM 0.25.1's MoRIIO scheduler, in READ mode, kept every remote-prefill
    # request for a read of its blocks whatever num_external_tokens said: with
    # a full local prefix hit (0) it read the producer's blocks over blocks
    # vLLM had itself. 0.26.0 sends an empty block list then (the producer is
    # only told to free). Found by the rule, after it was written.
    FixedBug("vllm moriio reads remote blocks for a full local prefix hit",
             _vllm("0.25.1"),
             _vllm("0.26.0"),
             "kvc-load-recorded-only-when-chosen",
             "vllm.distributed.kv_transfer.kv_connector.v1.moriio.moriio_connector"
             ".MoRIIOConnectorScheduler.update_state_after_alloc"),
    # LMCache's own copy of the MP connector had the same blind commit hook
    # until 0.5.4; 0.5.5 tests num_external_tokens > 0 (its legacy copies for
    # older vLLMs keep it). Found by the rule, after it was written.
    FixedBug("lmcache mp connector waits for a load it was not chosen for",
             _lmcache("0.5.4"),
             _lmcache("0.5.5"),
             "kvc-load-recorded-only-when-chosen",
             "lmcache.integration.vllm.lmcache_mp_connector.LMCacheMPConnector"
             ".update_state_after_alloc"),
    # vLLM 0.25.1's MoRIIO producer get_finished drained the decode's release
    # ACKs (pop_finished_req_ids empties its list) and dropped, with a
    # warning, an ACK whose transfer id was not mapped yet: the request was
    # never in finished_sending and its prefill blocks leaked. 0.26.0 keeps
    # the unmatched ACKs for the next call.
    FixedBug("vllm moriio drained release ack dropped before its id is mapped",
             _vllm("0.25.1"),
             _vllm("0.26.0"),
             "kvc-request-id-not-dropped",
             "vllm.distributed.kv_transfer.kv_connector.v1.moriio.moriio_connector"
             ".MoRIIOConnectorWorker.get_finished"),
    # vLLM 0.30.0's ExampleHiddenStatesConnector popped, with no default, the
    # file name build_connector_meta records for a scheduled request, in
    # request_finished: a request aborted before it was scheduled raised
    # KeyError in the scheduler. 0.31.0 pops with a default.
    FixedBug("vllm hidden-states request_finished pops an entry never recorded",
             _vllm("0.30.0"),
             _vllm("0.31.0"),
             "kvc-asserted-entry-may-be-gone",
             "vllm.distributed.kv_transfer.kv_connector.v1.example_hidden_states_connector"
             ".ExampleHiddenStatesConnector.request_finished"),
    # vLLM 0.17.1's MoRIIO decode side, in WRITE mode, reported as
    # finished_recving the ids of the prefill side's completion messages, as
    # they came off the notify socket: the prefill side's numbering, so the
    # decode request was never reported. 0.18.0 maps a transfer id back to
    # the local request id in get_finished and drops unknown ones.
    FixedBug("vllm moriio reports the peer's ids as finished",
             _vllm("0.17.1"),
             _vllm("0.18.0"),
             "kvc-peer-ids-checked",
             "vllm.distributed.kv_transfer.kv_connector.v1.moriio.moriio_connector"
             ".MoRIIOConnectorWorker.get_finished"),
    # vLLM 0.16.0's NIXL worker raised in __init__ when NIXL was missing,
    # before it created its handshake executor; __del__ ran shutdown(), which
    # read the executor first and raised AttributeError, skipping the rest of
    # the cleanup. 0.17.0 starts shutdown() with a hasattr guard.
    FixedBug("vllm nixl finalizer after a failed __init__",
             _vllm("0.16.0"),
             _vllm("0.17.0"),
             "kvc-finalizer-survives-failed-init",
             "vllm.distributed.kv_transfer.kv_connector.v1.nixl_connector.NixlConnectorWorker"
             ".shutdown"),
    # PegaFlow 0.0.16's cross-layer wait_for_save emptied the step's save
    # intents (copied whole from the metadata's keys in start_load_kv) when
    # save_kv_layer had not run, without marking them completed as the
    # per-layer branch does: those requests were never in finished_sending.
    FixedBug("pegaflow cross-layer wait_for_save drops the step's save intents",
             _pegaflow("0.0.16"),
             _pegaflow("0.17.0"),
             "kvc-reset-forwards-ids",
             "pegaflow.connector.worker.WorkerConnector.wait_for_save"),
    # vLLM 0.26.0's NIXL pull and push workers copied lease deadlines stamped
    # with the scheduler process's perf_counter() off the metadata and
    # compared them with their own: on another node a lease expired on
    # arrival or much later. 0.27.0 rebases each deadline on arrival with the
    # scheduler's reading sent alongside (metadata.scheduler_clock).
    FixedBug("vllm nixl pull worker compares the scheduler's perf_counter with its own",
             _vllm("0.26.0"),
             _vllm("0.27.0"),
             "kvc-clock-stays-in-process",
             "vllm.distributed.kv_transfer.kv_connector.v1.nixl.pull_worker"
             ".NixlPullConnectorWorker.start_load_kv"),
    FixedBug("vllm nixl push worker compares the scheduler's perf_counter with its own",
             _vllm("0.26.0"),
             _vllm("0.27.0"),
             "kvc-clock-stays-in-process",
             "vllm.distributed.kv_transfer.kv_connector.v1.nixl.push_worker"
             ".NixlPushConnectorWorker.start_load_kv"),
    # tpu-inference (a code base no rule was written for before this case):
    # 0.18.0's worker made a new ZMQ socket for every pull notification to a
    # peer missing from self.notif_sockets and never stored it, one socket
    # per request never closed; 0.19.0 stores it.
    FixedBug("tpu-inference notification socket made on every miss and never kept",
             _tpu("0.18.0", "vllm==0.18.0"),
             _tpu("0.19.0", "vllm==0.18.0"),
             "kvc-cache-miss-kept",
             "tpu_inference.distributed.tpu_connector.TPUConnectorWorker"
             "._maybe_build_notif_socket"),
    # 0.31.0's executor task _pull_kv only warned when its pull timed out and
    # returned the unready arrays as the loaded KV (the connector has no
    # failed-blocks hook); 0.32.0 returns None and the caller reports the
    # blocks through get_block_ids_with_load_errors.
    FixedBug("tpu-inference timed-out pull taken as loaded",
             _tpu("0.31.0", "vllm==0.31.0"),
             _tpu("0.32.0", "vllm==0.31.0"),
             "kvc-failed-blocks-reported",
             "tpu_inference.distributed.tpu_connector.TPUConnectorWorker._pull_kv"),
    # 0.13.3's notice listener raised on a pull-done notice for a request it
    # did not know, ending the thread; 0.18.0 logs a warning and goes on.
    FixedBug("tpu-inference notice listener raises on an unknown request",
             _tpu("0.13.3", "vllm==0.13.0"),
             _tpu("0.18.0", "vllm==0.13.0"),
             "kvc-thread-loop-survives",
             "tpu_inference.distributed.tpu_connector.TPUConnectorWorker._pull_notify_listener",
             detail="this `raise` ends the loop"),
    # 0.18.0's scheduler never marked kv_transfer_params consumed, so a
    # request scheduled again asked the producer for the same KV twice;
    # 0.19.0 sets params["do_remote_prefill"] = False.
    FixedBug("tpu-inference remote-load trigger never consumed",
             _tpu("0.18.0", "vllm==0.18.0"),
             _tpu("0.19.0", "vllm==0.18.0"),
             "kvc-remote-load-trigger-consumed",
             "tpu_inference.distributed.tpu_connector.TPUConnectorScheduler"
             ".update_state_after_alloc"),
    # 0.31.0's get_finished read future.result() of each request's pull with
    # nothing around it; 0.32.0 catches it and reports the blocks as failed.
    FixedBug("tpu-inference failed pull raises out of get_finished",
             _tpu("0.31.0", "vllm==0.31.0"),
             _tpu("0.32.0", "vllm==0.31.0"),
             "kvc-report-hook-survives-failed-transfer",
             "tpu_inference.distributed.tpu_connector.TPUConnectorWorker.get_finished"),
    # 0.31.0's consumer sent the producer its pull-done notice in one arm and
    # only logged for a full local prefix hit; 0.32.0 notifies in both.
    FixedBug("tpu-inference full prefix hit sends the producer no notice",
             _tpu("0.31.0", "vllm==0.31.0"),
             _tpu("0.32.0", "vllm==0.31.0"),
             "kvc-skipped-arm-sends-notice",
             "tpu_inference.distributed.tpu_connector.TPUConnectorWorker.process_send_load"),
    # uc-manager 0.3.0's wait_for_save logged a failed wait for its dump tasks
    # and went on to read save_end_time, bound only inside that try; 0.4.0
    # returns from the handler. Found on a connector no rule was written from.
    FixedBug("uc-manager save timing read past the handler",
             _ucm("0.3.0"), _ucm("0.4.0"), "kvc-bound-past-handler",
             "ucm.integration.vllm.ucm_connector.UCMDirectConnector.wait_for_save"),
    # 0.3.0 set self.device only for local_rank >= 0, and bind_connector_metadata
    # read it unconditionally; 0.4.0 always builds the device.
    FixedBug("uc-manager device set in one mode only",
             _ucm("0.3.0"), _ucm("0.4.0"), "kvc-field-set-in-every-mode",
             "ucm.integration.vllm.ucm_connector.UCMDirectConnector.__init__"),
    # vLLM 0.11.0's attention layers call the per-layer hooks with no test of
    # the step metadata (a speculative drafter runs them after it is cleared);
    # uc-manager 0.4.0's layer-wise hooks read it with the asserting getter,
    # 0.5.0 returns early when it is unset. Mined before the rule was written.
    FixedBug("uc-manager layer load reads unbound metadata",
             _ucm("0.4.0"), _ucm("0.5.0"), "kvc-metadata-tested-where-unbound",
             "ucm.integration.vllm.ucm_connector.UCMLayerWiseConnector.wait_for_layer_load"),
    FixedBug("uc-manager layer save reads unbound metadata",
             _ucm("0.4.0"), _ucm("0.5.0"), "kvc-metadata-tested-where-unbound",
             "ucm.integration.vllm.ucm_connector.UCMLayerWiseConnector.save_kv_layer"),
    # the same read in LMCache 0.3.5's save_kv_layer against vLLM 0.10.0; 0.3.6
    # returns when no metadata is bound
    FixedBug("LMCache layer save reads unbound metadata",
             Corpus("lmcache 0.3.5", "lmcache==0.3.5", "lmcache/integration/vllm",
                    "vllm==0.10.0"),
             Corpus("lmcache 0.3.6", "lmcache==0.3.6", "lmcache/integration/vllm",
                    "vllm==0.10.0"),
             "kvc-metadata-tested-where-unbound",
             "lmcache.integration.vllm.vllm_v1_adapter.LMCacheConnectorV1Impl.save_kv_layer"),
)


@pytest.mark.parametrize("bug", BUGS, ids=lambda b: b.name)
def test_the_bug_is_found_before_the_fix_and_not_after(bug: FixedBug) -> None:
    def hits(corpus: Corpus, function: str) -> list[int]:
        _, findings = check_corpus(corpus, release, release_cache_dir())
        return [f.line for f in findings if f.rule == bug.rule and f.function == function
                and bug.detail in f.message]

    assert hits(bug.before, bug.function), \
        f"{bug.rule} does not report {bug.function} in {bug.before.name}"
    assert not hits(bug.after, bug.after_function or bug.function)
