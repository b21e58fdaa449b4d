"""``lifecycle`` mode ``peer_checked``: an id read off a peer's message is
looked up in the connector's own state before it is reported
(``kvflowmap.lifecycle.peer_ids``).

What a peer sends is its word, not one of this instance's requests: its own
numbering, a request already reported or freed here, one never seen. Put
where a report hook collects finished ids as it came, it reports the wrong
request, or one twice, and the request the peer meant never.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.lifecycle._shared import by_function, lifecycle, short, steps
from kvflowmap.check.model import Finding
from kvflowmap.lifecycle.peer_ids import PeerId

READS = ("Reads: the `self` containers a report hook hands back (found backwards from "
         "the channels' places in its returns), the adds into them in each connected "
         "function, and backwards from each added value its assignments, loop targets and "
         "parameters (through the callers' arguments, up to 5 calls) to a call the "
         "protocol's `lifecycle.peer_calls` names (decode, loads, recv...); on the way, "
         "the membership tests, `.get()` calls and subscript reads on `self` containers "
         "of each value.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``peer_checked`` (none: the decoding
    calls are the protocol's ``lifecycle.peer_calls``)."""


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per report hook and container it hands back filled with a
    peer's unchecked ids."""
    lc = lifecycle(ctx)
    by_fn: dict[str, list[PeerId]] = by_function(ctx, lc, lc.peer_ids())

    def one(f: str) -> list[Finding]:
        return [ctx.finding(
            f, p.line,
            f"{short(f)} hands the ids of {p.held} on to vLLM as finished, and "
            f"{short(p.add_fqn)} puts {p.value} there (line {p.add_line}) as it came off a "
            f"peer's message ({p.source} in {short(p.source_fqn)}, line {p.source_line}): "
            "nothing on the way looks it up in this connector's own state. An id in the "
            "peer's numbering, or of a request already reported or freed here, is reported "
            "as it is, and the request the peer meant never is. Look it up first: map it to "
            "the local request id, or skip an id that is not pending here.",
            path=steps(ctx, p.source_fqn, [(p.source_line, "the id comes off the message")]) +
            steps(ctx, p.add_fqn, [(p.add_line, f"put into {p.held} as it came")]) +
            (steps(ctx, f, [(p.line, f"{p.held} handed on as finished")])
             if (f, p.line) != (p.add_fqn, p.add_line) else ()),
            anchor=f"peer-id:{p.held}") for p in by_fn[f]]

    return each_function(ctx, sorted(by_fn), one)
