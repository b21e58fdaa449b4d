"""Resources a function's own releasing failure exit implies (``infer_from_release``).

A function that releases something just before it gives up
(``self._release_probe(req_id); raise RuntimeError(...)``, or in an
``except`` handler ``self._unpin(req_id); return 0, False``) shows that at
that point it holds the resource and that failing there loses it for good:
no hook sees the exception, and a failure answer is not a hand-over. Every
other failure exit of the function owes the same release: its raises and
failed ``assert``s, and the returns of its ``except`` handlers (the check
added later that forgot it: PegaFlow 0.22.3's ``assert num_load_blocks ==
expected_load_blocks`` before its released hash-mismatch raise).

What is owed is known by the release's first argument (or the receiver of
an argument-less release: ``conn.close(); raise``), held from where that
name is bound: on entry for a parameter, else its one assignment. Only
failure exits count (``Resource.released_on_failure``): a normal return may
hand the resource on, and an exception from a call is the ordinary
``on_exception`` question the rule answers for every resource.

A raise that says the resource is absent owes nothing: its test is a bare
negation of a name or attribute (``if not intent.lease: raise``, ``if x is
None: raise``, ``assert handle``), so there is nothing to release.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from kvflowmap.check.kinds._paired_alias import NOT_HANDLES, aliases
from kvflowmap.check.kinds._paired_match import call_matches
from kvflowmap.check.kinds._paired_model import Resource
from kvflowmap.check.kinds._paired_text import is_log_call
from kvflowmap.facts import Stmt

if TYPE_CHECKING:
    from kvflowmap.check.kinds._paired_sites import FunctionSites

_NAME = re.compile(r"^[A-Za-z_]\w*$")
# ``not x``, ``not a.b``, ``x is None``, ``not a.b or ...``: the test says something is missing
_ABSENT = re.compile(r"^\s*(not\s+[A-Za-z_][\w.]*|[A-Za-z_][\w.]*\s+is\s+None)\s*(\bor\b.*)?$",
                     re.S)
# ``assert x``, ``assert a.b is not None``: the assertion says something is there
_PRESENT = re.compile(r"^\s*[A-Za-z_][\w.]*(\s+is\s+not\s+None)?\s*(,.*)?$", re.S)


def released_on_failure(sites: FunctionSites, known: list[Resource]) -> list[Resource]:
    """One resource per name the function releases just before a failure
    exit (a release among the simple statements right before it, log calls
    aside), unless ``known`` already holds that name on entry."""
    taken = {r.handles for r in known if r.held_on_entry}
    out: list[Resource] = []
    seen: set[str] = set()
    for exit_line, callee, name in _releasing_exits(sites):
        if name in seen:
            continue
        seen.add(name)
        start = _bound_at(sites, name)
        handles = aliases(sites, frozenset({name}))
        if start is None or handles in taken:
            continue
        node, line = start
        out.append(Resource(node, "call", f"{callee}({name})", None, handles, line, 0,
                            held_on_entry=True, released_on_failure=exit_line,
                            owes_nothing=_absence_exits(sites),
                            failure_returns=_handler_returns(sites)))
    return out


def _releasing_exits(sites: FunctionSites) -> Iterator[tuple[int, str, str]]:
    """(exit line, release callee, released name) for each failure exit (a
    ``raise``, a ``return`` in an ``except`` handler) whose block releases a
    plain name in the simple statements right before it."""
    for block, in_handler in _blocks(sites.fn.body, False):
        for i, s in enumerate(block):
            if not (s.kind == "raise" or (s.kind == "return" and in_handler)):
                continue
            for prev in reversed(block[:i]):
                if prev.kind != "simple":
                    break
                hit = _release_in(sites, prev)
                if hit is not None:
                    yield (s.line, *hit)
                    break


def _release_in(sites: FunctionSites, s: Stmt) -> tuple[str, str] | None:
    """(callee, name) of the first release call of ``s`` that names a plain local."""
    for i in sites.events(s, "call"):
        call = sites.ff.calls[i]
        fqns = [f for f, _ in sites.targets(i)]
        if is_log_call(call.callee) or call_matches(sites.spec.exclude, call.callee, fqns) or \
                not call_matches(sites.spec.release, call.callee, fqns):
            continue
        receiver = (call.callee or "").rpartition(".")[0]
        name = call.args[0] if call.args else receiver
        if name and _NAME.match(name) and name not in NOT_HANDLES and name in sites._locals:
            return call.callee or "?", name
    return None


def _bound_at(sites: FunctionSites, name: str) -> tuple[int, int] | None:
    """(CFG node, line) from where ``name`` is held: the entry for a
    parameter, else the node of its only assignment (None when it has
    several: which one holds the resource is not known)."""
    if any(p.name == name for p in sites.fn.params):
        return sites.cfg.entry, sites.fn.line
    nodes = [n for n in sites.cfg.nodes if n.kind == "stmt" and n.stmt is not None and
             n.stmt.kind == "simple" and any(sites.ff.assigns[i].target == name
                                             for i in sites.events(n.stmt, "assign"))]
    lines = {n.line for n in nodes}
    return (nodes[0].id, nodes[0].line) if len(lines) == 1 else None


def _handler_returns(sites: FunctionSites) -> frozenset[int]:
    """CFG nodes of the returns inside ``except`` handlers (failure answers)."""
    inside = {id(s) for block, in_handler in _blocks(sites.fn.body, False) if in_handler
              for s in block if s.kind == "return"}
    return frozenset(n.id for n in sites.cfg.nodes if n.stmt is not None and id(n.stmt) in inside)


def _absence_exits(sites: FunctionSites) -> frozenset[int]:
    """CFG nodes of the raises and asserts that say something is missing."""
    absent: set[int] = set()
    for block, _ in _blocks(sites.fn.body, False):
        for s in block:
            if s.kind == "if" and _ABSENT.match(s.text or "") and s.body and \
                    s.body[-1].kind == "raise":
                absent.add(id(s.body[-1]))
            elif s.kind == "assert" and _PRESENT.match(s.text or ""):
                absent.add(id(s))
    return frozenset(n.id for n in sites.cfg.nodes if n.stmt is not None and id(n.stmt) in absent)


def _blocks(stmts: tuple[Stmt, ...], in_handler: bool) -> Iterator[tuple[tuple[Stmt, ...], bool]]:
    """Every statement list of a tree (bodies, else and finally parts,
    ``except`` handler bodies), outermost first, each with whether it is
    inside an ``except`` handler."""
    yield stmts, in_handler
    for s in stmts:
        inner = in_handler or s.kind == "except"
        for part in (s.body, s.orelse, s.handlers, s.final):
            if part:
                yield from _blocks(part, inner if part is s.body else in_handler)
