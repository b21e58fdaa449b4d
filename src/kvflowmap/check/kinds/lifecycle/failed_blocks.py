"""``lifecycle`` mode ``failed_blocks``: failed loads reach vLLM's
failed-blocks hook.

Per analysed override of the failed-blocks hook (``kvflowmap.lifecycle.failures``):
a container it takes blocks out of that nothing in the analysed code fills
(no failure is ever reported: vLLM treats the failed blocks as loaded and
the request runs on garbage), a hook that reads filled containers but can
only return an empty collection (the recorded failures are dropped), and a
failure branch that records no blocks in a class that records them for its
other failures.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check import flowfacts as ff
from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.lifecycle._shared import functions, lifecycle, short
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option
from kvflowmap.lifecycle.blocks_dropped import dropped_blocks
from kvflowmap.lifecycle.ids import unwrap
from kvflowmap.lifecycle.model import Lifecycle
from kvflowmap.lifecycle.failures import (Fill, block_channels, empty_returns, failure_sites, fill_sites,
                                          unreported_failures, write_only)
from kvflowmap.lifecycle.load_path import (LoadPath, empty_hook, load_failures, load_paths,
                                           raised_failures)

# failure branches named in a never-filled finding (where to record blocks)
MAX_SITES = 6

READS = ("Reads: every analysed override of the failed-blocks channel's methods "
         "(`lifecycle.reports.<channel>.methods`), the attributes it and the analysed "
         "helpers it calls take contents out of, its returns, and, across the analysed "
         "code, every statement that may put something into an attribute of those names; "
         "per class that fills one directly, its failure branches (`except` handlers whose "
         "`try` works on the request, branches that log an error) and the helpers they call; "
         "per connector class (no-channel, raised), the failed-blocks hook its MRO finds and "
         "its load path (what its own load and load-report hooks make run: calls, threads, "
         "queue hand-offs, less what only the save hooks reach), the failure branches and the "
         "raising arms of tests on what a transfer returned there.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``failed_blocks``."""

    channel: str = option("failed_blocks", "the protocol's report channel for blocks whose "
                                           "load failed")
    hows: tuple[str, ...] = option(("never-filled", "always-empty", "branch", "dropped",
                                    "no-channel", "raised"),
                                   "what to report: never-filled, always-empty, branch (a "
                                   "failure branch that records no blocks while the class "
                                   "records them for its other failures), dropped (failed "
                                   "blocks computed into a local that one path never uses), "
                                   "no-channel (a failure branch on the load path of a "
                                   "connector whose hook, its own or the protocol base's, "
                                   "can only return nothing), raised (a failed transfer "
                                   "raised out of the load path instead of reported)")
    load_reports: str = option("finished_recving", "the report channel whose hooks, with the "
                                                    "protocol's load hooks, start a load path")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per drained container nothing fills, and per hook that
    returns nothing while the containers it reads are filled."""
    lc = lifecycle(ctx)
    chan = lc.spec.channel(opts.channel)
    if chan is None or not chan.methods:
        return []
    wanted = set(functions(ctx, lc))
    calls = lc.effects.calls

    def resolve(fn, call):
        return [t.fqn for t in calls.resolve(fn.ctx, call) if not t.external]

    out = []
    direct: dict[tuple[str, int], Fill] = {}
    sites = fill_sites(lc.functions)
    channels = [ch for ch in block_channels(lc.functions, chan.methods, resolve)
                if ch.hook in wanted]
    for ch in channels:
        # a ``self.x`` is filled by the class that drains it, a base or a
        # subclass; ``self._worker.x`` by the helper object's class
        fills = {a: fs for a, where, at in ch.drained
                 if (fs := [f for f in sites.get(a, ()) if f.cls is None or
                            ctx.classes.related(lc.functions[where].cls or "", f.cls) or
                            _through_helper(lc.functions[where], at, a)])}
        hook = short(ch.hook)
        filled = [fills[a][0] for a, _, _ in ch.drained if a in fills]
        direct.update(((f.fqn, f.line), f) for fs in fills.values() for f in fs if f.cls)
        if not ch.drained and ch.empty_returns:
            # put there, read by nothing
            filled = write_only(lc.functions, lc.functions[ch.hook].cls or "")
        if "always-empty" in opts.hows and ch.empty_returns and filled:
            f, line = filled[0], ch.empty_returns[0]
            out.append(ctx.finding(
                ch.hook, line,
                f"{hook} can only return an empty collection, although blocks are put into "
                f"self.{f.attr} ({short(f.fqn)}, line {f.line}) and nothing hands them to "
                "vLLM: it takes the failed blocks as loaded and never recomputes them. "
                "Return what was recorded (and clear it).",
                path=(ctx.step(f.fqn, f.line, f"blocks enter self.{f.attr}"),
                      ctx.step(ch.hook, line, "the hook returns an empty collection")),
                anchor=f"always-empty:{f.attr}"))
            continue
        if "never-filled" not in opts.hows:
            continue
        for attr, fn, line in ch.drained:
            if attr in fills:
                continue
            out.append(ctx.finding(
                ch.hook, line if fn == ch.hook else lc.functions[ch.hook].fact.line,
                f"{hook} takes failed blocks out of self.{attr} ({short(fn)}, line {line}), "
                "but nothing in the analysed code ever puts blocks into it: no failed load "
                "is ever reported, so vLLM takes the blocks as loaded and the request runs "
                "on whatever they held. Record the blocks where a load fails (every "
                "`except` and failure branch of the load path).",
                path=(ctx.step(fn, line, f"self.{attr} is drained"),
                      *(ctx.step(g, ln, "a failure branch that records no blocks")
                        for g, ln in failure_sites(lc.functions,
                                                   lc.functions[fn].cls or "")[:MAX_SITES])),
                anchor=f"never-filled:{attr}"))
    if {"no-channel", "raised"} & set(opts.hows):
        recv = lc.spec.channel(opts.load_reports)
        starters = (*lc.spec.load_hooks, *(recv.methods if recv else ()))
        paths = load_paths(lc, ctx.classes, ctx.protocol.base_class, chan.methods, starters,
                           set(wanted))
        if "no-channel" in opts.hows:
            # functions that record failed blocks where some hook drains them
            recording = {f.fqn for ch in channels for a, _, _ in ch.drained
                         for f in sites.get(a, ())}
            out += _no_channel(ctx, lc, paths, recording)
        if "raised" in opts.hows:
            out += _raised(ctx, lc, paths)
    if "dropped" in opts.hows:
        out += _dropped(ctx, lc, wanted, {a for ch in channels for a, _, _ in ch.drained})
    if "branch" in opts.hows and direct:
        def request_names(fqn: str) -> set[str]:
            # none outside the rule's functions, nor on the save path alone:
            # a failed save loses no loaded block; a helper given only the
            # request's data (an address) is not where its failure is decided
            if fqn not in wanted or fqn in lc.save_only:
                return set()
            return lc.state.of(fqn).own_request_names()

        fills_in_order = sorted(direct.values(), key=lambda f: (f.fqn, f.line))
        for u in unreported_failures(lc.functions, fills_in_order, resolve, request_names,
                                     lambda fn, it: lc.save_state(fn, unwrap(it))):
            out.append(ctx.finding(
                u.fqn, u.line,
                f"this failure branch of {short(u.fqn)} records no failed blocks, while "
                f"{short(u.fill.fqn)} (line {u.fill.line}) puts them into self.{u.attr} for "
                "vLLM to recompute: the blocks of this failed transfer are taken as loaded, "
                f"and the request runs on whatever they held. Add them to self.{u.attr} here",
                path=(ctx.step(u.fill.fqn, u.fill.line, "other failures record their blocks"),
                      ctx.step(u.fqn, u.line, "this one does not"),
                      *(ctx.step(h, lc.functions[h].fact.line,
                                 f"nor does {short(h)}, called at line {line}")
                        for h, line in u.helpers)),
                anchor=f"branch:{u.attr}"))
    return out


def _dropped(ctx: CheckContext, lc, wanted: set[str], attrs: set[str]) -> list[Finding]:
    """Failed blocks computed into a local that a normal path never uses
    (``lifecycle.blocks_dropped``)."""
    out = []
    for fqn in sorted(wanted):
        for d in dropped_blocks(lc.functions[fqn], lc.cfg(fqn), attrs):
            out.append(ctx.finding(
                fqn, d.line,
                f"the failed blocks {d.local} gets at line {d.line} are dropped on a path of "
                f"{short(fqn)} (to line {d.lost_line}), while line {d.fill_line} puts them into "
                f"self.{d.attr} for vLLM to recompute: on that path vLLM takes the blocks as "
                "loaded and the request runs on whatever they held. Record them on every path",
                path=(ctx.step(fqn, d.line, f"{d.local}: the blocks of a failed load"),
                      *(ctx.step(fqn, line, note) for line, note in d.steps
                        if line != d.line),
                      ctx.step(fqn, d.fill_line, f"elsewhere self.{d.attr} gets them")),
                anchor=f"dropped:{d.local}"))
    return out


def _raised(ctx: CheckContext, lc: Lifecycle, paths: list[LoadPath]) -> list[Finding]:
    """A failed transfer raised out of a connector's load path (not code only
    a background thread runs, where ``thread_loop`` judges it)."""
    background = lc.background_code()
    seen: set[tuple[str, int]] = set()
    out = []
    for p in paths:
        cls = p.cls
        for fqn, line, outcome in raised_failures(
                lc.functions, set(p.reached - background),
                lambda f: lc.state.of(f).own_request_names()):
            if (fqn, line) in seen:
                continue
            seen.add((fqn, line))
            out.append(ctx.finding(
                fqn, line,
                f"a failed transfer raises here, on the load path of {cls.rpartition('.')[2]} "
                f"(`{outcome}` is what the transfer returned): the exception leaves the worker "
                "hook, so the worker, and the engine with it, dies with every request it holds, "
                "instead of vLLM recomputing the failed blocks. Record the request's blocks in "
                "the container get_block_ids_with_load_errors returns and report the request "
                "finished",
                path=(ctx.step(fqn, line, f"`{outcome}` says the transfer failed: raise"),),
                anchor=f"raised:{outcome}"))
    return out


def _no_channel(ctx: CheckContext, lc: Lifecycle, paths: list[LoadPath],
                recording: set[str]) -> list[Finding]:
    """Per connector class whose failed-blocks hook (its own override or the
    protocol base's default) can only return nothing: each failure branch on
    its load path (a failed load vLLM never hears of) and, for an own
    override in a class whose probe may answer ``load_kv_async=True``, the
    hook itself (the stub to fix, failure branches visible or not). A class
    with no override whose failure branches record their blocks for another
    connector's hook (``recording``: the functions that fill what a hook
    drains) is reported once, at the class: the hook is what it lacks."""
    base = ctx.protocol.base_class

    def default(hook: str) -> bool:  # the protocol base's, no override
        return hook.rpartition(".")[0] == base

    def silent(hook: str | None) -> bool:
        return hook is not None and (default(hook) or empty_hook(lc.functions, hook))

    # code shared with a connector whose hook does report failed blocks, by
    # a connector that says in its own override it reports none (a prefill
    # connector reusing the decode side's worker base, whose wait list it
    # leaves empty), is judged on the reporting connector's terms; one that
    # merely lacks the override (the base default answers) is still judged
    reported = set().union(*(p.reached for p in paths if p.hook and not silent(p.hook)))
    seen: set[tuple[str, int]] = set()
    stubs: set[str] = set()
    out = []
    for p in paths:
        cls, hook = p.cls, p.hook
        if hook is None or not silent(hook):
            continue
        subs = ctx.classes.all_subclasses(cls)
        if default(hook) and subs and all(
                ctx.classes.find_member(sub, hook.rpartition(".")[2]) != hook for sub in subs):
            # a base of connectors that answer the hook themselves (PegaFlow's
            # _PdSplitConnector): vLLM loads those, each judged on its own path
            continue
        failures = load_failures(lc.functions, set(p.reached),
                                 lambda f: lc.state.of(f).own_request_names(),
                                 lambda fn, it: lc.save_state(fn, unwrap(it)))
        probe = ctx.classes.find_member(cls, lc.spec.probe)
        parks = (ff.async_answer(ctx, probe, lc.spec.async_element)
                 if probe and hook in lc.functions and hook.rpartition(".")[0] != base
                 else None)
        if parks is not None and hook not in stubs:
            stubs.add(hook)
            out.append(_stub(ctx, lc, cls, hook, parks, failures))
        shared = [(fqn, line) for fqn, line in failures
                  if fqn in reported and fqn in recording]
        if default(hook) and shared:
            # the branches record their blocks for another connector's hook:
            # what this connector lacks is the hook (LMCache 0.3.9.post2's
            # 0.8.5 facade beside the one that forwards it)
            out.append(_unforwarded(ctx, cls, hook, shared))
        for fqn, line in failures:
            if (fqn, line) in seen or (fqn in reported and not default(hook)) or \
                    (fqn, line) in shared:
                continue
            seen.add((fqn, line))
            where = (f"the protocol base's default {short(hook)}" if hook.rpartition(".")[0] == base
                     else f"{short(hook)} (line {lc.functions[hook].fact.line})")
            out.append(ctx.finding(
                fqn, line,
                f"this failure branch of {short(fqn)} is on the load path of "
                f"{cls.rpartition('.')[2]}, whose failed-blocks hook is {where}: it can only "
                "return an empty collection, so no failed load ever reaches vLLM. The blocks "
                "of this failed transfer are taken as loaded and the request runs on whatever "
                "they held. Record them in a container the hook returns and clears (or, where "
                "they are recorded, have this connector's hook return them)",
                path=(ctx.step(fqn, line, "a load fails here"),
                      *((ctx.step(hook, lc.functions[hook].fact.line,
                                  "the hook can only return nothing"),)
                        if hook in lc.functions else ())),
                anchor=f"no-channel:{cls.rpartition('.')[2]}"))
    return out


def _unforwarded(ctx: CheckContext, cls: str, hook: str,
                 shared: list[tuple[str, int]]) -> Finding:
    """A connector with no failed-blocks hook of its own that loads through
    code whose failure branches another connector's hook reports."""
    d = ctx.model.defs[cls]
    fqn, line = shared[0]
    name = hook.rpartition(".")[2]
    return ctx.finding(
        cls, d.fact.line,
        f"{cls.rpartition('.')[2]} has no {name} of its own, so the protocol base's default "
        f"answers: it can only return an empty collection. The code it loads through fails "
        f"loads in {len(shared)} place(s) ({short(fqn)}, line {line}) and records their "
        f"blocks for another connector's {name}, which this one never asks: its failed "
        "loads are taken as successes and the requests run on whatever the blocks held. "
        f"Override {name} and return what the code it loads through recorded",
        path=(ctx.step(fqn, line, "a load fails here; its blocks are recorded"),
              ctx.step(cls, d.fact.line,
                       f"no {name}: the base's default answers")),
        anchor=f"no-channel-hook:{cls.rpartition('.')[2]}")


