"""``reach``: from an event there must be a path to a report.

Three event/report pairs, chosen with ``params.mode``:

- ``state_release`` (vLLM scheduler): every function that parks a request in
  ``parked_state`` needs a function fed by ``via_field`` (through calls) that
  sets one of ``release_states`` under a test of the parked state.
- ``async_reporter`` (any connector): a connector whose probe may answer
  ``load_kv_async=True`` must override a report method that can return
  finished-receiving ids (the base class reports nothing).
- ``pending_reported`` (any connector): ids that enter a pending-load
  container in the start methods must be drained by the report method, and
  any other method that removes them must hand them to a container the
  report method returns from (abort, preemption, error paths).
"""

from __future__ import annotations

from kvflowmap.check.kinds import reach_async, reach_pending, reach_state
from kvflowmap.check.kinds.spec import KindSpec

# mode -> spec; the first mode is the default.
MODES: dict[str, KindSpec] = {
    "state_release": KindSpec(reach_state.Options, reach_state.state_release, reach_state.READS),
    "async_reporter": KindSpec(reach_async.Options, reach_async.check, reach_async.READS),
    "pending_reported": KindSpec(reach_pending.Options, reach_pending.check, reach_pending.READS),
}

__all__ = ["MODES"]
