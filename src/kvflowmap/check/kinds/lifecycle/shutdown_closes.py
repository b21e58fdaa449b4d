"""``lifecycle`` mode ``shutdown_closes``: a connector's shutdown hook closes
every long-lived resource its objects hold that the code closes anywhere
(``kvflowmap.lifecycle.shutdown``).

LMCache 0.4.7's connector shut its worker adapter down and never the
scheduler adapter's message-queue client: the socket and the heartbeat
thread outlived the engine.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.lifecycle._shared import functions, lifecycle, short
from kvflowmap.check.model import Finding, Step

READS = ("Reads: per connector class that overrides the protocol's `lifecycle.shutdown` "
         "hook, the attributes each of its methods (and, transitively, each owned analysed "
         "class's methods) stores a constructed object in (`self.A = K(...)`), the calls "
         "`self.A.<close>()` anywhere (names from the protocol's `lifecycle.closes`), the "
         "close methods an analysed class defines, and what the hook makes run (calls, "
         "constructors, threads, callbacks).")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``shutdown_closes`` (the hook and the
    close names come from the protocol's lifecycle section)."""


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per owned resource the shutdown hook never closes."""
    lc = lifecycle(ctx)
    wanted = set(functions(ctx, lc))
    out = []
    for u in lc.unclosed(ctx.protocol.base_class):
        if u.hook not in wanted:
            continue
        in_owner = u.fqn.rpartition(".")[0] == u.owner
        chain = "self." + (u.attr if in_owner else ".".join(u.via))
        closer = f"{u.kind}.{u.closer}"
        steps: tuple[Step, ...]
        if u.closed_at:
            fqn, line = u.closed_at
            why = f"the code closes it elsewhere ({short(fqn)}, line {line})"
            steps = (ctx.step(fqn, line, f"{u.owner.rpartition('.')[2]}.{u.attr} is closed here"),)
        else:
            why = f"{(u.kind or '').rpartition('.')[2]} has a {u.closer}() of its own"
            # a library class's close method has no analysed line to show
            steps = (ctx.step(closer, lc.functions[closer].fact.line,
                              f"{u.closer}() gives back what it holds"),) \
                if closer in lc.functions else ()
        line = lc.functions[u.fqn].fact.line
        out.append(ctx.finding(
            u.fqn, line,
            f"{short(u.fqn)} never closes {chain}" + (
                f" (run by {u.cls.rpartition('.')[2]}'s shutdown)" if in_owner and u.owner != u.cls
                else "")
            + f", and {why}: after the engine shuts down "
            "its socket, thread or server session stays open (a peer or server keeps state "
            "for a client that is gone, a non-daemon thread keeps the process alive). Close "
            f"it from {short(u.fqn)} (directly, or through a close method of the object "
            "that owns it)",
            path=(ctx.step(u.fqn, line, "the shutdown path"), *steps),
            anchor=f"unclosed:{'.'.join(u.via)}"))
    return out
