"""The report side: which request-keyed containers the report hooks read.

A report hook is a method the protocol names for a channel
(``get_finished``, ``get_transfer_results``, ``get_block_ids_with_load_errors``).
A container is *owed* to a report when a report hook, or a subject function
it calls (a tracker, a helper, up to ``DEPTH`` calls away), reads it: an id
in it is waiting to be reported, so taking it out and handing it nowhere
loses a report.
"""

from __future__ import annotations

from kvflowmap.lifecycle.containers import Container
from kvflowmap.lifecycle.spec import LifecycleSpec
from kvflowmap.lifecycle.view import FnView

DEPTH = 3


def report_functions(graph, fns: dict[str, FnView], spec: LifecycleSpec) -> list[str]:
    """Report hooks of the subject and the subject functions they call."""
    names = {m for c in spec.channels for m in c.methods}
    frontier = [f for f, v in fns.items() if v.name in names]
    seen = set(frontier)
    for _ in range(DEPTH):
        nxt = []
        for f in frontier:
            for _, callee, kind in graph.out_edges(f, data="kind") if f in graph else ():
                if kind in ("call", "dispatch") and callee in fns and callee not in seen:
                    seen.add(callee)
                    nxt.append(callee)
        frontier = nxt
    return sorted(seen)


def owed_containers(graph, fns: dict[str, FnView], spec: LifecycleSpec,
                    containers) -> frozenset[Container]:
    """Request-keyed containers that a report function reads."""
    read: set[tuple[str, str]] = set()
    for f in report_functions(graph, fns, spec):
        fn = fns[f]
        if not fn.cls:
            continue
        for s in fn.stmts:
            read.update((fn.cls, n[5:]) for n in s.names
                        if n.startswith("self.") and "." not in n[5:])
    return frozenset(c for c in containers if (c.owner, c.attr) in read)
