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

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.reach_async import async_reporter
from kvflowmap.check.kinds.reach_params import PARAMS
from kvflowmap.check.kinds.reach_pending import pending_reported
from kvflowmap.check.kinds.reach_state import state_release
from kvflowmap.check.model import Finding

__all__ = ["PARAMS", "check"]

def check(ctx: CheckContext) -> list[Finding]:
    """Dispatch on ``mode``."""
    mode = ctx.param("mode", PARAMS["mode"][1])
    if mode == "state_release":
        return state_release(ctx)
    if mode == "async_reporter":
        return each_function(ctx, ctx.target_classes, lambda c: async_reporter(ctx, c))
    if mode == "pending_reported":
        return each_function(ctx, ctx.target_classes, lambda c: pending_reported(ctx, c))
    raise ValueError(f"unknown reach mode {mode!r}")
