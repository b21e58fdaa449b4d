"""``lifecycle`` mode ``replied``: a serving loop on a REP socket answers
every request it receives, on every path back to its next receive
(``kvflowmap.lifecycle.replies``).

LMCache's ``PDBackend._mem_alloc_loop`` logs a failed allocation request and
receives again without answering: the REP socket refuses the next receive
for good, and the decoder that asked waits forever.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.lifecycle._shared import lifecycle, short, steps
from kvflowmap.check.model import Finding

READS = ("Reads: the sockets each subject function or class binds from a call given "
         "`zmq.REP`, and, in every loop that receives and replies on one, the `except` "
         "handlers of the `try` around the reply and every normal path from the receive "
         "back to the loop head.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``replied`` (none: the socket type
    is the protocol of ZMQ, not of vLLM)."""


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per way back to the receive that skips the reply."""
    lc = lifecycle(ctx)
    mods = ctx.rule.applies_to.modules

    def one(f: str) -> list[Finding]:
        out = []
        for u in lc.unreplied(f):
            how = ("this handler logs the failed request and lets the loop receive again"
                   if u.how == "except" else "the path through here goes back to the receive")
            out.append(ctx.finding(
                f, u.line,
                f"{short(f)} receives a request on the REP socket {u.socket} (line "
                f"{u.recv_line}) and replies at line {u.send_line}, but {how} without "
                "replying: a REP socket must send before it can receive again, so every "
                "later receive fails, the loop serves nobody, and the peer that asked waits "
                "for its answer for good. Send an error reply on this path (or use a "
                "ROUTER socket).",
                path=steps(ctx, f, [(u.recv_line, "the request is received"),
                                    (u.line, "back to the loop with no reply"),
                                    (u.send_line, "the reply other paths send")]),
                anchor=f"unreplied:{u.socket}"))
        return out

    # every subject function: serving loops live in helpers no hook reaches by name
    wanted = [f for f, fn in lc.functions.items()
              if not mods or any(fn.module.startswith(m.rstrip("*")) for m in mods)]
    return each_function(ctx, wanted, one)
