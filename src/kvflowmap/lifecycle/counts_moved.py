"""A per-id count read for a completion moves on every way on.

Where several parts of the work for one request must finish before it is
reported (a save that more than one connector runs, a request's in-flight
tasks), the connector keeps a count per request id in ``self`` state and
counts it down as parts complete::

    pending = self._pending_tasks.get(req_id)
    if pending is None:        # not counted: nothing to wait for
        report(req_id)
    elif pending == 1:         # the last part
        del self._pending_tasks[req_id]
        report(req_id)
    else:                      # more to come
        self._pending_tasks[req_id] = pending - 1

The function shows that it moves the count by writing or removing the
entry on some way on from the read. A way on from the read that finds the
entry present and neither writes nor removes it, nor does anything else with
the id (reports it, hands it to a helper, stores it), loses that part's
completion: the count never reaches its end, and the request is never
reported finished (vLLM's ``MultiConnector.get_finished`` without its
decrement holds a request's blocks for good once three connectors save it).

A count is a ``self.X`` container some analysed statement counts in
(``self.X[k] += 1``, ``self.X[k] = n - 1``; not ``self.X[k] += new_ids``,
nor a statistic under a literal key, ``self.data["failed"] += 1``). The read is a local bound from
``self.X.get(k)`` with no default, or ``self.X[k]``, that no write of the
container comes before on every path (a count moved first and read after is
the mover's own check). Excused: the arm that finds the entry missing
(``is None``, a false test of the local, ``k not in self.X``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial

from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.completions import way_out
from kvflowmap.lifecycle.containers import PURE, self_attr
from kvflowmap.lifecycle.effects import is_logging
from kvflowmap.lifecycle.retirements import membership, strip_not
from kvflowmap.lifecycle.view import FnView
from kvflowmap.model.cfg import CFG

# what moves or removes an entry of the count
_MOVES = frozenset({"setitem", "delitem", "pop", "discard", "remove"})

Helper = Callable[[FnView, str], FnView | None]
# values of an augmented count: a number (the facts keep no chain for it), a length
_NUMBERS = frozenset({None, "len()", "int()", "sum()"})


@dataclass(frozen=True)
class Unmoved:
    """In ``fqn``, the count ``name`` read from ``self.container`` at
    ``read_line`` is moved at ``moved_line`` on one way on and left on the
    one ending at ``exit_line``."""

    fqn: str
    name: str
    key: str | None
    container: str
    read_line: int
    moved_line: int
    exit_line: int
    steps: tuple[tuple[int, str], ...]
    # the last test on the way on and the arm it takes (``true``/``false``),
    # where the way on parts from the moves; None when no test decides it
    arm_line: int | None = None
    arm_true: bool = False


def count_containers(fns: Iterable[FnView]) -> frozenset[str]:
    """Attribute names ``X`` of ``self.X`` containers some statement counts
    in: ``self.X[k] += n``, ``self.X[k] -= n``, ``self.X[k] = v - 1``."""
    out: set[str] = set()
    for fn in fns:
        # a count under a literal key is a statistic (``self.data["num_failed"] += 1``)
        named = {(k.line, k.base) for k in fn.facts.key_reads if k.scope == fn.fact.qualname}
        for op in fn.all_containers:
            if op.counts and (attr := self_attr(op.container)) and \
                    op.container == f"self.{attr}" and (op.line, op.container) not in named:
                out.add(attr)
        for a in fn.all_assigns:
            # ``+= 1`` (no chain: a number) or ``+= len(x)``; ``+= new_ids`` extends a list
            if a.aug and a.op in ("+", "-") and (attr := self_attr(a.target)) and \
                    a.target == f"self.{attr}[]" and a.value in _NUMBERS and \
                    (a.line, f"self.{attr}") not in named:
                out.add(attr)
    return frozenset(out)


@dataclass(frozen=True)
class _Read:
    node: int
    name: str
    key: str | None  # None for ``self.X[k]``: the facts keep no key of a read
    container: str


def unmoved(fn: FnView, cfg: CFG, counts: frozenset[str], helper: Helper) -> list[Unmoved]:
    """Every count of ``counts`` that ``fn`` reads and moves on one way on
    and not on another (see the module docstring)."""
    out = []
    for read in _reads(fn, cfg, counts):
        moves = {n.id for n in cfg.nodes if n.stmt is not None and n.kind == "stmt"
                 and _moves(fn, n.stmt, read)}
        if not moves or _dominated(cfg, read.node, moves):
            continue
        ends = moves | {n.id for n in cfg.nodes if n.stmt is not None and n.kind == "stmt"
                        and n.id != read.node and (_uses_key(fn, n.stmt, read.key)
                                                   or _changes_entry(fn, n.stmt, read.name))}
        found = way_out(fn, cfg, read.node, moves, ends,
                        partial(_missing_arm, fn, cfg, read=read, helper=helper))
        if found is not None:
            arm = _last_test(found.steps)
            out.append(Unmoved(fn.fqn, read.name, read.key, read.container,
                               cfg.nodes[read.node].line, found.done_line, found.exit_line,
                               found.steps, *(arm or (None, False))))
    return out


def _last_test(steps: tuple[tuple[int, str], ...]) -> tuple[int, bool] | None:
    """(line, taken arm is true) of the last ``if`` the way on passes (the
    steps say ``if taken``, ``if not taken``, or ``if`` past one with no ``else``)."""
    last = None
    for line, text in steps:
        if text.split(" ", 1)[0] == "if":
            last = (line, text == "if taken")
    return last


def _reads(fn: FnView, cfg: CFG, counts: frozenset[str]) -> list[_Read]:
    """Locals bound from an entry of a count: ``v = self.X.get(k)`` (one
    argument: a default makes it a count up from nothing) or ``v = self.X[k]``."""
    out = []
    for n in cfg.nodes:
        if n.stmt is None or n.kind != "stmt":
            continue
        for a in fn.assigns(n.stmt):
            value = a.value or ""
            if not a.target.isidentifier() or a.position is not None:
                continue
            for suffix in (".get()", "[]"):
                head = value.removesuffix(suffix)
                attr = self_attr(head)
                if not value.endswith(suffix) or attr not in counts or head != f"self.{attr}":
                    continue
                key: str | None = None
                if suffix == ".get()":
                    got = [c for c in fn.calls(n.stmt) if c.callee == f"{head}.get"]
                    if len(got) != 1 or len(got[0].args) != 1 or got[0].kwargs:
                        continue
                    key = got[0].args[0]
                    if key is None:
                        continue
                out.append(_Read(n.id, a.target, key, attr))
    return out


def _moves(fn: FnView, s: Stmt, read: _Read) -> bool:
    """``s`` writes or removes the entry (``self.X[k] = ...``, ``del``,
    ``pop``, ``self.X[k] -= 1``)."""
    chain = f"self.{read.container}"
    if any(op.container == chain and op.op in _MOVES and
           (read.key is None or op.key == read.key) for op in fn.containers(s)):
        return True
    return any(a.aug and a.target == f"{chain}[]" for a in fn.assigns(s))


def _uses_key(fn: FnView, s: Stmt, key: str | None) -> bool:
    """``s`` does something with the id besides logging it: passes it to a
    call, puts it into a container, stores or returns it."""
    if key is None:
        return False
    for c in fn.calls(s):
        callee = c.callee or ""
        if is_logging(callee) or callee in PURE:
            continue
        if key in c.args or key in (v for _, v in c.kwargs):
            return True
    if any(op.key == key for op in fn.containers(s)):
        return True
    if any(a.value == key and ("." in a.target or "[" in a.target) for a in fn.assigns(s)):
        return True
    return any(r.value == key for r in fn.returns(s))


def _changes_entry(fn: FnView, s: Stmt, name: str) -> bool:
    """``s`` calls a method of the entry read into ``name`` (``acc.extend(v)``):
    an entry that is a container, changed in place."""
    return any((c.callee or "").startswith(name + ".") for c in fn.calls(s))


def _dominated(cfg: CFG, node: int, moves: set[int]) -> bool:
    """Every path from the entry to ``node`` passes a move first: the count
    was moved and is read back."""
    return node not in cfg.reached(cfg.entry, moves.__contains__)


def _missing_arm(fn: FnView, cfg: CFG, node: int, label: str, *, read: _Read,
                 helper: Helper) -> bool:
    """The edge leaves a test on the arm where the entry is missing: the
    count tested ``is None`` (or false), or the id not in the container."""
    st = cfg.nodes[node].stmt
    if st is None or st.kind not in ("if", "while") or label in ("exception", ""):
        return False
    present = _presence(fn, st, read, helper)
    return present is not None and present != (label == "true")


def _presence(fn: FnView, st: Stmt, read: _Read, helper: Helper) -> bool | None:
    """What the test ``st`` being true says of the entry: True when it is
    present, False when missing, None when it says nothing of it."""
    text = (st.text or "").strip()
    body, negated = strip_not(text)
    if body == read.name:
        return not negated  # ``if v:``; a count of 0 is as good as gone
    for c in fn.compares.get(st.line, ()):
        if c.text.strip() != body or len(c.ops) != 1 or "None" not in c.operands or \
                read.name not in c.operands:
            continue
        if c.ops[0] in ("Is", "IsNot"):
            return (c.ops[0] == "IsNot") != negated
    found = membership(fn, text, st.line, helper)
    if found is not None and found[0] == read.container:
        return found[1]
    return None
