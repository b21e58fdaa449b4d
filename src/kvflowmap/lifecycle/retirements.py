"""Handed work retires its item on every way out.

A hook or a submitter registers a unit of work before it hands it to the
background (``self._submitted[task.req_id] = generation`` then
``executor.submit(self._execute, task)``; vLLM's Mooncake store adds the
job's id to ``stored_requests[req_id]`` before it queues the job). The
function that serves the item shows that it owes the retirement by taking
the item's key out of that state on some way out (``self._submitted.pop(
task.req_id)``, or a helper given the item that does, such as
``self.finish_store_job(req_meta)``). A way out that skips it (an early
``return`` for a cancelled or skipped job, a handler that carries on) leaves
the entry for good: the scheduler keeps the job's blocks referenced, a
duplicate check refuses the request's next submission, the request is
never reported. PegaFlow and vLLM keep that retirement in a ``finally``.

The items are the parameters of functions that background work is handed
with an argument (``submit(self._execute, task)``, the ``target`` of a
thread given ``args``, and their overrides) and of functions a background
loop calls with what it took off a queue (``item = self.queue.get();
self._handle(item)``). A retirement removes (``pop``, ``discard``,
``remove``, ``del``) a key or element taken from the item (``task.req_id``,
or a local bound from it) from ``self`` state: a ``self.X`` container, or a
local bound from ``self.X.get(...)`` / ``self.X[...]``. A way out is excused
when it turns on the state itself: the arm of a membership test that finds
the key missing (``if not self.is_live(job): return``: nothing to retire),
or any other test that reads the retired container.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kvflowmap.facts import CallFact, Stmt
from kvflowmap.lifecycle.completions import way_out
from kvflowmap.lifecycle.containers import self_attr
from kvflowmap.lifecycle.view import FnView, bound_args, walk
from kvflowmap.model.cfg import CFG

# removals of a key or element (not a queue's ``popleft``/``get_nowait``: a take)
REMOVALS = frozenset({"pop", "discard", "remove", "delitem"})
# what a loop takes an item off a queue with (no key: a dict's ``get(k)`` is a lookup)
_TAKES = frozenset({"get", "get_nowait", "popleft"})
_SUMMARY_ROUNDS = 8
# hands an item to a queue or a per-key deque another worker takes it from
_PUTS = frozenset({"put", "put_nowait", "append", "appendleft"})

Resolve = Callable[[FnView, CallFact], list[str]]


@dataclass(frozen=True)
class Unretired:
    """In ``fqn``, the item ``name`` is retired from ``containers`` at
    ``retired_line`` on one way out and not on the one ending at
    ``exit_line``."""

    fqn: str
    name: str
    containers: tuple[str, ...]
    retired_line: int
    exit_line: int
    caught: bool
    steps: tuple[tuple[int, str], ...]
    escaped: bool = False


def handed_items(fns: dict[str, FnView], spawns: Iterable[tuple[str, str, int]],
                 background: set[str], resolve: Resolve,
                 overrides: Callable[[str], list[str]]) -> dict[str, tuple[str, ...]]:
    """Per function served with a work item, the parameters that hold it:
    spawn targets given arguments (``spawns``: spawner, target, line) and
    their overrides; functions a ``background`` function calls with what it
    took off a queue."""
    out: dict[str, set[str]] = {}
    for spawner, target, line in spawns:
        fn = fns.get(spawner)
        if fn is None or not any(c.line == line and _passes_args(c) for c in fn.all_calls):
            continue
        for f in (target, *overrides(target)):
            if f in fns:
                out.setdefault(f, set()).update(
                    p for p in fns[f].param_names if p not in ("self", "cls"))
    for f in sorted(background):
        fn = fns.get(f)
        if fn is None:
            continue
        taken = _taken_locals(fn)
        for c in fn.all_calls if taken else ():
            if not any(a in taken for a in (*c.args, *(v for _, v in c.kwargs))):
                continue
            for t in resolve(fn, c):
                for g in (t, *overrides(t)):
                    if g in fns:
                        out.setdefault(g, set()).update(
                            p for a, p in bound_args(fns[g].fact, c) if a in taken)
    return {f: tuple(sorted(ps)) for f, ps in sorted(out.items()) if ps}


def _passes_args(c: CallFact) -> bool:
    """A spawning call that hands the target something: a second positional
    argument (``submit(fn, task)``) or ``args=``/``kwargs=``."""
    return len(c.args) > 1 or any(k in ("args", "kwargs") for k, _ in c.kwargs)


def _taken_locals(fn: FnView) -> set[str]:
    """Locals bound from a queue take (``item = self.queue.get()``)."""
    takes = {(c.line, c.callee) for c in fn.all_calls if not c.args and c.callee
             and c.callee.rpartition(".")[2] in _TAKES}
    return {a.target for a in fn.all_assigns if a.target.isidentifier() and a.value
            and a.value.endswith("()") and (a.line, a.value[:-2]) in takes}


class Retirements:
    """Which parameters of analysed functions they retire, and from which
    ``self`` containers (a fixpoint over the functions, computed once)."""

    def __init__(self, fns: dict[str, FnView], resolve: Resolve) -> None:
        self.fns, self.resolve = fns, resolve
        self.summary: dict[str, dict[str, frozenset[str]]] = {}
        for _ in range(_SUMMARY_ROUNDS):
            changed = False
            for f in sorted(fns):
                new = {p: frozenset(boxes) for p, boxes in self._params(fns[f]).items() if boxes}
                if new != self.summary.get(f, {}):
                    self.summary[f] = new
                    changed = True
            if not changed:
                break

    def _params(self, fn: FnView) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for p in fn.param_names:
            if p in ("self", "cls"):
                continue
            derived = derived_names(fn, p)
            for s in fn.stmts:
                out.setdefault(p, set()).update(self.retired_by(fn, s, derived))
        return out

    def retired_by(self, fn: FnView, s: Stmt, derived: set[str]) -> set[str]:
        """The ``self`` containers (their attribute names) statement ``s``
        takes a key or element derived from ``derived`` out of, itself or
        through an analysed helper it passes one of them to."""
        out = set()
        for op in fn.containers(s):
            if op.op in REMOVALS and op.key and _root(op.key) in derived and \
                    (attr := state_of(fn, op.container, s.line)):
                out.add(attr)
        for c in fn.calls(s):
            for t in self.resolve(fn, c):
                callee = self.fns.get(t)
                done = self.summary.get(t, {})
                if callee is None or not done:
                    continue
                for arg, param in bound_args(callee.fact, c):
                    if arg and _root(arg) in derived and param in done:
                        out |= done[param]
        return out


def hands_on(fn: FnView, s: Stmt, names: set[str], spawns: Callable[[CallFact], bool],
             queues: set[tuple[str, str]]) -> bool:
    """Statement ``s`` hands one of ``names`` on to later work: passes it to
    a spawn (``spawns`` says which calls are) or puts it on a ``self`` queue
    that ``queues`` (``(class, attribute)``) says some function takes work
    off, stores it in ``self`` state, or returns it."""
    for c in fn.calls(s):
        passed = any(a and _root(a) in names for a in (*c.args, *(v for _, v in c.kwargs)))
        base, _, meth = (c.callee or "").rpartition(".")
        attr = self_attr(base)
        if passed and (spawns(c) or (meth in _PUTS and attr and fn.cls is not None
                                     and (fn.cls, attr) in queues)):
            return True
    if any(a.target.startswith("self.") and a.value and _root(a.value) in names
           for a in fn.assigns(s)):
        return True
    return any(r.value and _root(r.value) in names for r in fn.returns(s))


def derived_names(fn: FnView, name: str) -> set[str]:
    """``name`` and the locals bound from it or from one of its attributes
    (``req_id = task.req_id``, ``rid, blocks = task``), transitively."""
    out = {name}
    changed = True
    while changed:
        changed = False
        for a in fn.all_assigns:
            if a.target.isidentifier() and a.target not in out and a.value and \
                    _root(a.value) in out and not a.value.endswith(")"):
                out.add(a.target)
                changed = True
    return out


def _root(text: str) -> str:
    """The leading name of a dotted or subscripted chain."""
    return text.split(".")[0].split("[")[0]


def state_of(fn: FnView, chain: str, line: int) -> str | None:
    """``X`` when ``chain`` is ``self.X`` (or ``self.X[k]``), or a local last
    bound, before ``line``, from ``self.X.get(...)``, ``self.X[...]`` or
    ``self.X.setdefault(...)``: an entry of that state."""
    if attr := self_attr(chain):
        return attr if chain in (f"self.{attr}", f"self.{attr}[]") else None
    if not chain.isidentifier():
        return None
    bound = [a for a in fn.all_assigns if a.target == chain and a.line <= line]
    if not bound:
        return None
    value = max(bound, key=lambda a: (a.line, a.col)).value or ""
    for suffix in (".get()", "[]", ".setdefault()"):
        head = value.removesuffix(suffix)
        if value.endswith(suffix) and (attr := self_attr(head)) and head == f"self.{attr}":
            return attr
    return None


Helper = Callable[[FnView, str], FnView | None]


def unretired(fn: FnView, cfg: CFG, items: tuple[str, ...], ret: Retirements,
              helper: Helper, hands_on: Callable[[FnView, Stmt, set[str]], bool],
              escapes: Callable[[Stmt], bool] | None = None) -> list[Unretired]:
    """Every item of ``fn`` retired on one way out and not on another (see
    the module docstring). ``helper(fn, name)`` is the analysed method
    ``self.name`` of ``fn``; ``hands_on(fn, s, names)`` says statement ``s``
    hands one of ``names`` on to later work (a spawn, a queue ``put``), which
    ends the duty on that path."""
    out = []
    for name in items:
        derived = derived_names(fn, name)
        does: set[int] = set()
        boxes: set[str] = set()
        for n in cfg.nodes:
            if n.stmt is not None and n.kind == "stmt":
                got = ret.retired_by(fn, n.stmt, derived)
                if got:
                    does.add(n.id)
                    boxes |= got
        if not does:
            continue
        ends = does | {n.id for n in cfg.nodes if n.stmt is not None and n.kind == "stmt"
                       and hands_on(fn, n.stmt, derived)}
        tests = StateTests(fn, cfg, boxes, helper, derived,
                           {id(cfg.nodes[n].stmt) for n in does})
        found = way_out(fn, cfg, cfg.entry, does, ends, tests.prunes)
        if found is None and escapes is not None:
            found = way_out(fn, cfg, cfg.entry, does, ends, tests.prunes, escapes)
        if found is not None:
            out.append(Unretired(fn.fqn, name, tuple(sorted(boxes)), found.done_line,
                                 found.exit_line, found.caught, found.steps, found.escaped))
    return out


class StateTests:
    """Which tests of ``fn`` decide that there is nothing to retire: they
    turn on the retired containers ``boxes``, or only on the item's own
    record (``item``: the names derived from it)."""

    def __init__(self, fn: FnView, cfg: CFG, boxes: set[str], helper: Helper,
                 item: set[str], retiring: set[int]) -> None:
        self.fn, self.cfg, self.boxes, self.helper, self.item = fn, cfg, boxes, helper, item
        self.retiring = retiring  # ``id()`` of the statements that retire

    def prunes(self, n: int, lab: str) -> bool:
        """The edge (CFG node ``n``, label ``lab``) takes the missing arm of
        a membership lookup in a retired container, or either arm of another
        test that reads one (itself, through a ``self`` method, or through a
        local bound from such a reading): no way out past it owes the retirement."""
        st = self.cfg.nodes[n].stmt
        # the arm not taken is ``false``, or ``end``/``next`` with no ``else``
        if st is None or st.kind not in ("if", "while") or lab in ("exception", ""):
            return False
        found = self.lookup(st.text or "", st.line)
        if found is not None and found[0] in self.boxes:
            return found[1] != (lab == "true")  # missing on this arm: nothing to retire
        return self._reads_state(st) or self._reads_item(st)

    def _reads_item(self, st: Stmt) -> bool:
        """The test reads only the item's own record, with no call, and
        guards the retirement (``if all_task_done:`` around it, of
        ``all_task_done = req_meta["all_task_done"]``): the submitter's word
        on whether this part retires the entry (the last of a request's
        tasks does). A test on the record that jumps out before the
        retirement (``if not job.keys: return``) is a way out."""
        return bool(st.names) and not self.fn.calls(st) and \
            all(_root(x) in self.item for x in st.names) and \
            any(id(x) in self.retiring for x in walk((*st.body, *st.orelse)))

    def lookup(self, text: str, line: int) -> tuple[str, bool] | None:
        """``membership`` of a test, also of a bare local bound from one
        (``tracked = rid in self.X`` ... ``if not tracked:``)."""
        found = membership(self.fn, text, line, self.helper)
        if found is not None:
            return found
        body, negated = strip_not(text)
        if not body.isidentifier():
            return None
        bound = [a for a in self.fn.all_assigns if a.target == body and a.line < line]
        if not bound:
            return None
        last = max(bound, key=lambda a: (a.line, a.col))
        compare = self.fn.compares.get(last.line, [])
        if len(compare) != 1:
            return None
        found = membership(self.fn, compare[0].text, last.line, self.helper)
        return (found[0], found[1] != negated) if found else None

    def _reads_state(self, st: Stmt) -> bool:
        """The test reads a retired container, itself, through a ``self``
        method, or through a local bound by a statement that does."""
        if self._reads(st):
            return True
        locals_ = {x for x in st.names if x.isidentifier()}
        return any(self._reads(b) for b in self.fn.stmts if b.line < st.line and any(
            a.target in locals_ for a in self.fn.assigns(b)))

    def _reads(self, st: Stmt) -> bool:
        if any(self._box(x) for x in st.names):
            return True
        for c in self.fn.calls(st):
            base, _, meth = (c.callee or "").rpartition(".")
            target = self.helper(self.fn, meth) if base == "self" else None
            if target is not None and any(self._box(x) for t in target.stmts for x in t.names):
                return True
        return False

    def _box(self, chain: str) -> bool:
        """``chain`` reads a retired container (``self.X``, ``self.X.get``)."""
        return chain.startswith("self.") and _root(chain[5:]) in self.boxes


def membership(fn: FnView, text: str, line: int,
               helper: Callable[[FnView, str], FnView | None],
               depth: int = 0) -> tuple[str, bool] | None:
    """``(X, polarity)`` when the test ``text`` (at ``line`` of ``fn``) asks
    whether a key is in ``self.X`` (``k in self.X``, ``k in self.X.get(..)``,
    ``self.X[..]``, under any number of ``not``), or calls a ``self`` method
    whose one ``return`` is such a test (``helper`` finds the method):
    polarity True when the test is true for a present key."""
    body, negated = strip_not(text)
    compare = next((c for c in fn.compares.get(line, ()) if strip_not(c.text) == (body, False)),
                   None)
    if compare is not None:
        if len(compare.ops) != 1 or compare.ops[0] not in ("In", "NotIn"):
            return None
        attr = _state_operand(compare.operands[-1])
        return (attr, (compare.ops[0] == "In") != negated) if attr else None
    name = _self_call(body)
    if name is None or depth >= 2:
        return None
    target = helper(fn, name)
    if target is None or len(target.all_returns) != 1:
        return None
    ret = target.all_returns[0]
    got = membership(target, ret.value or "", ret.line, helper, depth + 1)
    return (got[0], got[1] != negated) if got else None


def strip_not(text: str) -> tuple[str, bool]:
    """``text`` without its leading ``not``s, and whether there was an odd
    number of them."""
    body, negated = text.strip(), False
    while body.startswith("not ") or body.startswith("not("):
        body, negated = body[3:].strip(), not negated
    if body.startswith("(") and _closing(body, 0) == len(body) - 1:
        inner, more = strip_not(body[1:-1])
        return inner, negated != more
    return body, negated


def _self_call(body: str) -> str | None:
    """``name`` when ``body`` is one call ``self.name(...)`` and nothing else."""
    head = body.partition("(")[0]
    if not head.startswith("self.") or not head[5:].isidentifier() or "(" not in body:
        return None
    return head[5:] if _closing(body, len(head)) == len(body) - 1 else None


def _closing(text: str, at: int) -> int:
    """The index of the parenthesis closing the one at ``at`` (-1 if none)."""
    level = 0
    for i in range(at, len(text)):
        level += {"(": 1, ")": -1}.get(text[i], 0)
        if level == 0:
            return i
    return -1


def _state_operand(chain: str) -> str | None:
    """``X`` for the operand chains ``self.X``, ``self.X.get()``, ``self.X[]``."""
    for suffix in (".get()", "[]", ""):
        head = chain.removesuffix(suffix) if suffix else chain
        if (not suffix or chain.endswith(suffix)) and (attr := self_attr(head)) and \
                head == f"self.{attr}":
            return attr
    return None
