"""A transfer's failure re-raised in a report hook.

A worker's report hook (``get_finished``) asks each request's in-flight
transfer whether it is done and reads what it produced: ``fut.result()``
on a future kept per request. ``result()`` re-raises what the transfer
raised. Left uncaught there, one failed load takes the report hook down,
and with it the worker's step (vLLM ends the engine), where it should have
been reported: the request's blocks as failed, the request as finished
(tpu-inference 0.31.0's ``TPUConnectorWorker.get_finished``; 0.32.0 catches
it and reports the blocks).

Found by structure: from each report hook, through the analysed functions it
calls where the call's exception leaves the caller uncaught (three calls
deep), a statement calling ``X.result(...)`` where ``X`` is a request's
record (read from a request-keyed container by the id, or walked with the
ids of one) and whose exception leaves the function uncaught.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kvflowmap.facts import CallFact
from kvflowmap.lifecycle.threads import leaves_function
from kvflowmap.lifecycle.view import FnView
from kvflowmap.model.cfg import CFG


@dataclass(frozen=True)
class RaisedOutcome:
    """``fqn`` reads ``future``'s outcome at ``line``, uncaught on the way up
    to the report hook ``hook`` (through ``chain``: ``(caller, call line)``)."""

    fqn: str
    line: int
    future: str
    hook: str
    chain: tuple[tuple[str, int], ...]


# the method of a future that re-raises the work's exception
_RESULT = "result"


def raised_outcomes(hook: str, functions: dict[str, FnView], cfg: Callable[[str], CFG],
                    keyed: set[str] | frozenset[str], records: Callable[[str], set[str]],
                    callees: Callable[[FnView, CallFact], Iterable[str]],
                    depth: int = 3) -> list[RaisedOutcome]:
    """Every read of a per-request future's result that an exception leaves
    uncaught, in ``hook`` and what it calls with nothing catching on the way.
    ``keyed``: the names of request-keyed attributes; ``records(fqn)``: the
    locals of a function that hold a request's record; ``callees(fn, call)``:
    the analysed functions a call resolves to."""
    out: list[RaisedOutcome] = []
    seen: set[str] = set()

    def visit(fqn: str, chain: tuple[tuple[str, int], ...], left: int) -> None:
        if fqn in seen or fqn not in functions:
            return
        seen.add(fqn)
        fn, g = functions[fqn], cfg(fqn)
        per_request = _per_request(fn, keyed) | records(fqn)
        for n in g.nodes:
            if n.stmt is None or n.kind != "stmt" or not leaves_function(g, n.id):
                continue
            for c in fn.calls(n.stmt):
                base, _, meth = (c.callee or "").rpartition(".")
                if meth == _RESULT and base in per_request:
                    out.append(RaisedOutcome(fqn, c.line, base, hook, chain))
                elif left > 1:
                    for t in callees(fn, c):
                        visit(t, (*chain, (fqn, c.line)), left - 1)

    visit(hook, (), depth)
    return sorted(set(out), key=lambda r: (r.fqn, r.line))


def _per_request(fn: FnView, keyed: set[str] | frozenset[str]) -> set[str]:
    """Locals of ``fn`` that hold one request's entry of a request-keyed
    attribute: read from it by subscript (``fut = self._pulling[rid][0]``),
    or walked from it (``for rid, fut in self._loads.items()``)."""
    out = set()
    for a in [*fn.all_assigns, *(b for bs in fn.binds.values() for b in bs)]:
        value = a.value or ""
        head = value.partition("[")[0].removesuffix(".items()").removesuffix(".values()")
        if "." not in a.target and "[" in value and head.startswith("self.") and \
                head.rpartition(".")[2] in keyed:
            out.add(a.target)
    return out
