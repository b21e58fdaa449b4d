"""``forbid`` writes mode: writes on ``self.*`` in a context function, in the
methods it calls on ``self`` and in the same-name method it delegates to,
unless allowed or undone by what the ``released_by`` methods reach."""

from __future__ import annotations

import fnmatch
import re
from collections import deque
from dataclasses import replace

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.forbid_options import Options
from kvflowmap.check.kinds.forbid_contexts import (Chain, contexts, followable, short,
                                                    start_chain)
from kvflowmap.check.model import Finding
from kvflowmap.lifecycle.view import walk

REMOVALS = {"delitem", "pop", "popitem", "discard", "remove", "clear", "popleft"}
KEYED = {"setitem", "add", "setdefault"}


def _is_method(ctx: CheckContext, fqn: str) -> bool:
    fn = ctx.function(fqn)
    return bool(fn.params) and fn.class_qualname is not None and not any(
        d.split(".")[-1] == "staticmethod" for d in fn.decorators)


def _self_reach(ctx: CheckContext, opts: Options, start: str) -> dict[str, Chain]:
    """Methods reached from ``start`` by ``self.m()`` calls and same-name
    delegation (``self.half.m()`` from ``m``); any ``self.a.m()`` with ``follow_attrs``."""
    depth, attrs = opts.depth, opts.follow_attrs
    chains, todo = start_chain(ctx, start), deque([(start, 0)])
    while todo:
        fqn, hops = todo.popleft()
        fn = ctx.function(fqn)
        if hops >= depth or not fn.params:
            continue
        me = fn.params[0].name
        for call in ctx.calls_in(fqn):
            callee = call.callee or ""
            parts = callee.split(".")
            if parts[0] != me or len(parts) < 2 or "(" in callee or "[" in callee:
                continue
            if len(parts) > 2 and parts[-1] != fn.name and not attrs:
                continue
            for t in _with_overrides(ctx, [t.fqn for t in ctx.resolve_call(fqn, call)]):
                if t in chains or not followable(ctx, opts, t) or not _is_method(ctx, t):
                    continue
                chains[t] = (*chains[fqn], ctx.step(fqn, call.line, f"calls {call.callee}"))
                todo.append((t, hops + 1))
    return chains


def _with_overrides(ctx: CheckContext, fqns: list[str]) -> list[str]:
    """``fqns`` and the overrides of each in subclasses (the graph's dispatch
    edges): ``self.half.m()`` typed as the base half runs a subclass's ``m``
    when a connector subclass builds that half (``TPUConnectorHMAScheduler``)."""
    g = ctx.graph
    out = list(fqns)
    for f in fqns:
        if f in g:
            out += sorted(v for _, v, k in g.out_edges(f, data="kind")
                          if k == "dispatch" and v not in out)
    return out


def _writes(ctx: CheckContext, fqn: str) -> list[tuple[str, int, int, str, str | None]]:
    """(target, line, column, op, key) of each write on ``self.*`` in ``fqn``."""
    fn, ff = ctx.function(fqn), ctx.facts(fqn)
    me = f"{fn.params[0].name}."
    out: list[tuple[str, int, int, str, str | None]] = [
        (a.target, a.line, a.col, "+=" if a.aug else "=", None) for a in ff.assigns
        if a.scope == fn.qualname and a.target.startswith(me)]
    out += [(c.container, c.line, c.col, c.op, c.key) for c in ff.containers
            if c.scope == fn.qualname and c.container.startswith(me)]
    return sorted(out, key=lambda w: (w[1], w[2]))


def _attr(target: str) -> str:
    """``self._d[].x`` -> ``_d``: the attribute of the instance written."""
    return target.split(".")[1].split("[")[0]


def _release_reach(ctx: CheckContext, opts: Options, start: str) -> dict[str, Chain]:
    """What a releasing or committing method reaches: through helper objects
    too when the probe's writes are followed into them (``follow_attrs_keyed``)."""
    return _self_reach(ctx, replace(opts, follow_attrs=True) if opts.follow_attrs_keyed
                       else opts, start)


