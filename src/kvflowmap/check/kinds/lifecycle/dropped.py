"""``lifecycle`` mode ``dropped``: no path drops a request id it carries.

A function that receives a request id (a hook's request, the step metadata's
ids, a helper's id parameter) or walks the ids it holds, and hands the id on
along one path (into a request-keyed container or queue, a report, a
thread, an analysed helper that keeps it, or back to its caller), must not
lose it on another: an ``except`` that logs and carries on, an early
``return``/``continue`` on the worker side, or an id taken out of its
container and handed nowhere. Such a request is named in neither
``finished_recving`` nor a failure report, and waits in
``WAITING_FOR_REMOTE_KVS`` (or holds its blocks) for the life of the process.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.lifecycle._shared import (TEARDOWN, functions, lifecycle, short,
                                                     steps)
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option
from kvflowmap.facts import CallFact
from kvflowmap.lifecycle.callbacks import Unchecked
from kvflowmap.lifecycle.drained import Drained, drained_drops, is_drain
from kvflowmap.lifecycle.paths import Drop
from kvflowmap.lifecycle.swallowed import Swallowed
from kvflowmap.lifecycle.taken import Taken

READS = ("Reads: the lifecycle model's dropping paths: per subject function, the ids it "
         "receives or walks, the effect of each statement on them (container, queue, "
         "report, thread, helper summary, return), the control-flow graph with "
         "exception edges, the containers report hooks read, and the locals ids are "
         "moved into.")

_HOW = {
    "except": "an exception here is caught and the handler carries on without recording, "
              "reporting or failing the request",
    "early-exit": "this branch leaves early without recording or reporting the request",
    "abandoned": "this branch returns out of the loop over the batch, so every other id of "
                 "it, those already taken on and those not reached yet, is left without a "
                 "record or a report",
    "removed": "the id is taken out of its container here and handed nowhere",
    "lost": "ids are taken out of a container a report reads into a local that is never "
            "returned, stored or handed on",
    "ignored": "the id it is handed is never used",
    "raised": "this raises out of code only a background thread or task runs, where no "
              "caller reports the request",
    "escaped": "an exception this statement can raise leaves the function uncaught, and no "
               "code sees it (it runs on a thread, in a task whose future nobody keeps, or "
               "under callers whose `except` only logs and carries on)",
    "swallowed": "this handler only logs, and the request then goes on as if the work had "
                 "succeeded",
    "forgotten": "this handler only logs, in code only a background thread or task runs, and "
                 "nothing reports the request afterwards",
    "unchecked": "this done-callback never looks at its future, and hands the request on as if "
                 "the work had succeeded",
    "drained": "this arm only logs and moves on: the completion was taken out of its source, "
               "and nothing keeps it",
}


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``dropped``."""

    hows: tuple[str, ...] = option(("except", "early-exit", "abandoned", "removed", "raised",
                                    "escaped", "lost", "ignored", "swallowed", "forgotten",
                                    "unchecked", "drained"),
                                   "kinds of drop to report: except, early-exit, abandoned, "
                                   "removed, raised, escaped, lost, ignored, swallowed, "
                                   "forgotten, unchecked, drained")
    exempt_methods: tuple[str, ...] = option(TEARDOWN, "methods whose drops are teardown")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per dropping path."""
    lc = lifecycle(ctx)
    fns = [f for f in functions(ctx, lc) if lc.functions[f].name not in opts.exempt_methods]
    drains: dict[str, bool] = {}

    def drain_of(f: str) -> Callable[[CallFact], str | None]:
        def of(call: CallFact) -> str | None:
            for t in ctx.linker.calls.resolve(lc.functions[f].ctx, call):
                if t.fqn in lc.functions and drains.setdefault(
                        t.fqn, is_drain(lc.functions[t.fqn])):
                    return t.fqn
            return None
        return of

    def one(f: str) -> list[Finding]:
        out = [_finding(ctx, d) for d in lc.drops(f) if d.how in opts.hows]
        if "lost" in opts.hows:
            out += [_lost(ctx, t) for t in lc.lost(f)]
        if "ignored" in opts.hows:
            out += [_ignored(ctx, f, p) for p in lc.ignored(f)]
        if "swallowed" in opts.hows:
            out += [_swallowed(ctx, w) for w in lc.swallowed(f)]
        if "forgotten" in opts.hows:
            out += [_forgotten(ctx, w) for w in lc.forgotten(f)]
        if "unchecked" in opts.hows:
            out += [_unchecked(ctx, u) for u in lc.unchecked(f)]
        if "drained" in opts.hows:
            out += [_drained(ctx, d) for d in drained_drops(lc.functions[f], drain_of(f))]
        return out

    return each_function(ctx, fns, one)


def _drained(ctx: CheckContext, d: Drained) -> Finding:
    msg = (f"{short(d.fqn)} walks a batch of completions that `{d.source}()` took out of "
           f"their source ({short(d.drain)} empties it), and this arm drops an item that is "
           "not known yet: it only logs and moves on, nothing keeps the completion, and no "
           "later call sees it again, so its request is never reported (a completion that "
           "arrived before its request was registered is lost). Keep the item for the next "
           "call, or report it")
    path = steps(ctx, d.fqn, [(d.loop_line, f"the walk of what `{d.source}()` handed over"),
                              (d.arm_line, "the item is not known yet"),
                              (d.exit_line, "dropped: the iteration moves on")])
    return ctx.finding(d.fqn, d.arm_line, msg, path=path, anchor=f"drained:{d.source}")


def _lost(ctx: CheckContext, t: Taken) -> Finding:
    msg = (f"request ids taken out of self.{t.attr} into `{t.local}` in {short(t.fqn)} are "
           f"never returned, stored or handed on: {_HOW['lost'].split(' into')[0]}, and "
           "those requests are never reported")
    path = steps(ctx, t.fqn, [(t.line, f"ids leave self.{t.attr} for `{t.local}` here"),
                              (ctx.function(t.fqn).end_line,
                               f"`{t.local}` dies with the function")])
    return ctx.finding(t.fqn, t.line, msg, path=path, anchor=f"lost:{t.local}:{t.attr}")


def _swallowed(ctx: CheckContext, w: Swallowed) -> Finding:
    msg = (f"the failure caught at line {w.handler_line} in {short(w.fqn)} is only logged: "
           f"nothing records it, and `{w.id_name}` is then handed on (line "
           f"{w.handover_line}) as if the work in the `try` (line {w.try_line}) had "
           "succeeded, so vLLM counts a load or save that never happened. Record the "
           "failure (the failed blocks, a failed-request report) in the handler")
    path = steps(ctx, w.fqn, [(w.try_line, "the work that can fail"),
                              (w.handler_line, _HOW["swallowed"].split(",")[0]),
                              (w.handover_line, f"`{w.id_name}` is handed on as a success")])
    return ctx.finding(w.fqn, w.handler_line, msg, path=path, anchor=f"swallowed:{w.id_name}")


def _forgotten(ctx: CheckContext, w: Swallowed) -> Finding:
    msg = (f"the failure caught at line {w.handler_line} in {short(w.fqn)} is only logged, in "
           f"code only a background thread or task runs: no hook sees it, and nothing after "
           f"it reports `{w.id_name}`, so whatever waits for that request (a pending load or "
           "save, `finished_recving`) waits for good. Report the failure in the handler (a "
           "failed-request set the report hook drains, a failure callback, the waiter's "
           "future)")
    path = steps(ctx, w.fqn, [(w.try_line, f"work for `{w.id_name}` that can fail"),
                              (w.handler_line, "this handler only logs"),
                              (ctx.function(w.fqn).end_line,
                               f"the function ends without reporting `{w.id_name}`")])
    return ctx.finding(w.fqn, w.handler_line, msg, path=path,
                       anchor=f"forgotten:{w.id_name}:{w.try_line - ctx.function(w.fqn).line}")


def _unchecked(ctx: CheckContext, u: Unchecked) -> Finding:
    msg = (f"{short(u.fqn)} runs when the future it is given is done, whether its work "
           f"succeeded or raised, never looks at `{u.future}` (result(), exception()), and "
           f"hands the request on (line {u.handover_line}) as if it had succeeded: a failed "
           "handshake or transfer reaches the next stage, which runs on state that is not "
           "there, and the request is never failed. Check the future and report the request "
           "failed (its blocks in the failed-blocks report) when it raised")
    path = (ctx.step(u.spawner, u.line, "registered as a done-callback here"),
            *steps(ctx, u.fqn, [(ctx.function(u.fqn).line, f"`{u.future}` is never read"),
                                (u.handover_line, "the request is handed on regardless")]))
    return ctx.finding(u.fqn, u.handover_line, msg, path=path, anchor=f"unchecked:{u.future}")


def _ignored(ctx: CheckContext, fqn: str, param: str) -> Finding:
    fn = ctx.function(fqn)
    msg = (f"{short(fqn)} is handed request id `{param}` and never uses it: whatever its "
           "callers expect it to do for the request (record it, report it, fail it) does "
           "not happen, and the request waits forever")
    path = steps(ctx, fqn, [(fn.line, f"`{param}` is handed in here"),
                            (fn.end_line, f"`{param}` is never used")])
    return ctx.finding(fqn, fn.line, msg, path=path, anchor=f"ignored:{param}")


def _finding(ctx: CheckContext, d: Drop) -> Finding:
    where = f"{short(d.fqn)}"
    what = f"the request ids of `{d.id_name}`" if d.how == "abandoned" else \
        f"the request ids in `{d.id_name}`" if d.id_name in ctx.lifecycle().state.of(d.fqn).colls \
        else f"request id `{d.id_name}`"
    how = f"{_HOW[d.how]} (line {d.branch_line})"
    if d.how == "escaped" and (why := ctx.lifecycle().unseen_why(d.fqn)):
        how = (f"an exception the statement at line {d.branch_line} can raise leaves the "
               f"function uncaught, and {why}")
    msg = (f"{what} can be dropped in {where}: {how}, while another path hands it on"
           f"{f' (line {d.handover_line})' if d.handover_line else ''}; the request is "
           "never reported finished or failed and waits forever")
    path = steps(ctx, d.fqn, [(d.bound_line, f"`{d.id_name}` is bound here"),
                              (d.branch_line, _HOW[d.how].split(",")[0]),
                              (d.exit_line, "the path ends here with the id in no container "
                                            "and no report")])
    return ctx.finding(d.fqn, d.branch_line, msg, path=path,
                       anchor=f"{d.how}:{d.id_name}")