def _stub(ctx: CheckContext, lc: Lifecycle, cls: str, hook: str,
          parks: tuple[str, int, str], failures: list[tuple[str, int]]) -> Finding:
    """The analysed failed-blocks hook of a connector that loads
    asynchronously can only return nothing: every failed load is a success."""
    fn = lc.functions[hook]
    line = next(iter(empty_returns(fn)), fn.fact.line)
    probe, probe_line, text = parks
    return ctx.finding(
        hook, line,
        f"{short(hook)} can only return an empty collection, while {cls.rpartition('.')[2]} "
        f"loads asynchronously ({short(probe)} may answer load_kv_async=True, line "
        f"{probe_line}): a load that fails is never reported, so vLLM takes its blocks as "
        "loaded and the request runs on whatever they held"
        + (f"; {len(failures)} failure branch(es) on the load path say so" if failures else "")
        + ". Record the blocks of each failed load in a container this hook returns and "
        "clears (or return what a helper records)",
        path=(ctx.step(probe, probe_line, f"returns {text}: an async load"),
              *(ctx.step(f, ln, "a load fails here") for f, ln in failures[:MAX_SITES]),
              ctx.step(hook, line, "the hook can only return nothing")),
        anchor=f"stub:{cls.rpartition('.')[2]}")


def _through_helper(fn, line: int, attr: str) -> bool:
    """The drain at ``line`` of ``fn`` reads the attribute on another object
    it holds (``self._worker.failed_blocks``), not on ``self``."""
    return any(n.startswith("self.") and n.count(".") >= 2 and n.endswith("." + attr)
               for s in fn.stmts if s.line == line for n in s.names)
