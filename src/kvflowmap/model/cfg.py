"""An intraprocedural control-flow graph built from a function's ``Stmt`` tree.

Nodes are statements (their ``events`` happen at the node) plus five kinds of
synthetic node: ``entry``, ``exit`` (normal return), ``raise`` (the function
is left by an exception), ``with-exit`` (a context manager's ``__exit__``)
and ``loop`` (the head of a ``for`` loop, where each iteration starts; the
``for`` node itself evaluates the iterable once).
Edges carry a label saying which way control went: ``next``, ``true`` /
``false`` (a test), ``case`` / ``no-match``, ``break``, ``continue``,
``return``, ``end`` (falling off the function), ``raise``, ``assert`` and
``exception`` (an implicit exception from a call).

``finally`` bodies are copied once per way of leaving the ``try`` (normal,
return, raise, break, continue), so each copy continues to the right place
and a path never mixes them up. ``with`` is handled the same way with one
``with-exit`` node per way out.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from kvflowmap.facts import Stmt

Pred = tuple[int, str]  # (source node, label of the edge still to be linked)
JUMPS = ("return", "raise", "break", "continue")
CATCH_ALL = {None, "", "Exception", "BaseException"}


@dataclass(frozen=True)
class Node:
    """One CFG node; ``stmt`` is None for entry/exit/raise."""

    id: int
    kind: str  # entry | exit | raise | stmt | with-exit | loop
    stmt: Stmt | None = None

    @property
    def line(self) -> int:
        return self.stmt.line if self.stmt is not None else 0

    @property
    def events(self) -> tuple[tuple[str, int], ...]:
        # A with-exit node runs __exit__, not the context expressions again.
        return self.stmt.events if self.stmt is not None and self.kind == "stmt" else ()


@dataclass
class CFG:
    """Nodes and labelled edges; ``entry``, ``exit`` and ``raise_exit`` ids."""

    nodes: list[Node] = field(default_factory=list)
    succ: dict[int, list[tuple[int, str]]] = field(default_factory=dict)
    entry: int = 0
    exit: int = 1
    raise_exit: int = 2

    def add(self, kind: str, stmt: Stmt | None = None) -> int:
        node = Node(len(self.nodes), kind, stmt)
        self.nodes.append(node)
        self.succ[node.id] = []
        return node.id

    def link(self, preds: list[Pred], dst: int) -> None:
        for src, label in preds:
            if (dst, label) not in self.succ[src]:
                self.succ[src].append((dst, label))

    def successors(self, node: int) -> list[tuple[int, str]]:
        """(destination, label) pairs leaving ``node``."""
        return self.succ[node]

    def edges(self) -> list[tuple[int, int, str]]:
        """Every edge as (source, destination, label)."""
        return [(s, d, lab) for s, out in self.succ.items() for d, lab in out]

    def stmt_nodes(self, stmt: Stmt) -> list[int]:
        """All nodes (copies included) standing for ``stmt``."""
        return [n.id for n in self.nodes if n.stmt is stmt and n.kind == "stmt"]

    def is_exit(self, node: int) -> bool:
        return node in (self.exit, self.raise_exit)

    def reached(self, start: int, stop: Callable[[int], bool] = lambda n: False) -> set[int]:
        """Nodes a path from ``start`` reaches, going on from none that
        ``stop`` accepts (those are reached, not passed)."""
        seen, queue = {start}, deque([start])
        while queue:
            n = queue.popleft()
            if n != start and stop(n):
                continue
            for d, _ in self.succ[n]:
                if d not in seen:
                    seen.add(d)
                    queue.append(d)
        return seen


def calls_may_raise(stmt: Stmt) -> bool:
    """Default: a statement that calls anything may raise."""
    return any(kind == "call" for kind, _ in stmt.events)


def build_cfg(body: tuple[Stmt, ...],
              may_raise: Callable[[Stmt], bool] = calls_may_raise) -> CFG:
    """The CFG of a function body. ``may_raise`` decides which statements get
    an implicit exception edge (to the innermost handler, finally or
    with-exit, else to the exceptional exit)."""
    return _Builder(may_raise).build(body)


class _Builder:
    def __init__(self, may_raise: Callable[[Stmt], bool]) -> None:
        self.cfg = CFG()
        self.may_raise = may_raise

    def build(self, body: tuple[Stmt, ...]) -> CFG:
        cfg = self.cfg
        cfg.entry, cfg.exit, cfg.raise_exit = cfg.add("entry"), cfg.add("exit"), cfg.add("raise")
        jumps: dict[str, list[Pred]] = {k: [] for k in JUMPS}
        out = self.block(body, [(cfg.entry, "next")], jumps)
        cfg.link([(s, "end") for s, _ in out], cfg.exit)
        cfg.link(jumps["return"], cfg.exit)
        cfg.link(jumps["raise"], cfg.raise_exit)
        return cfg

    def block(self, stmts: tuple[Stmt, ...], preds: list[Pred],
              jumps: dict[str, list[Pred]]) -> list[Pred]:
        for s in stmts:
            preds = self.stmt(s, preds, jumps)
        return preds

    def node(self, stmt: Stmt, preds: list[Pred], jumps: dict[str, list[Pred]]) -> int:
        n = self.cfg.add("stmt", stmt)
        self.cfg.link(preds, n)
        if self.may_raise(stmt):
            jumps["raise"].append((n, "exception"))
        return n

    def stmt(self, s: Stmt, preds: list[Pred], jumps: dict[str, list[Pred]]) -> list[Pred]:
        handler = getattr(self, f"_{s.kind}", None)
        if handler is not None:
            return handler(s, preds, jumps)
        return [(self.node(s, preds, jumps), "next")]  # simple, def, class...

    # -- small statements ----------------------------------------------------
    def _return(self, s: Stmt, preds: list[Pred], jumps: dict[str, list[Pred]]) -> list[Pred]:
        jumps["return"].append((self.node(s, preds, jumps), "return"))
        return []

    def _raise(self, s: Stmt, preds: list[Pred], jumps: dict[str, list[Pred]]) -> list[Pred]:
        n = self.cfg.add("stmt", s)
        self.cfg.link(preds, n)
        jumps["raise"].append((n, "raise"))
        return []

    def _assert(self, s: Stmt, preds: list[Pred], jumps: dict[str, list[Pred]]) -> list[Pred]:
        n = self.node(s, preds, jumps)
        jumps["raise"].append((n, "assert"))
        return [] if (s.text or "").strip() == "False" else [(n, "next")]

    def _break(self, s: Stmt, preds: list[Pred], jumps: dict[str, list[Pred]]) -> list[Pred]:
        jumps["break"].append((self.node(s, preds, jumps), "break"))
        return []

    def _continue(self, s: Stmt, preds: list[Pred], jumps: dict[str, list[Pred]]) -> list[Pred]:
        jumps["continue"].append((self.node(s, preds, jumps), "continue"))
        return []

    # -- branches and loops --------------------------------------------------
    def _if(self, s: Stmt, preds: list[Pred], jumps: dict[str, list[Pred]]) -> list[Pred]:
        n = self.node(s, preds, jumps)
        out = self.block(s.body, [(n, "true")], jumps)
        return out + self.block(s.orelse, [(n, "false")], jumps)

    def _loop(self, s: Stmt, preds: list[Pred], jumps: dict[str, list[Pred]],
              infinite: bool) -> list[Pred]:
        n = self.node(s, preds, jumps)
        head = n
        if s.kind == "for":
            # The iterable is evaluated once: its exception edge leaves the
            # ``for`` node, and iterations come back to a separate loop head.
            head = self.cfg.add("loop", s)
            self.cfg.link([(n, "next")], head)
        inner = {**jumps, "break": [], "continue": []}  # return/raise lists shared
        body_out = self.block(s.body, [(head, "true")], inner)
        self.cfg.link(body_out + inner["continue"], head)
        done = [] if infinite else self.block(s.orelse, [(head, "false")], jumps)
        return done + inner["break"]

    def _for(self, s: Stmt, preds: list[Pred], jumps: dict[str, list[Pred]]) -> list[Pred]:
        return self._loop(s, preds, jumps, infinite=False)

    def _while(self, s: Stmt, preds: list[Pred], jumps: dict[str, list[Pred]]) -> list[Pred]:
        return self._loop(s, preds, jumps, infinite=(s.text or "").strip() in ("True", "1"))

    def _match(self, s: Stmt, preds: list[Pred], jumps: dict[str, list[Pred]]) -> list[Pred]:
        n = self.node(s, preds, jumps)
        out: list[Pred] = []
        for case in s.body:
            c = self.cfg.add("stmt", case)
            self.cfg.link([(n, "case")], c)
            out += self.block(case.body, [(c, "next")], jumps)
        if not any((c.text or "").strip() == "_" for c in s.body):
            out.append((n, "no-match"))
        return out

    # -- try and with ----------------------------------------------------------
    def _try(self, s: Stmt, preds: list[Pred], jumps: dict[str, list[Pred]]) -> list[Pred]:
        n = self.cfg.add("stmt", s)
        self.cfg.link(preds, n)
        # Jumps out of the try go through ``finally`` when there is one.
        inner = {k: [] for k in JUMPS} if s.final else jumps
        caught = {**inner, "raise": []} if s.handlers else inner
        body_out = self.block(s.body, [(n, "next")], caught)
        handled: list[Pred] = []
        for h in s.handlers:
            hn = self.cfg.add("stmt", h)
            self.cfg.link(caught["raise"], hn)
            handled += self.block(h.body, [(hn, "next")], inner)
        if s.handlers and not any(_catches_all(h) for h in s.handlers):
            inner["raise"].extend(caught["raise"])
        normal = self.block(s.orelse, body_out, inner) + handled
        if not s.final:
            return normal
        for kind in JUMPS:
            if inner[kind]:
                out = self.block(s.final, inner[kind], jumps)
                jumps[kind].extend((src, kind) for src, _ in out)
        return self.block(s.final, normal, jumps) if normal else []

    def _with(self, s: Stmt, preds: list[Pred], jumps: dict[str, list[Pred]]) -> list[Pred]:
        n = self.node(s, preds, jumps)  # an exception in __enter__ skips __exit__
        inner: dict[str, list[Pred]] = {k: [] for k in JUMPS}
        body_out = self.block(s.body, [(n, "next")], inner)
        for kind in JUMPS:
            if inner[kind]:
                x = self.cfg.add("with-exit", s)
                self.cfg.link(inner[kind], x)
                jumps[kind].append((x, kind))
        if not body_out:
            return []
        x = self.cfg.add("with-exit", s)
        self.cfg.link(body_out, x)
        return [(x, "next")]


def _catches_all(handler: Stmt) -> bool:
    """``except:``, ``except Exception`` and ``except BaseException``."""
    text = (handler.text or "").strip().strip("()")
    names = {t.strip().rpartition(".")[2] for t in text.split(",")} if text else {None}
    return bool(names & CATCH_ALL)
