"""``lifecycle`` mode ``growth``: state a connector's hooks fill, and that
the code drains elsewhere, is drained by what the connector's own hooks run
(``kvflowmap.lifecycle.growth``).

uc-manager 0.5.0's direct connector recorded a dump event on its device in
``wait_for_save`` every step and never called the device's
``destroy_event_handles()``, which its layer-wise sibling calls: the device's
event list grew for the life of the process.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.lifecycle._shared import lifecycle, off_line, short
from kvflowmap.check.model import Finding
from kvflowmap.lifecycle.growth import SETUP as _SETUP
from kvflowmap.lifecycle.growth import Undrained, undrained
from kvflowmap.lifecycle.view import FnView

READS = ("Reads: per analysed connector class (deriving from the protocol's base), the "
         "functions its hooks (the protocol's and every method of the base) and constructor "
         "make run (calls, threads, executor tasks, "
         "queue hand-offs); the container operations on `self.X` in them and in every "
         "function of the subject (additions not keyed by a request id; removals, `clear`, "
         "rebinding outside `__init__`, the container passed whole to a call), matched "
         "between related classes.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``growth`` (none: the shape is structural)."""


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per connector class and container its hooks fill and
    never drain, where the subject has a drain for it."""
    lc = lifecycle(ctx)
    base = ctx.protocol.base_class
    connectors = []
    avoid: dict[str, frozenset[str]] = {}
    # what vLLM may call: the protocol's hooks and every method of the base
    names = sorted({*lc.spec.hooks, "__init__", *(
        f.rpartition(".")[2] for f, d in ctx.model.defs.items()
        if not d.is_class and f.rpartition(".")[0] == base)})
    for cls in ctx.classes.all_subclasses(base):
        hooks = [m for h in names
                 if (m := ctx.classes.find_member(cls, h)) and m in lc.functions]
        if hooks and any(lc.connected(h) for h in hooks):
            connectors.append((cls, hooks))
            avoid[cls] = frozenset(off_line(ctx, cls, lc.functions, exact=True))

    def runs(cls: str, starts: list[str]) -> set[str]:
        return lc.runs_from(starts, avoid[cls])

    def keyed(fn: FnView, key: str | None) -> bool:
        return bool(key) and lc.state.is_id(fn, key or "")

    # bases first: the class whose hooks the others inherit names the finding
    connectors.sort(key=lambda c: (len(ctx.classes.mro(c[0])), c[0]))
    made: set[str] = set()  # classes the hooks construct as they run (not set-up)
    for _, hooks in connectors:
        for f in lc.runs_from([h for h in hooks if lc.functions[h].name not in _SETUP]):
            if f in ctx.graph:
                made |= {t.removesuffix(".__init__") for _, t, d in
                         ctx.graph.out_edges(f, data=True) if d.get("kind") == "call"
                         and ctx.classes.is_class(t.removesuffix(".__init__"))}

    def per_call(owner: str) -> bool:
        return any(ctx.classes.related(k, owner) for k in made)

    found = undrained(connectors, lc.functions, runs, ctx.classes.related, keyed, per_call)

    def call_line(u: Undrained) -> int:
        # the hook's call that leads to the fill (the hook's first line if none)
        if u.fqn == u.hook:
            return u.line
        lines = [d.get("line", 0) for _, t, d in ctx.graph.out_edges(u.hook, data=True)
                 if d.get("kind") == "call" and u.fqn in runs(u.connectors[0], [t])]
        return min((x for x in lines if x), default=lc.functions[u.hook].fact.line)

    return [_finding(ctx, u, call_line(u)) for u in found]


def _finding(ctx: CheckContext, u: Undrained, line: int) -> Finding:
    owner = u.owner.rpartition(".")[2]
    names = [c.rpartition(".")[2] for c in u.connectors]
    who = names[0] + (f" (and {len(names) - 1} more connector classes: "
                      f"{', '.join(names[1:])})" if len(names) > 1 else "")
    via = "" if u.fqn == u.hook else f", through {short(u.fqn)} (line {u.line})"
    msg = (f"{short(u.hook)} adds to self.{u.attr} of {owner}{via}, and nothing the hooks of "
           f"{who} run takes anything out of it, while {short(u.drain)} (line "
           f"{u.drain_line}) drains it: for this connector the container grows on every call "
           "for the life of the process. Call the drain from the connector's hooks (where "
           "its siblings do), or stop filling it")
    path = (ctx.step(u.hook, line, "the hook vLLM calls gets there"),
            ctx.step(u.fqn, u.line, f"self.{u.attr} is added to"),
            ctx.step(u.drain, u.drain_line, "drained here, which the connector never runs"))
    return ctx.finding(u.hook, line, msg, path=path,
                       anchor=f"undrained:{u.owner.rpartition('.')[2]}.{u.attr}")
