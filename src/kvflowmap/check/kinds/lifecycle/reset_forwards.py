"""``lifecycle`` mode ``reset_forwards``: resetting tracked ids forwards them first.

``self._done.clear()`` or ``self._recving = {}`` on a request-keyed
container throws away every id in it. Unless the same function read the
container first (swapped it out, reported it, moved its ids), those requests
are never reported and wait forever. Teardown methods are exempt.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.lifecycle._shared import functions, lifecycle, short, steps
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option
from kvflowmap.lifecycle.containers import resets

READS = ("Reads: the lifecycle model's request-keyed containers (ids enter them "
         "somewhere), their resets (`clear()`, reassignment to an empty container), and "
         "the names each earlier statement of the resetting function reads.")

@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``reset_forwards``."""

    exempt_methods: tuple[str, ...] = option(
        ("__init__", "__del__", "__exit__", "*shutdown*", "*close*", "reset", "reset_*"),
        "teardown methods (globs): dropping everything is what they are for")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per reset of a tracked container that nothing read first."""
    lc = lifecycle(ctx)
    tracked = {(c.owner, c.attr) for c, info in lc.containers.items()
               if info.of_kind("add") and _flows_out(lc, c.owner, f"self.{c.attr}")}
    def exempt(fqn: str) -> bool:
        return any(fnmatch.fnmatch(fqn.rpartition(".")[2], p) for p in opts.exempt_methods)

    fns = [f for f in functions(ctx, lc) if not exempt(f) and not _teardown_only(ctx, f, exempt)]
    return each_function(ctx, fns, lambda f: _check(ctx, lc, f, tracked))


def _teardown_only(ctx: CheckContext, fqn: str, exempt) -> bool:
    """Every caller of ``fqn`` is a teardown method (a state object's
    ``clear()`` that only ``shutdown()`` calls)."""
    g = ctx.graph
    callers = [u for u, _, k in g.in_edges(fqn, data="kind") if k == "call"] if fqn in g else []
    return bool(callers) and all(exempt(u) for u in callers)


def _check(ctx: CheckContext, lc, fqn: str, tracked: set[tuple[str, str]]) -> list[Finding]:
    fn = lc.functions[fqn]
    if not fn.cls:
        return []
    out = []
    for i, s in enumerate(fn.stmts):
        for attr, line in resets(fn, s):
            if (fn.cls, attr) not in tracked:
                continue
            chain = f"self.{attr}"
            earlier = [t for t in fn.stmts[:i] if t.line < line and (
                chain in t.names or _helper_reads(ctx, lc, fn, t, chain))]
            same = [n for n in s.names if n == chain]
            if earlier or len(same) > 1 or _read_in_value(fn, s, chain):
                continue
            out.append(ctx.finding(
                fqn, line, f"{short(fqn)} resets {chain} without reading it first: the request "
                "ids in it are never reported or moved, and those requests wait forever. "
                "Swap it out (`done, self.x = self.x, set()`) and hand the ids on",
                path=steps(ctx, fqn, [(line, f"{chain} is emptied here")]),
                anchor=f"reset:{attr}"))
    return out


def _flows_out(lc, owner: str, chain: str) -> bool:
    """Ids leave the container somewhere: it is iterated, returned, copied or
    passed on whole. A set only tested for membership owes nobody its ids."""
    for fn in lc.functions.values():
        if fn.cls != owner:
            continue
        for s in fn.stmts:
            if chain not in s.names:
                continue
            if s.kind == "for" and chain in (s.text or "").partition(" in ")[2]:
                return True
            if fn.returns(s) or any(_whole(a.value, chain) or _whole(a.origin, chain)
                                    for a in fn.assigns(s)):
                return True
            if any(_whole(v, chain) for c in fn.calls(s)
                   for v in (*c.args, *(v for _, v in c.kwargs))):
                return True
    return False


_WHOLE = ("copy()", "keys()", "values()", "items()")


def _whole(text: str | None, chain: str) -> bool:
    """``text`` is the container itself or a view or copy of all of it
    (``self._x``, ``self._x.copy()``, ``self._x.keys()``)."""
    if not text:
        return False
    return text == chain or (text.startswith(chain + ".") and text[len(chain) + 1:] in _WHOLE)


def _helper_reads(ctx: CheckContext, lc, fn, s, chain: str, depth: int = 2) -> bool:
    """A call in ``s`` to a method of the same class that reads ``chain``
    (the per-step state a helper consumed before the reset)."""
    for c in fn.calls(s):
        for t in ctx.linker.calls.resolve(fn.ctx, c):
            callee = lc.functions.get(t.fqn)
            if callee is None or callee.cls != fn.cls or callee.fqn == fn.fqn:
                continue
            if any(chain in st.names for st in callee.stmts):
                return True
            if depth > 1 and any(_helper_reads(ctx, lc, callee, st, chain, depth - 1)
                                 for st in callee.stmts):
                return True
    return False


def _read_in_value(fn, s, chain: str) -> bool:
    """``done, self._x = self._x, set()``: the statement reads it too."""
    return any(a.value == chain for a in fn.assigns(s))
