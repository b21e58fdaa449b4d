"""Summaries of called helpers for ``paired``, memoised and cycle-safe.

A helper *releases* a token (``call``: a release call; ``container:<chain>``:
a removal from that container) when every path from its entry to its normal
exit does it. Two kinds of path do not count, because on them there is
nothing to release: a guard clause (the true edge of ``if not x`` /
``if x is None``, the false edge of ``if x``) and a ``for`` loop that does the
release in its body (``for lease in leases: release(lease)`` releases each).
A helper *returns a resource* when an acquisition in it reaches a ``return``
that hands it over; it *stores a parameter* when it writes one into an owner.
"""

from __future__ import annotations

from collections import deque

from kvflowmap.check.kinds._paired_model import EMPTY, Summary, walk
from kvflowmap.check.kinds._paired_sites import FunctionSites
from kvflowmap.check.kinds._paired_spec import Spec
from kvflowmap.check.kinds._paired_text import mentions, rhs
from kvflowmap.facts import Stmt

MAX_DEPTH = 40  # nested summaries; each level costs a few dozen Python frames


class Summaries:
    """Per rule: ``of(fqn)`` summarises an analysed function, ``sites(fqn)``
    gives its classified CFG (shared with the main check)."""

    def __init__(self, ctx, spec: Spec) -> None:
        self.ctx, self.spec = ctx, spec
        self._memo: dict[str, Summary] = {}
        self._sites: dict[str, FunctionSites] = {}
        self._depth = 0

    def sites(self, fqn: str) -> FunctionSites:
        if fqn not in self._sites:
            self._sites[fqn] = FunctionSites(self.ctx, self.spec, fqn, self.of)
        return self._sites[fqn]

    def of(self, fqn: str) -> Summary:
        """The summary of ``fqn`` (EMPTY for classes, unknown names and while
        the same function is being summarised: recursion releases nothing)."""
        if fqn in self._memo:
            return self._memo[fqn]
        d = self.ctx.model.defs.get(fqn)
        if d is None or d.is_class:
            return EMPTY
        if self._depth >= MAX_DEPTH:
            return EMPTY  # a very long call chain: stop looking (conservative)
        self._memo[fqn] = EMPTY  # cycle guard
        self._depth += 1
        try:
            self._memo[fqn] = self._compute(fqn)
        finally:
            self._depth -= 1
        return self._memo[fqn]

    def _compute(self, fqn: str) -> Summary:
        sites = self.sites(fqn)
        released: frozenset[str] = frozenset()
        if any(self._own_tokens(sites, s) for s in walk(sites.fn.body)):
            tokens = {n.id: self._tokens(sites, n.stmt) for n in sites.cfg.nodes
                      if n.kind == "stmt" and n.stmt is not None}
            every = set().union(*tokens.values())
            released = frozenset(t for t in every if _on_all_paths(sites, tokens, t))
        returns = any(sites.trace(r).returned for r in sites.acquires() if r.kind == "call")
        return Summary(released, returns, self._stores_param(sites), _nothrow(sites))

    def _tokens(self, sites: FunctionSites, stmt: Stmt) -> set[str]:
        """Release tokens a statement does; a ``for`` does what its body does."""
        if stmt.kind == "for":
            body = list(walk(stmt.body))
            if not any(sites.acquiring(s) for s in body):  # a loop that also takes is no release loop
                return set().union(*(self._own_tokens(sites, s) for s in body))
        return self._own_tokens(sites, stmt)

    def _own_tokens(self, sites: FunctionSites, stmt: Stmt) -> set[str]:
        out: set[str] = set()
        for i in sites.events(stmt, "call"):
            if "release" in sites.roles(i):
                out.add("call")
            out |= sites.helper_tokens(i)
        for i in sites.events(stmt, "container"):
            co = sites.ff.containers[i]
            if co.op in self.spec.remove_ops and co.container.startswith("self."):
                out.add(f"container:{co.container}")
        return out

    def _stores_param(self, sites: FunctionSites) -> bool:
        params = {p.name for p in sites.fn.params[1 if sites.fn.class_qualname else 0:]}
        if not params:
            return False
        for s in walk(sites.fn.body):
            # ``self._inuse += count`` adds a number up, it keeps no object
            stores = [a.target for i in sites.events(s, "assign")
                      if not (a := sites.ff.assigns[i]).aug]
            stores += [sites.ff.containers[i].container for i in sites.events(s, "container")
                       if sites.ff.containers[i].op in self.spec.add_ops]
            if any("." in t and sites.owns(t) for t in stores) and \
                    mentions(rhs(sites.text(s)), params):
                return True
        return False


def _nothrow(sites: FunctionSites) -> bool:
    """No path reaches the exceptional exit: cheap when nothing in the body
    can raise; else decided on the CFG (a ``try/except Exception`` around
    the risky calls makes a helper nothrow)."""
    stmts = list(walk(sites.fn.body))
    if not any(s.kind in ("raise", "assert") or
               any(sites.call_may_raise(i) for i in sites.events(s, "call")) for s in stmts):
        return True
    if not any(s.kind == "try" and s.handlers for s in stmts):
        return False
    cfg = sites.cfg
    return cfg.raise_exit not in cfg.reached(cfg.entry)


def _on_all_paths(sites: FunctionSites, tokens: dict[int, set[str]], token: str) -> bool:
    """Whether every path from entry to the normal exit passes a node doing
    ``token`` (guard-clause edges pruned)."""
    cfg = sites.cfg
    seen = {cfg.entry}
    queue = deque([cfg.entry])
    while queue:
        m = queue.popleft()
        if m == cfg.exit:
            return False
        if token in tokens.get(m, ()):
            continue
        for d, lab in cfg.successors(m):
            if d not in seen and not sites.pruned(m, lab, None):
                seen.add(d)
                queue.append(d)
    return True