def released_writes(ctx: CheckContext, opts: Options) -> set[tuple[str, str, str]]:
    """(class, attribute, remove|reset) done in what the ``released_by`` methods reach:
    a removal (pop, del, discard) or a reset (``self.x = ...``, ``self.x.clear()``)."""
    out: set[tuple[str, str, str]] = set()
    for start in contexts(ctx, opts, set(opts.released_by)):
        for fqn in _release_reach(ctx, opts, start):
            cls = fqn.rpartition(".")[0]
            for target, _, _, op, _ in _writes(ctx, fqn):
                if op == "clear" or (op == "=" and target.count(".") == 1 and "[" not in target):
                    out.add((cls, _attr(target), "reset"))
                elif op in REMOVALS:
                    out.add((cls, _attr(target), "remove"))
    return out


def committed_attrs(ctx: CheckContext, opts: Options) -> dict[tuple[str, str], str]:
    """(class, attribute) of the containers that what the ``committed_by``
    methods reach fills by key (``self._load[rid] = spec``, ``.add(rid)``),
    with the first such method: per-request state the scheduler committed."""
    out: dict[tuple[str, str], str] = {}
    for start in contexts(ctx, opts, set(opts.committed_by)):
        for fqn in _release_reach(ctx, opts, start):
            cls = fqn.rpartition(".")[0]
            for target, _, _, op, key in _writes(ctx, fqn):
                if op in KEYED and key and target.count(".") == 1:
                    out.setdefault((cls, _attr(target)), start)
    return out


def handed_attrs(ctx: CheckContext, opts: Options) -> set[tuple[str, str]]:
    """(class, attribute) of containers that what the ``handed_by`` methods
    reach puts into something else (``meta.reqs_in_batch = self._reqs_in_batch``,
    ``Meta(reqs=self._reqs)``): the step's work for the workers."""
    out: set[tuple[str, str]] = set()
    for start in contexts(ctx, opts, set(opts.handed_by)):
        for fqn in _self_reach(ctx, opts, start):
            fn, ff = ctx.function(fqn), ctx.facts(fqn)
            me = f"{fn.params[0].name}." if fn.params else "self."
            cls = fqn.rpartition(".")[0]
            values = [a.value for a in ff.assigns if a.scope == fn.qualname
                      and not a.target.startswith(me)]
            values += [v for c in ff.calls if c.scope == fn.qualname
                       for v in (*c.args, *(v for _, v in c.kwargs))]
            out.update((cls, v[len(me):]) for v in values
                       if v and v.startswith(me) and v.count(".") == 1)
    return out


def _reads_back(ctx: CheckContext, fqns, target: str) -> bool:
    """Some function of ``fqns`` tests or looks up ``target`` (``rid in
    self._x``, ``self._x.get(rid)``): asking again finds the first answer."""
    for fqn in fqns:
        fn, ff = ctx.function(fqn), ctx.facts(fqn)
        if any(c.scope == fn.qualname and target in c.operands for c in ff.compares):
            return True
        if any(c.scope == fn.qualname and c.callee in (f"{target}.get", f"{target}.setdefault",
                                                         f"{target}.__contains__")
               for c in ff.calls):
            return True
    return False


