"""``reach`` mode ``state_release``: a parked request state has a release path.

From the consumers of the carrier field (``finished_recving``), follow calls
and hand-overs through ``self`` containers (the consumer records ids in a
set that another method of the same class tests) to a function that sets a
release state under a test of the parked state.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from kvflowmap.check import flowfacts as ff
from kvflowmap.check.context import CheckContext
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option

READS = ("Reads: the request-state nodes of the graph (who sets and who tests "
         "each state), the consumers of the carrier field, the call and dispatch edges "
         "from them and the self containers that hand ids between methods.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``reach`` mode ``state_release``."""

    parked_state: str = option("RequestStatus.WAITING_FOR_REMOTE_KVS",
                               "state that parks a request")
    release_states: tuple[str, ...] = option(("RequestStatus.WAITING", "RequestStatus.PREEMPTED"),
                                             "states that release it")
    via_field: str = option("KVConnectorOutput.finished_recving",
                            "carrier that reports the release")
    depth: int = option(4, "call hops from the carrier's consumers")


def _node_matching(ctx: CheckContext, suffix: str, kind: str) -> list[str]:
    return sorted(n for n, k in ctx.graph.nodes(data="kind")
                  if k == kind and (n == suffix or n.endswith("." + suffix)))


def state_release(ctx: CheckContext, opts: Options) -> list[Finding]:
    """Functions that park a request with no release path from the carrier."""
    g = ctx.graph
    parked = _node_matching(ctx, opts.parked_state, "state")
    releases = {n for s in opts.release_states for n in _node_matching(ctx, s, "state")}
    targets = set(ctx.target_functions)
    out: list[Finding] = []
    if not any(ctx.classes.is_class(f.rpartition(".")[0])
               for f in _node_matching(ctx, opts.via_field, "field")):
        # the analysed vLLM has no such carrier (vLLM 0.9 reported on
        # ModelRunnerOutput before KVConnectorOutput existed): nothing to judge by
        return out
    for state in parked:
        setters = sorted({(u, d["line"]) for u, _, d in g.in_edges(state, data=True)
                          if d["kind"] == "sets_state" and u in targets})
        if not setters:
            continue
        for fn, line in setters:
            # The release must start in the parking function's own class: the
            # scheduler that parks a request is the one that must release it.
            if _release_path(ctx, opts, state, releases, fn.rpartition(".")[0]):
                continue
            out.append(ctx.finding(
                fn, line,
                f"requests parked in {state.rpartition('.')[0].rpartition('.')[2]}."
                f"{state.rpartition('.')[2]} here are never released: no function fed by "
                f"{opts.via_field} sets {' or '.join(sorted(r.rpartition('.')[2] for r in releases))}"
                f" under a test of the parked state",
                path=(ctx.step(fn, line, f"sets {state.rpartition('.')[2]}"),),
                anchor=f"{state}:{fn}"))
    return out


def _release_path(ctx: CheckContext, opts: Options, state: str, releases: set[str],
                  owner: str) -> list[str] | None:
    """Consumer of the carrier in class ``owner`` -> ... -> a function setting
    a release state whose path tests the parked state."""
    g = ctx.graph
    readers = {v for _, v, k in g.out_edges(state, data="kind") if k == "reads_state"}
    for field in _node_matching(ctx, opts.via_field, "field"):
        starts = [v for _, v, k in g.out_edges(field, data="kind")
                  if k == "consumes" and v.rpartition(".")[0] == owner]
        prev: dict[str, str | None] = {s: None for s in starts}
        queue = deque((s, 0) for s in starts)
        while queue:
            node, d = queue.popleft()
            sets = {v for _, v, k in g.out_edges(node, data="kind") if k == "sets_state"}
            if sets & releases and _on_path(prev, node) & readers:
                return _unwind(prev, node)
            if d < opts.depth:
                nexts = [v for _, v, k in g.out_edges(node, data="kind") if k in ("call", "dispatch")]
                readers_of = _container_readers(ctx, node)
                # a reader's caller in the class acts on its answer (vLLM 0.11:
                # ``schedule`` releases when ``_update_waiting_for_remote_kv`` says so)
                callers = [u for r in readers_of for u, _, k in g.in_edges(r, data="kind")
                           if k == "call" and u.rpartition(".")[0] == owner]
                for nxt in nexts + readers_of + callers:
                    if nxt not in prev:
                        prev[nxt] = node
                        queue.append((nxt, d + 1))
    return None


def _container_readers(ctx: CheckContext, fn: str) -> list[str]:
    """Methods of ``fn``'s class that read a ``self`` container ``fn`` adds to
    (the consumer records ids; another method acts on them later)."""
    d = ctx.model.defs.get(fn)
    if d is None or d.is_class or d.fact.class_qualname is None:
        return []
    filled = {ff.self_attr(o.container) for o in ff.containers_of(ctx, fn) if o.op in ff.ADD_OPS}
    filled.discard(None)
    if not filled:
        return []
    cls = fn.rpartition(".")[0]
    out = []
    for other in sorted(m for m in ctx.model.defs if m.rpartition(".")[0] == cls and m != fn):
        od = ctx.model.defs[other]
        if od.is_class:
            continue
        reads = {r.attr for r in ff.own(ctx, other, ctx.facts(other).reads) if r.base == "self"}
        if reads & filled:
            out.append(other)
    return out


def _on_path(prev: dict[str, str | None], node: str) -> set[str]:
    return set(_unwind(prev, node))


def _unwind(prev: dict[str, str | None], node: str | None) -> list[str]:
    out = []
    while node is not None:
        out.append(node)
        node = prev[node]
    return out[::-1]


