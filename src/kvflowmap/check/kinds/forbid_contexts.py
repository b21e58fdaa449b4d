"""Where ``forbid`` starts: the context functions of a rule, and the chains
of steps that lead from one of them to a finding."""

from __future__ import annotations

import fnmatch

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.forbid_options import Options
from kvflowmap.check.model import Step

Chain = tuple[Step, ...]


def contexts(ctx: CheckContext, opts: Options, names: set[str] | None = None) -> list[str]:
    """Context functions, sorted: from ``methods``, ``side``, ``entry_points``
    and (``background``) what the subject runs in threads, executors, tasks
    and callbacks; or, given ``names``, the target methods so named."""
    own = names is None
    if names is None:
        names = set(opts.methods)
        if opts.side:
            names |= set(ctx.protocol.methods.get(opts.side, ()))
        pats = list(opts.entry_points)
    else:
        pats = []
    out = {f for f in ctx.target_functions if f.rpartition(".")[2] in names}
    out |= {f for f, d in ctx.model.defs.items() if not d.is_class
            and any(fnmatch.fnmatchcase(f, p) for p in pats)}
    if own and opts.background:
        out |= {f for f in ctx.lifecycle().background() if f in ctx.model.defs
                and not awaited_with_timeout(ctx, f, opts.unless_kwargs)}
    return sorted(out)


def followable(ctx: CheckContext, opts: Options, fqn: str) -> bool:
    """True for an analysed function in the subject (or any, with ``follow_context``)."""
    d = ctx.model.defs.get(fqn)
    return d is not None and not d.is_class and (
        ctx.is_subject(d.module) or opts.follow_context)


def short(fqn: str) -> str:
    """The last two parts of an FQN: ``pkg.mod.Class.method`` -> ``Class.method``."""
    return ".".join(fqn.split(".")[-2:])


def start_chain(ctx: CheckContext, start: str) -> dict[str, Chain]:
    """The chains of a walk from ``start``: its own, one step long."""
    return {start: (ctx.step(start, ctx.function(start).line, f"context: {short(start)}"),)}


def awaited_with_timeout(ctx: CheckContext, target: str, bounds: tuple[str, ...]) -> bool:
    """Every function that spawns ``target`` also waits for what it spawned
    with a bound (``asyncio.wait(tasks, timeout=...)``, ``wait_for(t, timeout)``)
    and so decides what happens on expiry: the task's own waits are its
    spawner's business."""
    spawners = {sp.spawner for sp in ctx.lifecycle().spawned if sp.target == target}
    return bool(spawners) and all(
        any((c.callee or "").rpartition(".")[2] in ("wait", "wait_for") and (
            any(k in bounds for k, _ in c.kwargs) or len(c.args) >= 2)
            for c in ctx.calls_in(s)) for s in spawners)
