"""Which local names stand for an acquired resource in ``paired``.

Facts keep dotted chains, not data flow, so the names are found from the
acquiring statement (``lease = ...``, ``held.append(...)``, ``lock.acquire()``,
``pool.touch([... for b in ids])``) and then followed, flow-insensitively,
through assignments that still hold the value (``y = x``, ``t = tuple(xs)``,
``r = Ready(x)``, not ``n = len(x)``), local collections (``xs.append(x)``)
and loops (``for x in xs``, ``for i, x in enumerate(zip(keys, xs))``). Too
many names make ``paired`` lenient, never noisy: a statement that mentions any
of them is taken to act on the resource.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from kvflowmap.check.kinds._paired_match import comprehension_sources, loop_pairs
from kvflowmap.check.kinds._paired_model import Resource, walk
from kvflowmap.check.kinds._paired_text import holding_text, mentions, rhs
from kvflowmap.facts import CallFact, Stmt

if TYPE_CHECKING:
    from kvflowmap.check.kinds._paired_sites import FunctionSites

NOT_HANDLES = {"self", "cls", "_", "None", "True", "False"}


def call_resource(sites: FunctionSites, node: int, s: Stmt, call: CallFact) -> Resource:
    """The resource a call acquires, with the local names that stand for it:
    its assignment targets, else the local collection it is put in, else the
    receiver of an argument-less call (``lock.acquire()``), else the names a
    pinned list was built from; then their aliases."""
    targets = {sites.ff.assigns[i].target for i in sites.events(s, "assign")}
    handles = {t for t in targets if "." not in t and t not in NOT_HANDLES}
    if not handles:  # ``held.append(self.lease(k))``: the local collection holds it
        handles = {co.container for co in map(sites.ff.containers.__getitem__,
                                              sites.events(s, "container"))
                   if "." not in co.container and co.op in sites.spec.add_ops}
    receiver = (call.callee or "").rpartition(".")[0]
    if not handles and not call.args and receiver and receiver not in NOT_HANDLES \
            and "(" not in receiver:
        handles.add(receiver)  # lock.acquire() ... lock.release(); pool.pin(b) names b
    key = call.args[0] if call.args and call.args[0] not in NOT_HANDLES else None
    if not handles and (call.args or call.kwargs):
        handles |= _id_sources(sites, s, key)
    edge = None
    if s.kind in ("if", "while"):
        edge = "false" if (s.text or "").lstrip().startswith("not ") else "true"
    return Resource(node, "call", call.callee or "?", key, aliases(sites, frozenset(handles)),
                    call.line, call.col, edge)


def _id_sources(sites: FunctionSites, s: Stmt, key: str | None) -> set[str]:
    """Names a pinned collection was built from: ``pin([pool.blocks[b] for b
    in ids])`` and ``blocks = [... for b in ids]; pin(blocks)`` pin ``ids``,
    so storing or freeing ``ids`` acts on the pin."""
    texts = [sites.text(s)]
    if key and "." not in key:
        texts += [rhs(sites.text(a)) for a in walk(sites.fn.body)
                  if a.kind == "simple" and any(sites.ff.assigns[i].target == key
                                                for i in sites.events(a, "assign"))]
    found = set().union(*(comprehension_sources(t) for t in texts))
    return {n for n in found if "." not in n and n not in NOT_HANDLES}


def aliases(sites: FunctionSites, handles: frozenset[str]) -> frozenset[str]:
    """Local names that come to hold the resource (``y = x``, ``xs.append(x)``,
    ``for y in xs``), flow-insensitively, to a fixed point."""
    names = set(handles)
    changed = bool(names)
    while changed:
        changed = False
        for s in walk(sites.fn.body):
            for new in _alias_targets(sites, s, names):
                if new not in names and new not in NOT_HANDLES:
                    names.add(new)
                    changed = True
    return frozenset(names)


def _alias_targets(sites: FunctionSites, s: Stmt, names: set[str]) -> Iterator[str]:
    if s.kind == "for":  # ``for x in held``, ``for i, x in enumerate(zip(a, held))``
        target, _, it = (s.text or "").partition(" in ")
        yield from (t for t, expr in loop_pairs(target, it) if expr in names)
        return
    if s.kind not in ("simple", "return") or not s.events:
        return
    held = holding_text(rhs(sites.text(s)))
    for i in sites.events(s, "assign"):
        t = sites.ff.assigns[i].target
        if "." not in t and mentions(held, names):
            yield t
    for i in sites.events(s, "container"):
        co = sites.ff.containers[i]
        if "." not in co.container and co.op in sites.spec.add_ops and \
                mentions(holding_text(sites.text(s)), names):
            yield co.container
