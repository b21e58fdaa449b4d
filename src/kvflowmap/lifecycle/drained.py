"""Completions drained from their source and dropped by an arm of the walk.

A report function takes a batch of completions out of where another thread
left them, with a call that hands over the whole collection and empties it
(``acks = self.wrapper.pop_finished_req_ids()``, whose body does
``done = list(self.done_req_ids); self.done_req_ids = []; return done``).
Walking the batch, an arm that only logs and ``continue``s when an item is
not known yet (``if tid not in self.transfer_id_to_request_id:``) loses that
completion: the source no longer holds it, nothing kept it, and its request
is never reported (vLLM 0.25.1's MoRIIO producer dropped a decode's release
ACK that arrived before the transfer id was mapped; 0.26.0 keeps it for the
next call).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from kvflowmap.facts import CallFact
from kvflowmap.lifecycle.containers import ADD_OPS, RESET_OPS
from kvflowmap.lifecycle.effects import is_logging
from kvflowmap.lifecycle.ids import loop_targets
from kvflowmap.lifecycle.view import FnView, walk

# ``x not in self.known``: the item is not known yet
_MISS = re.compile(r"\bnot\s+in\s+self\.")
# what rebinding a container to empty looks like in the facts
_EMPTY = frozenset({"[]", "{}", "()", "set()", "list()", "dict()", "deque()"})


@dataclass(frozen=True)
class Drained:
    """In ``fqn``, the walk at ``loop_line`` of what ``source`` (the drain
    ``drain``) handed over drops an item in the arm at ``arm_line``, which
    leaves the iteration at ``exit_line``."""

    fqn: str
    loop_line: int
    arm_line: int
    exit_line: int
    source: str
    drain: str


def is_drain(fn: FnView) -> bool:
    """``fn`` hands over a ``self`` container's content and empties it: it
    returns a value, and clears the container or rebinds it to empty."""
    returns = any(r.value for s in fn.stmts for r in fn.returns(s))
    emptied = any(op.op in RESET_OPS and op.container.startswith("self.")
                  for s in fn.stmts for op in fn.containers(s)) or any(
        a.target.startswith("self.") and (a.literal or a.value or "") in _EMPTY
        for s in fn.stmts for a in fn.assigns(s))
    return returns and emptied


def drained_drops(fn: FnView, drain_of: Callable[[CallFact], str | None]) -> list[Drained]:
    """Arms of ``fn``'s walks over a drained batch (a local bound from a call
    ``drain_of`` names a drain) that only log and ``continue`` when the item
    is not known yet, where the walk keeps what it does not drop (an add to
    a container on another way through the body)."""
    sources: dict[str, tuple[str, str]] = {}
    for s in fn.stmts:
        for c in fn.calls(s):
            drain = drain_of(c)
            if drain is None:
                continue
            for a in fn.assigns(s):
                if a.target.isidentifier():
                    sources[a.target] = (c.callee or "", drain)
    out = []
    for loop in fn.stmts:
        if loop.kind != "for":
            continue
        _, walked = loop_targets(loop.text)
        # ``for x in acks`` (bound from the drain) or ``for x in self.w.pop_done()``
        source = sources.get(walked) or next(
            ((c.callee or "", d) for c in fn.calls(loop) if (d := drain_of(c))), None)
        if source is None:
            continue
        body = tuple(walk(loop.body))
        for s in body:
            if s.kind != "if" or not _MISS.search(s.text or "") or not s.body:
                continue
            arm = tuple(walk(s.body))
            if s.body[-1].kind != "continue" or any(fn.containers(x) for x in arm) or any(
                    not is_logging(c.callee or "") for x in arm for c in fn.calls(x)):
                continue
            rest = [x for x in body if x not in arm]
            if any(op.op in ADD_OPS for x in rest for op in fn.containers(x)):
                out.append(Drained(fn.fqn, loop.line, s.line, s.body[-1].line, *source))
    return out