def writes_from(ctx: CheckContext, opts: Options, start: str,
                released: set[tuple[str, str, str]],
                handed: set[tuple[str, str]] | None = None,
                committed: dict[tuple[str, str], str] | None = None) -> list[Finding]:
    """Writes on ``self.*`` in what context function ``start`` reaches on
    ``self``, unless allowed or undone by the ``released`` resets/removals.
    A keyed write into a container that is ``handed`` to the workers is
    committed work for this step, whatever resets it later, unless it is
    read back first (a memo). One into a container a ``committed`` method
    also fills overwrites what that method recorded when the probe is asked
    again (after a preemption, a failed allocation), unless it only fills a
    missing key (``if rid not in self._d: self._d[rid] = ...``)."""
    out: list[Finding] = []
    ignore_removals = opts.ignore_removals
    reach = _self_reach(ctx, opts, start)
    helpers: set[str] = set()
    if opts.follow_attrs_keyed and not opts.follow_attrs:
        wide = _self_reach(ctx, replace(opts, follow_attrs=True), start)
        helpers = set(wide) - set(reach)
        reach = {**wide, **reach}
    drained = _drained(ctx, reach)
    fills = _fills(ctx, reach)
    memos = _memos(fills)
    for fqn, chain in sorted(reach.items()):
        cls = fqn.rpartition(".")[0]
        for target, line, col, op, key in _writes(ctx, fqn):
            attr = target.split(".", 1)[1]
            if _allowed(opts, attr) or (ignore_removals and op in REMOVALS):
                continue
            if op == "add" and (cls, _attr(target)) in drained:
                continue  # a set the probe's own calls prune of what is done
            if fqn in helpers and not (op in KEYED and _request_key(ctx, fqn, key)):
                continue  # a helper object's own bookkeeping, not the request's state
            if op == "=" and _lazy_init(ctx.function(fqn).body, target, line):
                continue  # ``if self.client is None: self.client = ...``: done once
            if op in KEYED and key and _moved(ctx, fqn, key, line):
                continue  # the entry was taken out under that key first: a move, no commit
            ok = {"reset", "remove"} if op in KEYED and key else {"reset"}
            sent = op in KEYED and key and target.count(".") == 1 and any(
                a == _attr(target) and ctx.classes.related(cls, k) for k, a in handed or ()) and \
                not _reads_back(ctx, reach, target)
            clobbers = "" if not (op in KEYED and key and target.count(".") == 1) else next(
                (by for (k, a), by in (committed or {}).items()
                 if a == _attr(target) and ctx.classes.related(cls, k) and by != start), "")
            guarded = op == "setdefault" or (fqn, target, line) in fills
            if clobbers and guarded:
                clobbers = ""  # only a key nothing recorded yet is filled
            memo = "" if guarded or not (op == "setitem" and key and target.count(".") == 1) \
                else next((by for (k, a), by in memos.items()
                           if a == _attr(target) and ctx.classes.related(cls, k)), "")
            if not sent and not clobbers and not memo and any(
                    a == _attr(target) and how in ok and ctx.classes.related(cls, k)
                    for k, a, how in released):
                continue
            what = {"=": f"{target} = ...", "+=": f"{target} += ...",
                    "setitem": f"{target}[{key or '...'}] = ...",
                    "delitem": f"del {target}[{key or '...'}]"}.get(op, f"{target}.{op}(...)")
            path = (*chain, ctx.step(fqn, line, f"writes {what}"))
            why = (f"{short(clobbers)} fills {target} too, so asking again overwrites the "
                   "state it committed" if clobbers else
                   f"{short(memo)} fills {target} only for a request it holds no entry for, "
                   "so this overwrite loses what an earlier call of the probe recorded for "
                   "the same request" if memo else "not memo state")
            out.append(ctx.finding(fqn, line, f"the probe {short(start)} writes {what} in "
                                   f"{short(fqn)}: {why}", column=col, path=path,
                                   anchor=f"write:{target}:{op}"))
    return out


_DRAINS = ("difference_update", "intersection_update", "clear")


def _fills(ctx: CheckContext, reach: dict[str, Chain]) -> dict[tuple[str, str, int], str]:
    """``(function, target, line)`` of each keyed write in the probe's reach
    that only fills a missing key (``if rid not in self._trackers:
    self._trackers[rid] = Tracker(...)``), with its op."""
    return {(fqn, target, line): op for fqn in sorted(reach)
            for target, line, _, op, key in _writes(ctx, fqn)
            if op in KEYED and key and _fills_missing(ctx, fqn, target, key, line)}


def _memos(fills: dict[tuple[str, str, int], str]) -> dict[tuple[str, str], str]:
    """(class, attribute) of the containers the probe's reach fills by key
    only where the key is missing, with the function that does: the probe's
    memo of the request, which every later call must find again."""
    out: dict[tuple[str, str], str] = {}
    for (fqn, target, _), op in sorted(fills.items()):
        if op == "setitem" and target.count(".") == 1:
            out.setdefault((fqn.rpartition(".")[0], _attr(target)), fqn)
    return out


