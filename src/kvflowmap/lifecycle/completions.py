"""Completion handles: a future a function is handed must be completed on
every way out of it.

A transfer task often carries the future its submitter waits on
(``task = (req_id, blocks, future)``; ``get_finished`` asks ``future.done()``
before it reports the request). The function that serves the task shows it
owes the completion by completing the future on some path
(``future.set_result(ok)``, or a helper given it that does). A path that
leaves without completing it (an ``except`` that only logs, an early
``return``) leaves the waiter waiting forever: the request is never
reported, with no error.

The handle is a parameter, or a local taken out of one or out of state
(``req, fut = task``, ``fut = self._futures.pop(rid)``); a future the
function makes itself (``fut = Future()``) is its caller's to wait on. The
way out is the function's end, a ``return``, or an exception caught in the
function that then carries on; an exception leaving the function is its
caller's to handle. Handing the handle on (storing it, returning it,
passing it to code outside the analysis or to a helper that completes it)
ends the obligation, and so does a test on the handle itself
(``if fut.done(): return``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from kvflowmap.facts import CallFact, Stmt
from kvflowmap.lifecycle.cfg_paths import can_handle, in_flight, path_to, steps
from kvflowmap.lifecycle.effects import is_logging
from kvflowmap.lifecycle.containers import PURE
from kvflowmap.lifecycle.view import FnView, bound_args
from kvflowmap.model.cfg import CFG

# values a handle may be taken out of: state or a queue (not made here)
_TAKEN = (".pop()", ".popleft()", ".get()", ".get_nowait()", ".popitem()")


@dataclass(frozen=True)
class Uncompleted:
    """In ``fqn``, the handle ``name`` bound at ``bound_line`` is completed at
    ``completed_line`` on one path and left at ``exit_line`` on another."""

    fqn: str
    name: str
    bound_line: int
    completed_line: int
    exit_line: int
    caught: bool  # the path goes through an ``except`` that carries on
    steps: tuple[tuple[int, str], ...]
    # the way out is an exception no caller sees, raised at ``exit_line``
    escaped: bool = False


class Completions:
    """Which parameters of analysed functions they complete (memoised)."""

    def __init__(self, fns: dict[str, FnView], resolve: Callable[[FnView, CallFact], list[str]],
                 completers: tuple[str, ...]) -> None:
        self.fns, self.resolve, self.completers = fns, resolve, completers
        self._memo: dict[str, frozenset[str]] = {}

    def completed_params(self, fqn: str) -> frozenset[str]:
        """Parameters of ``fqn`` that some statement completes, itself or
        through a helper it passes them to."""
        if fqn in self._memo:
            return self._memo[fqn]
        self._memo[fqn] = frozenset()  # cycle guard: a recursion completes nothing new
        fn = self.fns.get(fqn)
        if fn is None:
            return frozenset()
        params = set(fn.param_names)
        found = frozenset(p for s in fn.stmts for c in fn.calls(s)
                          for p in self.completed_by(fn, c) if p in params)
        self._memo[fqn] = found
        return found

    def completed_by(self, fn: FnView, c: CallFact) -> set[str]:
        """Names the call completes: its receiver for ``x.set_result()``, the
        arguments bound to parameters an analysed callee completes."""
        base, _, meth = (c.callee or "").rpartition(".")
        if meth in self.completers and base and "." not in base:
            return {base}
        out = set()
        for target in self.resolve(fn, c):
            callee = self.fns.get(target)
            if callee is None:
                continue
            done = self.completed_params(target)
            for arg, param in bound_args(callee.fact, c):
                if param in done and arg:
                    out.add(arg)
        return out

    def hands_on(self, fn: FnView, c: CallFact, name: str) -> bool:
        """The call takes ``name`` over: completes it, or is outside the
        analysis (not logging or a builtin) and may keep it."""
        if name in self.completed_by(fn, c):
            return True
        passed = name in c.args or name in (v for _, v in c.kwargs)
        if not passed or is_logging(c.callee or "") or (c.callee or "") in PURE:
            return False
        return not any(t in self.fns for t in self.resolve(fn, c))


def uncompleted(fn: FnView, cfg: CFG, comp: Completions,
                escapes: Callable[[Stmt], bool] | None = None) -> list[Uncompleted]:
    """Every handle of ``fn`` completed on one path and not on another.

    ``escapes`` is given for code whose exceptions no caller sees (a task
    whose future is thrown away, a body whose callers only log): there an
    exception from a statement it accepts, leaving the function, is a way out
    too, and putting the handle on a queue (``acks.put(identity)``, for the
    thread that answers the peer) completes it."""
    out = []
    for name, start in _handles(fn, cfg):
        found = _search(fn, cfg, comp, name, start)
        if found is None and escapes is not None:
            found = _search(fn, cfg, comp, name, start, escapes)
        if found is not None:
            out.append(found)
    return out


def _handles(fn: FnView, cfg: CFG) -> list[tuple[str, int]]:
    """(name, CFG node where it is bound) of the parameters and of the locals
    unpacked or taken out of state: the candidates ``_search`` keeps when some
    call completes them."""
    assigned: dict[str, int] = {}
    for n in sorted(cfg.nodes, key=lambda n: (n.line, n.id)):
        if n.stmt is None or n.kind != "stmt":
            continue
        for a in fn.assigns(n.stmt):
            if a.target in assigned or "." in a.target or "[" in a.target:
                continue
            value = a.value or ""
            if a.position is not None or value.endswith(_TAKEN):
                assigned[a.target] = n.id
    names = dict.fromkeys(p for p in fn.param_names if p not in ("self", "cls"))
    out = [(p, cfg.entry) for p in names]
    out += [(a, n) for a, n in assigned.items() if a not in names]
    return out


def _search(fn: FnView, cfg: CFG, comp: Completions, name: str,
            start: int, escapes: Callable[[Stmt], bool] | None = None) -> Uncompleted | None:
    completes = {n.id for n in cfg.nodes if n.stmt is not None and n.kind == "stmt"
                 and any(name in comp.completed_by(fn, c) or
                         (escapes is not None and _queued(c, name)) for c in fn.calls(n.stmt))}
    if not completes:
        return None
    ends_here = completes | {n.id for n in cfg.nodes if n.stmt is not None and n.kind == "stmt"
                             and _hands_on(fn, comp, n.stmt, name)}
    out = way_out(fn, cfg, start, completes, ends_here,
                  lambda n, _label: _tests_handle(fn, cfg, n, name), escapes)
    if out is None:
        return None
    return Uncompleted(fn.fqn, name, cfg.nodes[start].line or fn.fact.line, out.done_line,
                       out.exit_line, out.caught, out.steps, escaped=out.escaped)


@dataclass(frozen=True)
class WayOut:
    """A way out of a function that skips every node that does the duty: it
    ends at ``exit_line`` (with ``steps``), the duty done at ``done_line``
    on some other path."""

    exit_line: int
    done_line: int
    caught: bool  # the path goes through an ``except`` that carries on
    steps: tuple[tuple[int, str], ...]
    escaped: bool = False  # an exception no caller sees leaves at ``exit_line``


def way_out(fn: FnView, cfg: CFG, start: int, does: set[int], ends_here: set[int],
            pruned: Callable[[int, str], bool],
            escapes: Callable[[Stmt], bool] | None = None) -> WayOut | None:
    """The first way out of ``fn`` from ``start`` that passes no node of
    ``ends_here`` (the nodes in ``does`` do the duty, the others end it
    otherwise) and no edge ``pruned(node, label)`` names (an arm on which
    there is no duty; pruned while searching, so that one path through a node
    cannot hide another). The way out is the function's end, a ``return``, or
    an exception caught in the function that then carries on; an exception
    leaving the function is its caller's to handle, unless ``escapes`` is
    given (code whose exceptions no caller sees): then only an exception from
    a statement it accepts, skipping the duty, is looked for."""
    inside = {n.id for n in cfg.nodes}
    reach = can_handle(cfg, inside, does, start)
    first = [d for d, _ in cfg.successors(start)]
    if not any(n in reach for n in first):
        return None
    done = min(cfg.nodes[m].line for m in does)
    State = tuple[int, bool]
    parent: dict[State, tuple[State, str] | None] = {(n, False): None for n in first}
    queue: deque[State] = deque(parent)
    escaped: list[tuple[int, tuple[tuple[int, str], ...]]] = []
    while queue:
        n, exc = state = queue.popleft()
        if n in ends_here:
            continue
        for d, lab in cfg.successors(n):
            if pruned(n, lab):
                continue
            flying = d == cfg.raise_exit or in_flight(cfg, exc, lab, d)
            if d not in (cfg.exit, cfg.raise_exit):
                if (d, flying) not in parent:
                    parent[(d, flying)] = (state, lab)
                    queue.append((d, flying))
                continue
            # every arrival at an exit is its own way out
            if d == cfg.exit and (flying or escapes is not None):
                continue  # (only exceptions are looked for with ``escapes``)
            if d == cfg.raise_exit and (escapes is None or not flying):
                continue  # an exception leaving is the caller's to handle
            head = path_to(parent, state)
            path = [*head[:-1], (n, lab), (d, "")]
            if d == cfg.raise_exit:
                origin = [m for m, label in path if label == "exception"]
                if origin and _escapes_past(cfg, origin[-1], reach, escapes):
                    escaped.append((cfg.nodes[origin[-1]].line, steps(cfg, path)))
                continue
            caught = any(label == "exception" for _, label in path)
            lines = [cfg.nodes[m].line for m, _ in path if cfg.nodes[m].line]
            return WayOut(lines[-1] if lines else fn.fact.line, done, caught, steps(cfg, path))
    if escaped:
        line, path_steps = min(escaped)
        return WayOut(line, done, False, path_steps, escaped=True)
    return None


def _escapes_past(cfg: CFG, n: int, reach: set[int], escapes: Callable[[Stmt], bool] | None) -> bool:
    """The statement at ``n`` is one ``escapes`` accepts and leads to a
    completion: its exception skips one."""
    st = cfg.nodes[n].stmt
    return escapes is not None and st is not None and n in reach and escapes(st)


def _queued(c: CallFact, name: str) -> bool:
    """``q.put(name)``: the handle is handed to the thread that serves the queue."""
    return (c.callee or "").rpartition(".")[2] in ("put", "put_nowait") and name in c.args


def _hands_on(fn: FnView, comp: Completions, s, name: str) -> bool:
    """``s`` stores, returns or hands ``name`` over."""
    if name not in s.names:
        return False
    if any(name in (r.value or "").replace("(", " ").replace(",", " ").split()
           for r in fn.returns(s)):
        return True
    if any(a.value == name and ("." in a.target or "[" in a.target) for a in fn.assigns(s)):
        return True
    return any(comp.hands_on(fn, c, name) for c in fn.calls(s))


def _tests_handle(fn: FnView, cfg: CFG, n: int, name: str) -> bool:
    """Node ``n`` is a test of the handle itself (``if fut.done():``, ``if
    future is None:``): deciding by the handle is not forgetting it."""
    st = cfg.nodes[n].stmt
    return st is not None and st.kind in ("if", "while") and \
        any(x == name or x.startswith(name + ".") for x in st.names)
