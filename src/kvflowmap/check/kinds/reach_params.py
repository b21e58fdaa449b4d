"""Parameters of the ``reach`` kind (shared by its three modes)."""

from __future__ import annotations

from kvflowmap.check.context import CheckContext

PARAMS = {
    "mode": (str, "state_release", "state_release | async_reporter | pending_reported"),
    "parked_state": (str, "RequestStatus.WAITING_FOR_REMOTE_KVS", "state that parks a request"),
    "release_states": (list, ["RequestStatus.WAITING", "RequestStatus.PREEMPTED"],
                       "states that release it"),
    "via_field": (str, "KVConnectorOutput.finished_recving", "carrier that reports the release"),
    "depth": (int, 4, "call hops from the carrier's consumers"),
    "probe_method": (str, "get_num_new_matched_tokens", "method answering load_kv_async"),
    "async_element": (int, 1, "index of load_kv_async in the probe's result"),
    "report_methods": (list, ["get_finished", "get_transfer_results"],
                       "methods that report finished loads"),
    "report_element": (int, 1, "index of finished_recving in get_finished's result"),
    "start_methods": (list, ["start_load_kv"], "methods where loads start"),
    "exempt_methods": (list, ["__init__", "shutdown", "close", "__del__"],
                       "methods allowed to drop pending ids (teardown)"),
}


def param(ctx: CheckContext, name: str):
    """A parameter from the rule, or its default."""
    return ctx.param(name, PARAMS[name][1])
