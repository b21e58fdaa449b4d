"""Request state removed together: one way a request ends takes its id out of
only part of the containers another way of ending empties together.

A request's entries in several containers of one object are cleaned up
where it ends: on completion, on a timeout, on abort. When one place removes
the id from ``{A, B, C}`` in one straight run of statements and another
place removes it from ``{A, B}`` only, the second way of ending leaves the
request's ``C`` entry behind: it leaks, and a ``C`` that gates later work
(a set of requests still to process, a count of pending transfers) keeps
waiting for a request that is gone.

Structure only, no names: a *group* is the set of request-keyed containers
one statement list (a body, a branch, a handler, a ``finally``) removes an id
from in its own statements, a helper it hands the id to included (the
helper's removals count at the call; a helper is not judged on its own). A
group ``G2`` is *partial* against ``G1`` (whose containers have one owner)
when ``G2`` is a strict subset of ``G1`` or shares two or more containers
with it, and a container ``X`` of ``G1 - G2`` is filled in a function that
also fills one of ``G2`` (they enter together, so they should leave
together). ``X`` counts as removed
after all when the function removes an id from it or resets it on the
group's way: in the group's statements (nested ones and helpers included)
or in the statements of the lists that enclose it; and when some method
empties it on every call (``self.X.clear()``, ``self.X = {}`` in its top-level
statements, after the constructor: a per-step buffer). Only groups where the
request *ends* are judged: the list also reports the id (adds it to a
collection a report function returns, or to a container a report hook reads), or
walks the ids of finished requests (a ``for`` over a finished-ids parameter
of the protocol or over what a report function returns, or the delayed-free
hook). A group that only moves a request from one stage to the next (the
probe's state once it is allocated) leaves the rest for the request's end,
which is not a leak.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.containers import Container
from kvflowmap.lifecycle.effects import Effects
from kvflowmap.lifecycle.view import FnView

_IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
# (function, statement) -> what the analysed functions the statement hands
# an id to remove; and the functions they are
Helpers = Callable[[FnView, Stmt], tuple[set[Container], list[str]]]
# (function, statement) -> request-keyed containers it removes a key from, by line
Removals = Callable[[FnView, Stmt], dict[Container, int]]


@dataclass(frozen=True)
class Group:
    """Containers one statement list removes an id from, with the lines, and
    the containers removed or reset on its way (see the module docstring)."""

    fqn: str
    removed: tuple[tuple[Container, int], ...]
    cleaned: frozenset[Container]
    ends: bool = False  # the request ends here (see the module docstring)

    @property
    def containers(self) -> frozenset[Container]:
        return frozenset(c for c, _ in self.removed)

    @property
    def line(self) -> int:
        return min(line for _, line in self.removed)


@dataclass(frozen=True)
class Partial:
    """``group`` removes the id from part of what ``whole`` removes: ``kept``
    stays behind."""

    group: Group
    whole: Group
    kept: Container


@dataclass(frozen=True)
class Endings:
    """How a request's end shows: the protocol's finished-ids parameters, its
    delayed-free hook, and the containers report hooks read."""

    finished_params: tuple[str, ...]
    delay_free: str
    owed: frozenset[Container]
    reporters: frozenset[str]  # report hooks and the functions they call


def groups(fn: FnView, eff: Effects, own: Removals, helpers: Helpers,
           endings: Endings) -> tuple[list[Group], set[str]]:
    """The removal groups of ``fn`` (one per statement list that removes an id
    from a container of an object; nested defs are their own functions), and
    the helpers it hands ids to."""
    out: list[Group] = []
    # what a report function returns is its report (metadata a hook returns is not)
    returned = {n for r in fn.all_returns for n in _IDENT.findall(
        " ".join(r.elements) if r.elements else (r.value or ""))} \
        if fn.fqn in endings.reporters else set()
    called: set[str] = set()

    def resets(s: Stmt) -> set[Container]:
        return {e.container for e in eff.of(fn, s) if e.kind == "reset" and e.container}

    memo: dict[int, dict[Container, int]] = {}

    def removals(s: Stmt) -> dict[Container, int]:
        # asked again for each list that encloses ``s``: resolve its calls once
        found = memo.get(id(s))
        if found is None:
            found = memo[id(s)] = dict(own(fn, s))
            by_helper, names = helpers(fn, s)
            called.update(names)
            for c in by_helper:
                found.setdefault(c, s.line)
        return found

    def reports(body: tuple[Stmt, ...]) -> bool:
        for t in _within(body):
            for e in eff.of(fn, t):
                if e.kind == "return" or (e.kind == "add" and (
                        e.container in endings.owed
                        or (e.container is None and e.target.split(".")[0] in returned))):
                    return True
        return False

    def visit(body: tuple[Stmt, ...], around: frozenset[Container], finished: bool) -> None:
        removed: dict[Container, int] = {}
        for s in body:
            for c, line in removals(s).items():
                removed.setdefault(c, line)
        here = around | frozenset(removed) | {c for s in body for c in resets(s)}
        for s in body:
            if s.kind in ("def", "class"):
                continue
            walked = set(_IDENT.findall((s.text or "").partition(" in ")[2]))
            walks = finished or (s.kind == "for" and bool(
                walked & (set(endings.finished_params) | returned)))
            for part in (s.body, s.orelse, s.final):
                visit(part, here, walks)
            for h in s.handlers:
                visit(h.body, here, finished)
        if removed:
            nested = {c for t in _within(body) for c in (*removals(t), *resets(t))}
            out.append(Group(fn.fqn, tuple(sorted(removed.items(), key=lambda x: x[1])),
                             frozenset(around | nested), finished or reports(body)))

    visit(fn.fact.body, frozenset(), fn.name == endings.delay_free)
    return out, called


def partial_removals(fns: dict[str, FnView], judged: list[str], eff: Effects,
                     fills: dict[Container, set[str]], own: Removals, helpers: Helpers,
                     endings: Endings, emptied: frozenset[Container]) -> list[Partial]:
    """Every partial group in the ``judged`` functions, against the groups of
    all ``fns``. ``fills``: container -> functions that add ids to it;
    ``emptied``: containers some function other than the constructor empties
    (a per-step buffer: nothing stays in it)."""
    all_groups: list[Group] = []
    called: set[str] = set()
    for f in sorted(fns):
        found, names = groups(fns[f], eff, own, helpers, endings)
        all_groups += found
        called |= names
    wholes = [g for g in all_groups if len(g.removed) >= 2 and _one_owner(g.containers)]
    out: list[Partial] = []
    seen: set[tuple[str, int, Container]] = set()
    for g in all_groups:
        if not g.ends or g.fqn not in judged or g.fqn in called:
            continue
        mine = g.containers
        for whole in wholes:
            if whole is g or not _overlaps(mine, whole.containers):
                continue
            for kept in sorted(whole.containers - mine):
                if kept in g.cleaned or kept in emptied or (g.fqn, g.line, kept) in seen:
                    continue
                if any(fills.get(kept, set()) & fills.get(c, set()) for c in mine):
                    seen.add((g.fqn, g.line, kept))
                    out.append(Partial(g, whole, kept))
    return out


def _within(body: tuple[Stmt, ...]):
    """The statements of ``body``, nested ones included, not those of defs in it."""
    for s in body:
        yield s
        if s.kind in ("def", "class"):
            continue
        for part in (s.body, s.orelse, s.final, *(h.body for h in s.handlers)):
            yield from _within(part)


def _overlaps(mine: frozenset[Container], whole: frozenset[Container]) -> bool:
    """``mine`` is part of ``whole``: a strict subset, or two or more in common."""
    return mine < whole or (len(mine & whole) >= 2 and not whole <= mine)


def _one_owner(cs: frozenset[Container]) -> bool:
    return len({c.owner for c in cs}) == 1
