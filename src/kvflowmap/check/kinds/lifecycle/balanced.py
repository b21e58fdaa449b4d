"""``lifecycle`` mode ``balanced``: ids that enter a request-keyed container can
leave it, and a container ids are taken out of is filled somewhere.

Per leaf connector class (see ``kvflowmap.lifecycle.balance``): a
``self.X`` that request ids enter and that no member can empty leaks one
entry per request for the life of the process (and a reused id still looks
pending); a ``self.X`` that a report reads or ids are removed from, and that
no member fills, means the hook that should record the request does not, and
whatever waits on it waits forever.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.lifecycle._shared import functions, lifecycle, short
from kvflowmap.check.model import Finding, Step
from kvflowmap.check.options import option
from kvflowmap.lifecycle.balance import Unbalanced
from kvflowmap.lifecycle.probe_left import ProbeLeft

READS = ("Reads: the lifecycle model's request-keyed containers per leaf class (members "
         "resolved along the MRO), every use of `self.X` by those members (adds, removals, "
         "reads, reassignments, hand-offs to other code), the containers report hooks "
         "read, how `__init__` creates each container, and (commit-only) which of the "
         "probe, commit and ending hooks make each use run.")

_WHAT = {"add": "ids enter here", "remove": "ids leave here", "clear": "emptied here",
         "read": "read here", "init": "created here",
         "forward": "handed to the workers in the step's metadata here"}


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``balanced``."""

    hows: tuple[str, ...] = option(("never-removed", "never-filled", "commit-only"),
                                   "which imbalance to report: never-removed, never-filled, "
                                   "commit-only (the probe adds the entry and only the commit "
                                   "hook removes it: a request that ends before allocation "
                                   "leaves it)")
    max_steps: int = option(8, "uses of the container listed in a finding's path")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per unbalanced container of a leaf class in the rule's modules."""
    lc = lifecycle(ctx)
    wanted = set(functions(ctx, lc))
    # leaf classes that share the code of the site (a mixin's subclasses) are one finding
    same: dict[tuple[str, str, str, int, str], list[Unbalanced]] = {}
    found = lc.unbalanced()
    for u in found:
        if u.how in opts.hows and u.site.fqn in wanted:
            same.setdefault((u.how, u.attr, u.site.fqn, u.site.line, u.side), []).append(u)
    hints = _swapped(found)
    out = [_finding(ctx, us[0], opts, _ends(ctx, lc, us[0].cls), _commit(ctx, lc, us[0].cls),
                    [x.cls for x in us[1:]], hints.get((us[0].cls, us[0].attr), ""))
           for us in same.values()]
    if "commit-only" in opts.hows:
        # one finding per ending hook that owes removals (a lookup client's
        # several containers are one missing cleanup), else per add
        groups: dict[str, list[ProbeLeft]] = {}
        for p in lc.probe_leftovers():
            if p.add.fqn in wanted:
                sf = ctx.model.source(ctx.definition(p.end).module) if p.end else None
                if p.end not in wanted or sf is None or sf.host:
                    # another package's hook (vLLM's facade hosting it): report at the add
                    p = replace(p, end=None)
                groups.setdefault(p.end or f"{p.add.fqn}:{p.attr}", []).append(p)
        out += [_commit_only(ctx, lc, ps, opts) for _, ps in sorted(groups.items())]
    return out


def _commit_only(ctx: CheckContext, lc, ps: list[ProbeLeft], opts: Options) -> Finding:
    """The finding at the ending hook (where the removal belongs), else at the add."""
    p = ps[0]
    cls = p.cls.rpartition(".")[2]
    spec = lc.spec
    at = p.end or p.add.fqn
    line = ctx.function(at).line if at != p.add.fqn else p.add.line
    first = p.removes[0]
    attrs = ", ".join(f"self.{q.attr}" for q in ps)
    if p.on_commit:
        how = (f"only {spec.commit} takes it out ({short(first.fqn)}, line {first.line}). "
               f"vLLM calls {spec.commit} only once it allocates blocks: a request aborted "
               f"while it waits")
    else:
        how = (f"only a later call of the probe takes it out ({short(first.fqn)}, line "
               f"{first.line}), once what it waits for is ready. A request aborted while "
               f"it waits is never probed again: it")
    msg = (f"the probe ({short(p.add.fqn)}, line {p.add.line}) adds an entry for the request to "
           f"{attrs} of {cls}, and {how} goes from the waiting queue straight to "
           f"{spec.delay_free}, which leaves the entry behind, one per such request, and a "
           f"later request with the same id finds it. Remove it in {spec.delay_free} too.")
    path: tuple[Step, ...] = ()
    for q in ps:
        path += (ctx.step(q.add.fqn, q.add.line, f"self.{q.attr}: the probe adds the request"),)
        path += tuple(ctx.step(r.fqn, r.line, f"self.{q.attr}: removed once the request is "
                               + ("allocated" if q.on_commit else "probed again, and ready"))
                      for r in q.removes[:opts.max_steps])
    if p.end:
        path += (ctx.step(p.end, ctx.function(p.end).line,
                          f"the request ends here; {attrs} keep{'s' if len(ps) == 1 else ''} "
                          "its entry"),)
    return ctx.finding(at, line, msg, path=path, anchor=f"commit-only:{p.attr}")


