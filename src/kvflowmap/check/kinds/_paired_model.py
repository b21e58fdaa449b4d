"""Plain data shared by the ``paired`` modules."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from kvflowmap.facts import Stmt

Edge = tuple[int, str, int]  # (source node, label, destination node)
# (node, an exception happened on the way, local collections filled on the way,
# (tested name, answer) pairs known on the way)
State = tuple[int, bool, frozenset[str], frozenset[tuple[str, bool]]]
FAILING = ("exception", "raise", "assert")  # edge labels that mean "something failed"


@dataclass(frozen=True)
class Summary:
    """What calling a helper does. ``releases``: tokens done on every normal
    path (``call`` or ``container:<chain>``); ``returns_resource``: an
    acquired resource leaves through ``return``; ``stores_param``: a
    parameter is stored into an owning structure; ``nothrow``: no path
    reaches the exceptional exit (as far as ``no_raise`` and other summaries
    tell)."""

    releases: frozenset[str] = frozenset()
    returns_resource: bool = False
    stores_param: bool = False
    nothrow: bool = False


EMPTY = Summary()


@dataclass(frozen=True)
class Resource:
    """One acquisition site."""

    node: int
    kind: str  # call | container
    what: str  # the callee chain or the container chain
    key: str | None  # the first argument / the container key, as written
    handles: frozenset[str]  # local names that stand for the acquired thing
    line: int
    col: int
    edge: str | None = None  # held only along this edge (an acquire in a test)
    # Tests of the ``if`` statements the acquisition is nested in: true while
    # held, so a later false edge of the same test is not taken.
    held_if: frozenset[str] = frozenset()
    # Taken out of ``self`` state (``lease = self._leases.pop(rid)``): an
    # earlier hook stored it for the request, so every raising exit of this
    # one must release it or put it back, whatever the rule's failure options.
    held_on_entry: bool = False
    # Line of a failure exit (a ``raise``, a ``return`` in an ``except``) the
    # function releases this just before: then only its own failure exits
    # owe the release (``_paired_raised``): its raises and asserts, except the
    # CFG nodes in ``owes_nothing`` (raises that say it is missing), and the
    # returns in ``failure_returns``.
    released_on_failure: int = 0
    owes_nothing: frozenset[int] = frozenset()
    failure_returns: frozenset[int] = frozenset()


@dataclass
class Trace:
    """Leaking paths found from one acquisition (None when there is none)."""

    normal: list[Edge] | None = None
    exceptional: list[Edge] | None = None
    returned: bool = False  # handed over by ``return`` on some path


def walk(stmts: tuple[Stmt, ...]) -> Iterator[Stmt]:
    """Every statement of a tree, parents first."""
    for s in stmts:
        yield s
        for part in (s.body, s.orelse, s.handlers, s.final):
            yield from walk(part)
