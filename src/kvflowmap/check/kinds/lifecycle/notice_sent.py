"""``lifecycle`` mode ``notice_sent``: an arm that only logs sends the peer
notice its sibling arm sends (``kvflowmap.lifecycle.notices``).

tpu-inference 0.31.0's consumer told the producer a pull was done in one arm
and only logged "skip insert_kv_chunks" in the other (a full local prefix
hit): the producer held the request's KV until its timeout. 0.32.0 sends
the notice in both.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.lifecycle._shared import functions, lifecycle, short
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option
from kvflowmap.facts import CallFact, Stmt
from kvflowmap.lifecycle.notices import silent_arms
from kvflowmap.lifecycle.view import FnView

READS = ("Reads: per subject function, its `if` statements and the statements of each "
         "arm; the calls that send a peer a notice (`notices`, directly or in an analysed "
         "function two calls deep) with a request id or record among their arguments.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``notice_sent``."""

    notices: tuple[str, ...] = option(
        ("send_notif", "send_multipart", "send", "send_pyobj", "send_json", "send_string",
         "sendall", "sendto"),
        "methods that send a peer a message (matched on the method name)")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per arm that only logs where its sibling arm sends a notice."""
    lc = lifecycle(ctx)
    # (function, depth) -> it sends; the depth falls on every call, so no cycle
    memo: dict[tuple[str, int], bool] = {}

    def sends_any(fqn: str, depth: int) -> bool:
        """The analysed function sends a notice (its own calls, ``depth`` deep)."""
        if (fqn, depth) not in memo:
            fn = lc.functions[fqn]
            memo[fqn, depth] = any(_named(c, opts) or (depth > 1 and any(
                sends_any(t, depth - 1) for t in lc.subject_callees(fn, c)))
                for c in fn.all_calls)
        return memo[fqn, depth]

    def sends(fn: FnView, s: Stmt) -> bool:
        for c in fn.calls(s):
            if not _names_request(lc, fn, c):
                continue
            if _named(c, opts) or any(sends_any(t, 2) for t in lc.subject_callees(fn, c)):
                return True
        return False

    out = []
    for f in functions(ctx, lc):
        for a in silent_arms(lc.functions[f], sends):
            out.append(ctx.finding(
                f, a.line,
                f"this arm of {short(f)} only logs, where the other arm of the same test "
                f"(line {a.test_line}) sends the peer its notice for the request (line "
                f"{a.notice_line}): a request that takes this arm is never released on the "
                "other side, which holds its KV (and blocks) until a timeout, if it has one. "
                "Send the notice here too",
                path=(ctx.step(f, a.test_line, "the test"),
                      ctx.step(f, a.notice_line, "one arm sends the notice"),
                      ctx.step(f, a.line, "this arm only logs")),
                anchor=f"notice:{a.test}"))
    return out


def _named(c: CallFact, opts: Options) -> bool:
    base, _, meth = (c.callee or "").rpartition(".")
    return bool(base) and meth in opts.notices


def _names_request(lc, fn: FnView, c: CallFact) -> bool:
    """An argument of the call is a request id or a request's record."""
    ids = lc.state.of(fn.fqn)
    args = [a for a in (*c.args, *(v for _, v in c.kwargs)) if a]
    return any(lc.state.is_id(fn, a) or a.partition(".")[0] in ids.records | ids.requests
               for a in args)
