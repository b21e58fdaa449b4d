"""Per-function questions rule kinds ask: what a method returns, which
containers it fills or drains, which same-named methods it delegates to."""

from __future__ import annotations

from kvflowmap.check.context import CheckContext
from kvflowmap.facts import AssignFact, CallFact, ContainerOpFact, ReturnFact

ADD_OPS = frozenset({"setitem", "add", "append", "appendleft", "extend", "update",
                     "setdefault", "insert"})
REMOVE_OPS = frozenset({"pop", "popitem", "popleft", "discard", "remove", "delitem", "clear"})


def own(ctx: CheckContext, fqn: str, items):
    """Facts of one function (its own scope only)."""
    q = ctx.definition(fqn).fact.qualname
    return [x for x in items if x.scope == q]


def returns_of(ctx: CheckContext, fqn: str) -> list[ReturnFact]:
    return own(ctx, fqn, ctx.facts(fqn).returns)


def containers_of(ctx: CheckContext, fqn: str) -> list[ContainerOpFact]:
    return own(ctx, fqn, ctx.facts(fqn).containers)


def assigns_of(ctx: CheckContext, fqn: str) -> list[AssignFact]:
    return own(ctx, fqn, ctx.facts(fqn).assigns)


def calls_of(ctx: CheckContext, fqn: str) -> list[CallFact]:
    return own(ctx, fqn, ctx.facts(fqn).calls)


def element(ret: ReturnFact, index: int) -> str | None:
    """Source text of item ``index`` of a returned tuple display, else None."""
    if ret.elements is None or index >= len(ret.elements):
        return None
    return ret.elements[index]


def _closure(ctx: CheckContext, fqn: str, depth: int, kinds: tuple[str, ...], keep) -> list[str]:
    """``fqn`` and the analysed functions reachable over ``kinds`` edges whose
    target satisfies ``keep``, breadth first, up to ``depth`` hops."""
    seen = [fqn]
    frontier = [fqn]
    for _ in range(depth):
        nxt = []
        for f in frontier:
            for _, callee, kind in ctx.graph.out_edges(f, data="kind"):
                if kind in kinds and callee not in seen and callee in ctx.model.defs \
                        and keep(callee):
                    seen.append(callee)
                    nxt.append(callee)
        frontier = nxt
    return seen


def same_class_callees(ctx: CheckContext, fqn: str, depth: int = 3) -> list[str]:
    """``fqn`` and the analysed methods of its own class it calls, transitively."""
    cls = fqn.rpartition(".")[0]
    return _closure(ctx, fqn, depth, ("call",), lambda c: c.rpartition(".")[0] == cls)


def delegates(ctx: CheckContext, fqn: str, depth: int = 3) -> list[str]:
    """``fqn`` plus same-named methods it forwards to (facade -> halves)."""
    name = fqn.rpartition(".")[2]
    return _closure(ctx, fqn, depth, ("call", "dispatch"),
                    lambda c: c.rpartition(".")[2] == name)


def self_attr(chain: str, selfname: str = "self") -> str | None:
    """``self._x`` -> ``_x``; anything else -> None."""
    head, _, rest = chain.partition(".")
    return rest if head == selfname and rest and "." not in rest and "(" not in rest else None


def async_answer(ctx: CheckContext, probe: str, index: int) -> tuple[str, int, str] | None:
    """The first return of ``probe`` (or a same-named method it forwards to)
    whose item ``index`` may be true: (function, line, returned text). The
    probe's ``load_kv_async`` answer; None when every one is False or None."""
    chain = delegates(ctx, probe)
    for d in chain:
        for r in returns_of(ctx, d):
            text = element(r, index)
            if text is not None and text not in ("False", "None"):
                return d, r.line, r.value or ""
    # a facade handing back what an object outside the analysed code answers
    # to the same question (``return self._engine.get_num_new_matched_tokens(...)``):
    # that answer is the protocol's, and the protocol's may be True
    name = probe.rpartition(".")[2]
    for d in chain:
        if any(c != d and c.rpartition(".")[2] == name for c in _callees(ctx, d)):
            continue
        for r in returns_of(ctx, d):
            callee = _forwarded_call(r, name)
            if callee is not None:
                return d, r.line, f"what {callee} answers (outside the analysed code)"
    return None


def _callees(ctx: CheckContext, fqn: str) -> set[str]:
    """Analysed functions ``fqn`` calls or dispatches to."""
    return {c for _, c, kind in ctx.graph.out_edges(fqn, data="kind")
            if kind in ("call", "dispatch") and c in ctx.model.defs}


def _forwarded_call(ret: ReturnFact, name: str) -> str | None:
    """``obj.attr.NAME`` when ``ret`` returns the result of calling a method
    ``NAME`` on an attribute chain (not ``super()``), unchanged; else None."""
    value = ret.value or ""
    head, paren, _ = value.partition("(")
    if ret.elements is not None or not paren or not value.endswith(")"):
        return None
    parts = head.split(".")
    if len(parts) < 2 or parts[-1] != name or not all(p.isidentifier() for p in parts):
        return None
    return head