def _drained(ctx: CheckContext, reach: dict[str, Chain]) -> set[tuple[str, str]]:
    """(class, attribute) of the sets what the probe reaches prunes wholesale
    (``self.aborted.difference_update(done)``): kept by the probe itself, a
    later call of it cleans up, whichever request it is asked about."""
    out: set[tuple[str, str]] = set()
    for fqn in reach:
        me = f"{ctx.function(fqn).params[0].name}."
        for c in ctx.calls_in(fqn):
            callee = c.callee or ""
            if callee.startswith(me) and callee.rpartition(".")[2] in _DRAINS:
                out.add((fqn.rpartition(".")[0], _attr(callee.rpartition(".")[0])))
    return out


def _request_key(ctx: CheckContext, fqn: str, key: str | None) -> bool:
    """``key`` holds a request id in ``fqn`` (the lifecycle model's data flow)."""
    lc = ctx.lifecycle()
    fn = lc.functions.get(fqn)
    return bool(key) and fn is not None and lc.state.is_id(fn, key)


def _moved(ctx: CheckContext, fqn: str, key: str, line: int) -> bool:
    """The keyed write at ``line`` stores what ``fqn`` took out of one of its
    object's containers under the same key, or what a call made of it
    (``probe = self._probes.pop(rid)``, ``left = self._unpin(rid, probe)``,
    ``self._retry[rid] = left``): that request's existing state moved or put
    back, not new state the probe commits."""
    fn, ff = ctx.function(fqn), ctx.facts(fqn)
    me = f"{fn.params[0].name}." if fn.params else "self."
    pops = {c.line for c in ff.containers if c.scope == fn.qualname and c.op in REMOVALS
            and c.key == key and c.line < line and c.container.startswith(me)}
    mine = [a for a in ff.assigns if a.scope == fn.qualname and a.line < line]
    taken = {a.target for a in mine if a.line in pops}
    made = {c.line for c in ff.calls if c.scope == fn.qualname and taken & {
        (x or "").partition(".")[0] for x in (*c.args, *(v for _, v in c.kwargs))}}
    taken |= {a.target for a in mine if a.line in made}
    return bool(taken) and any(s.line == line and taken & set(s.names) for s in walk(fn.body))


def _lazy_init(body, target: str, line: int) -> bool:
    """The write at ``line`` sits in ``if <target> is None`` / ``if not <target>``:
    a lazy initialisation, the same on every call after the first."""
    pattern = re.compile(rf"^\(?\s*(not\s+{re.escape(target)}|{re.escape(target)}\s+is\s+None)"
                         rf"\s*\)?$")
    for s in walk(body):
        if s.kind == "if" and pattern.match((s.text or "").strip()) and \
                any(b.line == line for b in s.body):
            return True
    return False


def _fills_missing(ctx: CheckContext, fqn: str, target: str, key: str, line: int) -> bool:
    """The keyed write at ``line`` sits in ``if key not in target`` (or, after
    ``x = target.get(key)``, in ``if x is None`` / ``if not x``): it only
    fills a key nothing recorded yet."""
    fn = ctx.function(fqn)
    member = re.compile(rf"^\(?\s*{re.escape(key)}\s+not\s+in\s+{re.escape(target)}\s*\)?$")
    ff = ctx.facts(fqn)
    lookups = {c.line for c in ff.calls if c.scope == fn.qualname and
               c.callee == f"{target}.get" and c.args[:1] == (key,)}
    got = {a.target for a in ff.assigns if a.scope == fn.qualname and a.line in lookups}
    for s in walk(fn.body):
        if s.kind != "if" or not any(b.line <= line <= _last_line(b) for b in s.body):
            continue
        test = (s.text or "").strip()
        if member.match(test) or any(test in (f"{g} is None", f"not {g}") for g in got):
            return True
    return False


def _last_line(s) -> int:
    """The last line of a statement and its nested blocks."""
    return max([s.line, *(_last_line(b) for b in (*s.body, *s.orelse, *s.final))])


def _allowed(opts: Options, attr: str) -> bool:
    first = attr.split(".")[0].split("[")[0]
    return any(fnmatch.fnmatchcase(first, p) or fnmatch.fnmatchcase(attr, p)
               for p in opts.allow_attrs)
