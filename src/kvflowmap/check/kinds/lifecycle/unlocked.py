"""``lifecycle`` mode ``unlocked``: request-keyed state is changed under the
lock its other changes hold (``kvflowmap.lifecycle.locks``).

Where the code guards a container's changes with a lock in one place, a
change made elsewhere without it races with them (a transfer thread's add
against the report hook's swap): an id is lost, or a walk of the container
dies with ``changed size during iteration``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.lifecycle._shared import functions, lifecycle, short, steps
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option
from kvflowmap.lifecycle.locks import CopyClear, Unlocked

READS = ("Reads: in every connected subject function but constructors, the statement "
         "tree's `with` blocks entered on a plain attribute chain (the locks), the changes "
         "of request-keyed containers under them (adds, removals, resets, rebinding), and "
         "the locks every analysed caller holds around its calls (3 calls deep); for "
         "containers no change of which holds a lock, a read of the whole container (walk, "
         "copy, argument, alias) followed by its clear in one function, and the threads "
         "(hooks, each spawned target) the functions adding to it run on.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``unlocked``."""

    containers: tuple[str, ...] = option((), "container labels judged (`Class.attr`); empty: "
                                             "every one with a change under a lock")
    teardown_methods: tuple[str, ...] = option(
        ("__del__", "__exit__", "*shutdown*", "*close*", "stop", "stop_*"),
        "teardown methods (globs), left out on both sides: they run when the threads stop")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per change made without the lock another change holds."""
    lc = lifecycle(ctx)
    wanted = set(functions(ctx, lc))
    by_fn: dict[str, list[Unlocked | CopyClear]] = {}
    found: list[Unlocked | CopyClear] = [*lc.unlocked(opts.teardown_methods),
                                         *lc.copy_clears(opts.teardown_methods)]
    adders: dict[str, list[CopyClear]] = {}
    for u in found:
        if opts.containers and u.change.container.label not in opts.containers:
            continue
        if u.change.fqn in wanted:
            by_fn.setdefault(u.change.fqn, []).append(u)
        # the add is the other half of the race, and a fix may start there
        # (hand the ids over through a queue): reported once per add
        if isinstance(u, CopyClear) and u.adder.fqn in wanted and not any(
                (x.adder.line, x.adder.container) == (u.adder.line, u.adder.container)
                for x in adders.get(u.adder.fqn, ())):
            adders.setdefault(u.adder.fqn, []).append(u)

    def one(f: str) -> list[Finding]:
        out = [_adder(ctx, u) for u in adders.get(f, ())]
        for u in by_fn.get(f, ()):
            if isinstance(u, CopyClear):
                out.append(_copy_clear(ctx, u))
                continue
            ch, g = u.change, u.guarded
            what = {"=": "rebinds", "walk": "walks"}.get(ch.op, f"changes ({ch.op})")
            out.append(ctx.finding(
                f, ch.line,
                f"{short(f)} {what} {ch.container.label} without holding {u.lock.label}, "
                f"which {short(g.fqn)} holds to change it (line {g.line}): the two race, so "
                "an id can be lost between a copy and a clear, or a walk of the container "
                f"fails with 'changed size during iteration'. Take `{u.lock.label}` here too.",
                path=steps(ctx, f, [(ch.line, f"{what.partition(' ')[0]} "
                                              f"{ch.container.label}, no lock")]) +
                steps(ctx, g.fqn, [(g.line, f"changes it holding {u.lock.label}")]),
                anchor=f"unlocked:{ch.container.label}" + (":walk" if ch.op == "walk" else "")))
        return out

    return each_function(ctx, sorted(set(by_fn) | set(adders)), one)


def _copy_clear(ctx: CheckContext, u: CopyClear) -> Finding:
    ch, a = u.change, u.adder
    label, f = ch.container.label, ch.fqn
    what = "rebinds" if ch.op == "=" else "clears"
    return ctx.finding(
        f, ch.line,
        f"{short(f)} reads {label} (line {u.read_line}) and then {what} it with no lock, "
        f"while {short(a.fqn)} adds to it on another thread (line {a.line}): an id added "
        "between the read and the clear is in neither, so that request is never reported. "
        "Guard the read, the clear and the add with one lock, or hand the ids over through "
        "a queue.Queue.",
        path=steps(ctx, f, [(u.read_line, f"reads {label}"), (ch.line, f"{what} it, no lock")])
        + steps(ctx, a.fqn, [(a.line, "adds to it on another thread, no lock")]),
        anchor=f"copy-clear:{label}")


def _adder(ctx: CheckContext, u: CopyClear) -> Finding:
    ch, a = u.change, u.adder
    label = ch.container.label
    what = "rebinds" if ch.op == "=" else "clears"
    return ctx.finding(
        a.fqn, a.line,
        f"{short(a.fqn)} adds to {label} with no lock on its own thread, while "
        f"{short(ch.fqn)} reads it (line {u.read_line}) and then {what} it (line {ch.line}): "
        "an id added between the two is in neither, so that request is never reported. "
        "Hand the ids over through a queue.Queue, or guard the add, the read and the clear "
        "with one lock.",
        path=steps(ctx, a.fqn, [(a.line, "adds to it on another thread, no lock")])
        + steps(ctx, ch.fqn, [(u.read_line, f"reads {label}"), (ch.line, f"{what} it, no lock")]),
        anchor=f"copy-clear-add:{label}")