def _commit(ctx: CheckContext, lc, cls: str) -> str | None:
    """The class's commit hook (``update_state_after_alloc``): where a request
    it accepts is recorded."""
    m = ctx.classes.find_member(cls, lc.spec.commit)
    return m if m in lc.functions else None


def _ends(ctx: CheckContext, lc, cls: str) -> list[str]:
    """Where the class learns that a request ended: its delayed-free hook
    (``request_finished``) and the hooks given finished ids (``get_finished``)."""
    out = []
    for name in dict.fromkeys([lc.spec.delay_free, *lc.spec.hooks]):
        m = ctx.classes.find_member(cls, name)
        if m in lc.functions and (name == lc.spec.delay_free or set(
                lc.spec.finished_params) & set(lc.functions[m].param_names)):
            out.append(m)
    return out


def _swapped(found: list[Unbalanced]) -> dict[tuple[str, str], str]:
    """Per (class, attribute), a hint when a removal names the wrong container:
    a function takes ids out of a container nothing fills (``never-filled``)
    and reads another, of the same class, that ids enter and nothing empties
    (``never-removed``): ``self.requests_meta.pop(rid)`` where the probe filled
    ``self.requests_blend_meta``."""
    out: dict[tuple[str, str], str] = {}
    for b in found:
        if b.how != "never-filled":
            continue
        takes = {x.fqn for x in b.uses if x.what in ("remove", "clear")}
        for a in found:
            if a.how != "never-removed" or a.cls != b.cls or a.side or b.side:
                continue
            where = sorted(takes & {x.fqn for x in a.uses})
            if not where:
                continue
            fn = short(where[0])
            out[(a.cls, a.attr)] = (f" {fn} takes ids out of self.{b.attr} instead, which "
                                    f"nothing fills: the removal may name the wrong container.")
            out[(b.cls, b.attr)] = (f" {fn} also reads self.{a.attr}, which ids enter and "
                                    "nothing empties: the removal may name the wrong container.")
    return out


def _finding(ctx: CheckContext, u: Unbalanced, opts: Options, ends: list[str],
             commit: str | None, others: list[str], hint: str = "") -> Finding:
    cls = u.cls.rpartition(".")[2]
    where = f"{short(u.site.fqn)} (line {u.site.line})"
    if u.how == "never-removed" and u.side:
        other = "worker" if u.side == "scheduler" else "scheduler"
        msg = (f"request ids enter self.{u.attr} of {cls} in {where}, which only the "
               f"{u.side}'s hooks reach, but every removal of them runs only for the "
               f"{other}'s hooks. {cls} serves both sides, and the {u.side}'s instance is a "
               f"separate object in a separate process: its entries are never removed, one "
               "per request for the life of the process. Remove the entry on the "
               f"{u.side} side too, or hand the container to the {other} in the step's "
               "metadata.")
    elif u.how == "never-removed":
        msg = (f"request ids enter self.{u.attr} of {cls} in {where}, but no member of "
               f"{cls} ever removes them (no pop/del/discard/clear, no reassignment, and "
               "the container is not handed to other code): one entry per request stays "
               "for the life of the process, and a reused id still looks pending. Remove "
               "the entry where the request completes, fails or is aborted.")
    elif u.site.what == "forward":
        msg = (f"self.{u.attr} of {cls} is handed to the workers in the step's metadata in "
               f"{where}, but no member of {cls} ever puts a request id into it: the "
               "workers never learn of the requests it should carry, so whatever they do "
               "for them (track, send, release) never happens.")
    else:
        msg = (f"self.{u.attr} of {cls} is read or drained in {where}, but no member of "
               f"{cls} ever puts a request id into it: the hook that should record the "
               "request does not, so whatever waits on this container (a report, a load, "
               "a release) never happens for it.")
    msg += hint
    if others:
        names = sorted(o.rpartition(".")[2] for o in others)
        msg += (f" The same holds for {len(names)} more class{'es' if len(names) > 1 else ''} "
                f"built on this code: {', '.join(names[:5])}"
                + (f" and {len(names) - 5} more." if len(names) > 5 else "."))
    path = tuple(ctx.step(x.fqn, x.line, f"self.{u.attr}: {_WHAT.get(x.what, x.what)}")
                 for x in u.uses[:opts.max_steps])
    if u.how == "never-removed":
        # where the request ends and its entry could go
        path += tuple(ctx.step(e, ctx.function(e).line, f"the request ends here; self.{u.attr} "
                               "keeps its entry") for e in ends)
    elif commit is not None:
        # where an accepted request is recorded, and this container is not filled
        path += (ctx.step(commit, ctx.function(commit).line, f"the request is accepted here; "
                          f"nothing puts it into self.{u.attr}"),)
    return ctx.finding(u.site.fqn, u.site.line, msg, path=path, anchor=f"{u.how}:{u.attr}")
