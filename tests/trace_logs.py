"""Request lifecycles through vLLM 0.33.0 + PegaFlow 0.25.1's P/D connector,
named by the functions and which of their logging calls they pass (the text
comes from the analysed release at test time: nothing is copied here), and
a log of them interleaved across an engine core and two worker ranks.

The hang: the worker queued the RDMA wait (``_AsyncRdmaDoneWaiter.submit``)
and the thread pool's ``_execute`` blocks in ``RdmaPort.wait_done``, which
logs nothing; ``HANG_STOP`` is that function. The send that never reports
``finished_sending`` stops likewise in the push finalizer's wait for the
RDMA writes (``_AsyncPushFinalizer._run`` -> ``RdmaPort.wait_for_pushes``,
silent; ``SEND_HANG_STOP``).
"""

from __future__ import annotations

from collections.abc import Iterator

from kvflowmap.trace.code import CodeIndex
from kvflowmap.trace.generate import Formatter, Lifecycle, Step, generate

D_SCHED = "pd_connector.scheduler.PdDecodeSchedulerConnector"
P_SCHED = "pd_connector.scheduler.PdPrefillSchedulerConnector"
D_WORKER = "pd_connector.decode_worker"
P_WORKER = "pd_connector.prefill_worker.PrefillHandler"
WORKER = "pd_connector.worker.PdWorkerBase"
VLLM_SCHED = "vllm.v1.core.sched.scheduler.Scheduler"
HANG_STOP = "pegaflow.pd_connector.rdma.RdmaPort.wait_done"
SEND_HANG_STOP = "pegaflow.pd_connector.rdma.RdmaPort.wait_for_pushes"

_PARK = (Step(f"{D_SCHED}.get_num_new_matched_tokens", 1),
         Step(f"{D_SCHED}.update_state_after_alloc", 0),
         Step(f"{VLLM_SCHED}._handle_blocked_waiting_request", 0),
         Step(f"{D_WORKER}.DecodeHandler.process_wait_reqs", 1, "worker"),
         Step(f"{D_WORKER}._AsyncRdmaDoneWaiter.submit", 0, "worker"))
_DONE = (Step("pd_connector.rdma.RealRdmaPort.wait_done", 0, "worker"),
         Step(f"{D_WORKER}._AsyncRdmaDoneWaiter._execute", 2, "worker"),
         Step(f"{D_WORKER}.DecodeHandler._record_rdma_wait_done", 0, "worker"),
         Step(f"{WORKER}.get_finished", 1, "worker", id_lists=(0,)),
         Step(f"{D_SCHED}.update_connector_output", 0),
         Step(f"{VLLM_SCHED}._update_from_kv_xfer_finished", 0))
_WAITING = Step(f"{VLLM_SCHED}._handle_blocked_waiting_request", 0, delay=1.0)

NORMAL = Lifecycle("normal load", _PARK + _DONE, "finished")
ASYNC = Lifecycle("async load", _PARK + (_WAITING, _WAITING, _WAITING) + _DONE, "finished")
PREEMPT = Lifecycle("preemption", _PARK + _DONE + (Step(f"{WORKER}.start_load_kv", 1, "worker", 0.5),)
                    + _PARK + _DONE, "finished")
ABORT = Lifecycle("abort", _PARK + (
    Step("pd_connector.rdma.RealRdmaPort.abort_request", 0, "worker"),
    Step(f"{D_WORKER}.DecodeHandler._mark_wait_failed", 1, "worker"),
    Step(f"{WORKER}.get_finished", 1, "worker", id_lists=(0,)),
    Step(f"{D_SCHED}.update_connector_output", 0),
    Step(f"{VLLM_SCHED}._update_from_kv_xfer_finished", 0)), "aborted")
LOAD_FAILURE = Lifecycle("load failure", _PARK + (
    Step(f"{D_WORKER}._AsyncRdmaDoneWaiter._execute", 3, "worker", traceback=True),
    Step(f"{D_WORKER}.DecodeHandler._after_mark_failed", 0, "worker"),
    Step(f"{VLLM_SCHED}._handle_invalid_blocks", 0)), "failed")
HANG = Lifecycle("hang", _PARK + (_WAITING,) * 5, "stuck", ("parked",))
SEND_HANG = Lifecycle("send without finished_sending", (
    Step(f"{P_SCHED}.get_num_new_matched_tokens", 0),
    Step(f"{P_SCHED}.update_state_after_alloc", 0),
    Step(f"{P_WORKER}.process_push_reqs", 1, "worker"),
    Step(f"{P_WORKER}._push_pending_blocks", 0, "worker"),
    Step(f"{P_WORKER}._push_pending_blocks", 1, "worker")), "stuck", ("delayed_free",))
SENT = Lifecycle("send", SEND_HANG.steps + (Step(f"{P_SCHED}.update_connector_output", 0),
                                            Step(f"{VLLM_SCHED}._update_from_kv_xfer_finished", 1)),
                 "finished")
TWICE = Lifecycle("finished twice", _PARK + _DONE + (Step(f"{VLLM_SCHED}._update_from_kv_xfer_finished", 0),),
                  "finished", ("finished_twice",))

LIFECYCLES = (NORMAL, ASYNC, PREEMPT, ABORT, LOAD_FAILURE, HANG, SEND_HANG, SENT, TWICE)


def request_id(n: int) -> str:
    """vLLM-looking request ids: ``cmpl-<hex>-0``."""
    return f"cmpl-{(n * 2654435761) % (1 << 32):08x}{n:06x}-0"


def plan(repeat: int = 1, spacing: float = 0.3) -> list[tuple[str, Lifecycle, float]]:
    """Every lifecycle ``repeat`` times, started ``spacing`` seconds apart (so
    they interleave)."""
    out = []
    n = 0
    for _ in range(repeat):
        for life in LIFECYCLES:
            out.append((request_id(n), life, 36000 + n * spacing))
            n += 1
    return out


def lines(code: CodeIndex, repeat: int = 1, formatter: Formatter | None = None) -> Iterator[str]:
    """The generated log's lines."""
    return generate(code, plan(repeat), formatter=formatter)


def big_plan(n: int) -> Iterator[tuple[str, Lifecycle, float]]:
    """``n`` requests, mostly loads that finish, for the bench."""
    mix = (NORMAL, NORMAL, ASYNC, NORMAL, PREEMPT, NORMAL, ABORT, SENT, LOAD_FAILURE)
    for i in range(n):
        yield request_id(i), mix[i % len(mix)], 36000 + i * 0.01


def main(argv: list[str] | None = None) -> None:
    """``python -m tests.trace_logs OUT.log [REPEAT]``: write the generated log
    (vLLM 0.33.0 + PegaFlow 0.25.1, fetched into the cache when missing)."""
    import sys

    from kvflowmap.api import Request, analyse
    from kvflowmap.trace.code import build_code_index
    from tests.integration.conftest import PEGAFLOW, VLLM, release, release_cache_dir

    args = sys.argv[1:] if argv is None else argv
    vllm, peg = release(VLLM), release(PEGAFLOW)
    analysis = analyse(Request(sources=[str(peg / "pegaflow")], release_roots=[(vllm, "vllm 0.33.0")],
                               cache_dir=release_cache_dir()))
    code = build_code_index(analysis)
    with open(args[0], "w", encoding="utf-8") as f:
        f.writelines(lines(code, repeat=int(args[1]) if len(args) > 1 else 1))


if __name__ == "__main__":
    main()
