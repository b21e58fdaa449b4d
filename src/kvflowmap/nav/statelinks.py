"""Data steps through request-keyed state, for ``path`` and ``where``.

A connector hands a request from one method to another through its own
state far more often than through a call: NIXL's ``_read_blocks`` puts the
transfer handle into ``self._recving_transfers``, and ``get_finished`` (on
another step, often another thread) takes the finished ids out of it and
returns them to vLLM. The call graph has no edge between the two, so
``path _read_blocks Scheduler._update_from_kv_xfer_finished`` found nothing.

The lifecycle model (``kvflowmap.lifecycle``) knows which containers are
request-keyed (their keys or elements come from request ids, never by
name) and where ids enter them. Here each such container becomes a
``field`` node, with a ``produces`` edge from every function that puts an id
in and a ``consumes`` edge to every function that reads it through ``self``
on the same object: a method of the owner class, of one of its bases or of
one of its subclasses (a sibling subclass is another object at run time, so
the Push worker never reads what the Pull worker stored). Queues count like
containers (``put`` in the producer thread, ``get`` in the consumer).
"""

from __future__ import annotations

from collections.abc import Iterable

import networkx as nx

from kvflowmap.lifecycle.containers import Container
from kvflowmap.lifecycle.model import Lifecycle, build_lifecycle
from kvflowmap.lifecycle.view import FnView

VIA = "state"  # the ``via`` of the edges added here (``where`` and ``path`` name it)


def with_state_links(linker) -> nx.MultiDiGraph:
    """A copy of the analysis graph with the request-keyed state steps added
    (``linker``: ``graph.build.Linker``); the analysis graph is unchanged."""
    lc = build_lifecycle(linker)
    g = linker.graph.copy()
    add_state_links(g, lc, linker.where)
    return g


def add_state_links(g: nx.MultiDiGraph, lc: Lifecycle, where) -> None:
    """Add a ``field`` node per request-keyed container that some function
    fills, and its ``produces``/``consumes`` edges (see the module docstring).
    ``where(module)`` gives the ``file``/``root`` of a module."""
    for c, info in lc.containers.items():
        adds = sorted({(s.fqn, s.line) for s in info.of_kind("add")})
        if not adds or not lc.classes.is_class(c.owner):
            continue
        writers: dict[str, int] = {}
        for fqn, line in adds:
            writers.setdefault(fqn, line)
        readers = {f: line for f, line in _readers(lc, c) if f not in writers}
        if not readers:
            continue
        node = f"{c.owner}.{c.attr}"
        if node not in g:
            first = lc.functions[adds[0][0]]
            g.add_node(node, kind="field", line=adds[0][1], flow=True,
                       package=node.split(".")[0], subject=True, **where(first.module))
        for fqn, line in sorted(writers.items()):
            _edge(g, lc, fqn, node, "produces", line, where, f"puts ids into {c.label}")
        for fqn, line in sorted(readers.items()):
            _edge(g, lc, node, fqn, "consumes", line, where, f"reads ids from {c.label}")


def _readers(lc: Lifecycle, c: Container) -> Iterable[tuple[str, int]]:
    """(function, first line) of every subject function that reads ``self.<attr>``
    on an object of the container's class."""
    chain = f"self.{c.attr}"
    for fqn, fn in lc.functions.items():
        if fn.cls is None or not _same_object(lc, fn, c.owner):
            continue
        line = _first_use(fn, chain)
        if line is not None:
            yield fqn, line


def _same_object(lc: Lifecycle, fn: FnView, owner: str) -> bool:
    """``fn``'s ``self`` can be an instance of ``owner``: its class is the
    owner, a base of it, or a subclass of it."""
    return lc.classes.related(fn.cls or "", owner)


def _first_use(fn: FnView, chain: str) -> int | None:
    """The first line of ``fn`` whose statement reads ``chain`` (or a part of
    it); a statement that binds it (``self._x = set()`` in a constructor) is
    no read."""
    for s in fn.stmts:
        if any(k == "assign" and fn.facts.assigns[i].target == chain for k, i in s.events):
            continue
        if any(n == chain or n.startswith(chain + ".") or n.startswith(chain + "[")
               for n in s.names):
            return s.line
    return None


def _edge(g: nx.MultiDiGraph, lc: Lifecycle, u: str, v: str, kind: str, line: int, where,
          note: str) -> None:
    fn = lc.functions.get(u if kind == "produces" else v)
    if fn is None or u not in g or v not in g:
        return
    g.add_edge(u, v, kind=kind, line=line, via=VIA, carrier=note, **where(fn.module))
