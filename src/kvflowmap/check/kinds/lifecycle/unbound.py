"""``lifecycle`` mode ``unbound``: a name a ``try`` binds is bound on every
way past its handler (``kvflowmap.lifecycle.unbound``).

A handler that logs and goes on, followed by a read of a name only the
``try`` bound, turns the handled failure into an ``UnboundLocalError`` out
of the hook or the background loop that ran the code.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.lifecycle._shared import functions, lifecycle, short, steps
from kvflowmap.check.model import Finding
from kvflowmap.facts import CallFact
from kvflowmap.lifecycle.unbound import unbound_reads
from kvflowmap.lifecycle.view import FnView, walk

READS = ("Reads: the statement tree of each function the connector runs: the names "
         "each `try` body binds (assignments, loop targets), the bindings before the "
         "`try` and in its handlers, whether a handler leaves (`return`, `raise`, "
         "`continue`, `break`), and the first statement after the `try` naming each.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``unbound`` (none)."""


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per name read unbound after a handled failure."""
    lc = lifecycle(ctx)

    def always_raises(fn: FnView, call: CallFact) -> bool:
        targets = [t.fqn for t in lc.effects.calls.resolve(fn.ctx, call) if not t.external]
        return bool(targets) and all(t in lc.functions and _raises_only(lc.functions[t])
                                     for t in targets)

    def one(f: str) -> list[Finding]:
        return [ctx.finding(
            f, u.line,
            f"`{u.name}` is bound only inside the try (line {u.bound_line}); "
            + (f"the handler (line {u.handler_line}) reads it, so when the try fails before "
               "that line, " if u.in_handler else
               f"its handler (line {u.handler_line}) goes on, so when the try fails before "
               "that line, ")
            + f"this read of `{u.name}` raises UnboundLocalError: the failure the handler "
            f"meant to absorb leaves {short(f)} anyway (a worker hook or a background loop "
            "dies with it), or it reads a value left from before (a loop's previous item, "
            "a partial result). Give the name a value before the try, or leave from the "
            "handler without it",
            path=steps(ctx, f, [(u.bound_line, f"`{u.name}` bound in the try"),
                                (u.handler_line, "the handler reads it" if u.in_handler
                                 else "the handler goes on"),
                                (u.line, f"`{u.name}` read")]),
            anchor=f"unbound:{u.name}") for u in unbound_reads(lc.functions[f], always_raises)]

    return each_function(ctx, sorted(functions(ctx, lc)), one)


def _raises_only(fn: FnView) -> bool:
    """Every way out of ``fn`` raises: it ends in ``raise`` and returns nowhere."""
    body = fn.fact.body
    return bool(body) and body[-1].kind == "raise" and \
        not any(s.kind == "return" for s in walk(body))
