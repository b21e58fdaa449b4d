"""Done-callbacks that hand a request on without looking at the future they
were given.

``fut.add_done_callback(cb)`` runs ``cb(fut)`` once ``fut`` is done, whether
its work succeeded or raised. A callback that moves the request on (puts it
on the ready queue, adds it to the set a hook drains) and never asks the
future how it ended (``result()``, ``exception()``, ``cancelled()``) treats
a failed handshake or transfer as a success: the next stage runs on state
that is not there, and the request waits, or the worker crashes, far from
the cause.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.lifecycle.containers import ADD_OPS
from kvflowmap.lifecycle.view import FnView


@dataclass(frozen=True)
class Unchecked:
    """A done-callback ``fqn``, registered at ``spawner``:``line``, that never
    reads its future parameter ``future`` and hands request data on at
    ``handover_line``."""

    fqn: str
    future: str
    spawner: str
    line: int
    handover_line: int


def unchecked(fn: FnView, request_names: set[str], spawner: str, line: int
              ) -> Unchecked | None:
    """``fn``, a done-callback, when it never uses its first parameter and a
    statement of it puts one of ``request_names`` into a container or queue."""
    params = fn.param_names
    if not params or not request_names:
        return None
    future = params[1] if params[0] == "self" and len(params) > 1 else params[0]
    if future == "self" or any(n.partition(".")[0] == future for st in fn.stmts
                               for n in st.names):
        return None
    for st in fn.stmts:
        named = {n.partition(".")[0] for n in st.names}
        adds = any(op.op in ADD_OPS for op in fn.containers(st)) or any(
            (c.callee or "").rpartition(".")[2] in ("put", "put_nowait") for c in fn.calls(st))
        if adds and named & request_names:
            return Unchecked(fn.fqn, future, spawner, line, st.line)
    return None
