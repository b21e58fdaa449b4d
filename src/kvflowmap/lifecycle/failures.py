"""The failed-blocks channel: what a connector's failed-blocks hook returns
and where those blocks come from.

vLLM asks ``get_block_ids_with_load_errors`` (the protocol's ``failed_blocks``
channel) after each step for the blocks whose load failed, and recomputes
them. A connector records failed blocks somewhere (a set, a queue, a
helper's attribute) and the hook hands them over. Two ways that breaks
without any error:

- the hook takes blocks out of containers nothing ever fills: no failure
  reaches vLLM, which treats failed blocks as loaded;
- the hook reads containers that are filled, but always returns an empty
  collection: the recorded failures are thrown away.

Containers are found by structure, never by name: the attributes the hook
(and the analysed helpers it calls, a few calls deep) takes something out of,
and, across the analysed code, the statements that put something into an
attribute of that name (an add, a queue ``put``, ``|=``, a non-empty
assignment, or passing it to a call, which may fill it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kvflowmap.facts import CallFact, Stmt
from kvflowmap.lifecycle.containers import (ADD_OPS, EMPTY_CONTAINERS, PURE, REMOVE_OPS,
                                           RESET_OPS, assigns_empty, swapped)
from kvflowmap.lifecycle.effects import is_logging
from kvflowmap.lifecycle.ids import IDENT, KEEP, loop_targets
from kvflowmap.lifecycle.swallowed import benign, works_on
from kvflowmap.lifecycle.view import FnView, walk

DEPTH = 3
# the analysed functions (FQNs) a call of a function can reach
Resolve = Callable[[FnView, CallFact], list[str]]
# Calls on a container that take its contents out (or hand them over whole),
# or look whether there is any.
TAKE_OPS = REMOVE_OPS | RESET_OPS | frozenset({"copy", "get", "get_nowait", "items", "values",
                                               "keys", "popleft", "empty", "qsize"})
_MERGES = frozenset({"update", "extend", "union", "__ior__"})


@dataclass(frozen=True)
class BlockChannel:
    """One failed-blocks hook of the analysed code."""

    hook: str
    # attribute -> (function, line) where the hook or a helper takes from it
    drained: tuple[tuple[str, str, int], ...]
    # lines of the hook's returns, when every one returns an empty collection
    empty_returns: tuple[int, ...]


def block_channels(fns: dict[str, FnView], hook_names: tuple[str, ...],
                   resolve: Resolve) -> list[BlockChannel]:
    """Every analysed override of a failed-blocks hook (``hook_names``), with
    the containers it drains and whether it can only return nothing.
    ``resolve(fn, call)`` gives the analysed targets (FQNs) of a call."""
    out = []
    for fqn, fn in sorted(fns.items()):
        if fn.name not in hook_names or not fn.cls:
            continue
        drained: dict[str, tuple[str, int]] = {}
        for g in _closure(fns, fqn, resolve):
            for attr, line in sorted(takes(fns[g]), key=lambda t: t[1]):
                drained.setdefault(attr, (g, line))
        out.append(BlockChannel(fqn, tuple((a, f, ln) for a, (f, ln) in sorted(drained.items())),
                                empty_returns(fn)))
    return out


@dataclass(frozen=True)
class Fill:
    """A statement that may put something into an attribute called ``attr``."""

    attr: str
    fqn: str
    line: int
    cls: str | None  # the class of ``self`` for ``self.attr``; None for ``obj.attr``


def fill_sites(fns: dict[str, FnView]) -> dict[str, list[Fill]]:
    """Attribute name -> the statements that may fill an attribute of that
    name, in source order."""
    out: dict[str, list[Fill]] = {}
    for fqn, fn in sorted(fns.items()):
        for attr, line, own in sorted(_fills(fn), key=lambda t: t[1]):
            # a done-callback nested in a method fills its ``self`` too
            out.setdefault(attr, []).append(Fill(attr, fqn, line, fn.self_cls if own else None))
    return out


def write_only(fns: dict[str, FnView], cls: str) -> list[Fill]:
    """``self.X`` containers of ``cls``'s methods that are filled (an add or
    a queue ``put``) and never otherwise used by them: nothing reads what is
    put there."""
    methods = [fn for fn in fns.values() if fn.cls == cls]
    filled: dict[str, Fill] = {}
    lines: dict[str, set[tuple[str, int]]] = {}
    for fn in methods:
        for a, line, own in sorted(_adds(fn), key=lambda t: t[1]):
            if own:
                filled.setdefault(a, Fill(a, fn.fqn, line, cls))
                lines.setdefault(a, set()).add((fn.fqn, line))
    used = set()
    for fn in methods:
        for st in fn.stmts:
            for n in st.names:
                a = n[5:].partition(".")[0] if n.startswith("self.") else ""
                if a in filled and (fn.fqn, st.line) not in lines[a] and not (
                        fn.name == "__init__" and n == f"self.{a}"):
                    used.add(a)
    return [f for a, f in sorted(filled.items()) if a not in used]


def _closure(fns: dict[str, FnView], fqn: str, resolve: Resolve) -> list[str]:
    """``fqn`` and the analysed functions it calls, up to ``DEPTH`` calls away."""
    seen, frontier = [fqn], [fqn]
    for _ in range(DEPTH):
        nxt = []
        for f in frontier:
            for c in fns[f].all_calls:
                for t in resolve(fns[f], c):
                    if t in fns and t not in seen:
                        seen.append(t)
                        nxt.append(t)
        frontier = nxt
    return seen


def _attr(chain: str | None) -> str | None:
    """``self._x`` / ``self._decode._x`` -> ``_x``; None for locals and calls."""
    if not chain or "." not in chain or "(" in chain or "[" in chain:
        return None
    return chain.rpartition(".")[2]


def takes(fn: FnView) -> list[tuple[str, int]]:
    """Attributes ``fn`` takes contents out of: a removal or reset, a take call
    (``q.get_nowait()``, ``s.copy()``), iteration, or a swap for a new empty one."""
    out: list[tuple[str, int]] = []
    resets: list[tuple[str, int]] = []  # emptied only: nothing of it reaches vLLM unless also read here
    for op in fn.all_containers:
        if op.op in REMOVE_OPS | RESET_OPS and (a := _attr(op.container)):
            (resets if op.op in RESET_OPS else out).append((a, op.line))
    for c in fn.all_calls:
        base, _, meth = (c.callee or "").rpartition(".")
        if meth in TAKE_OPS and (a := _attr(base)):
            (resets if meth in RESET_OPS else out).append((a, c.line))
        # ``result.update(self._failed)``, ``set(self._failed)``: its contents, copied out
        if c.callee in KEEP or (meth in _MERGES and base.partition(".")[0] != "self"):
            out += [(a, c.line) for arg in c.args if (a := _attr(arg))]
    for s in fn.stmts:
        if s.kind == "for" and s.text and (a := _attr(s.text.partition(" in ")[2].strip())) \
                and not _walks_objects(fn, s):
            out.append((a, s.line))
    for asg in fn.all_assigns:
        # ``self._x = set()`` after a copy, or the swap ``done, self._x = self._x, set()``
        if (name := _attr(asg.target)) and asg.target.startswith("self.") and (
                assigns_empty(asg) or (asg.value is None and asg.literal is None)):
            (resets if assigns_empty(asg) else out).append((name, asg.line))
    # ``errors = self._failed.copy(); self._failed.clear()``: the reset of
    # what was read; ``self._failed_ids.clear()`` alone hands nothing over
    read = {a for a, _ in out} | {_attr(a.value) for a in fn.all_assigns
                                  if a.value and a.value.startswith("self.")}
    return out + [(a, line) for a, line in resets if a in read]


def _walks_objects(fn: FnView, loop: Stmt) -> bool:
    """A loop over helper objects, not over what they hold: the body calls a
    method on the loop variable (``for t in self.recv_threads:
    failed |= t.get_and_clear_failed()``); what it takes is the method's."""
    targets, _ = loop_targets(loop.text)
    return any((c.callee or "").partition(".")[0] in targets and "." in (c.callee or "")
               for st in walk(loop.body) for c in fn.calls(st))


def _adds(fn: FnView) -> list[tuple[str, int, bool]]:
    """Attributes ``fn`` adds to directly (``x[k] = v``, ``x.add(v)``,
    ``q.put(v)``): (name, line, on ``self``)."""
    out = [(a, op.line, op.container.startswith("self.")) for op in fn.all_containers
           if op.op in ADD_OPS and (a := _attr(op.container))]
    for c in fn.all_calls:
        base, _, meth = (c.callee or "").rpartition(".")
        if meth in ADD_OPS and (a := _attr(base)):
            out.append((a, c.line, base.startswith("self.")))
    return out


def _fills(fn: FnView) -> list[tuple[str, int, bool]]:
    """Attributes ``fn`` may put something into: (name, line, on ``self``)."""
    out = _adds(fn)
    for c in fn.all_calls:
        base, _, meth = (c.callee or "").rpartition(".")
        # handed to a call, which may fill it (``self._fail(rid, self._failed)``)
        if meth not in TAKE_OPS and not (meth in ADD_OPS and _attr(base)) and \
                c.callee not in PURE and not is_logging(c.callee or ""):
            out += [(a, c.line, (arg or "").startswith("self."))
                    for arg in (*c.args, *(v for _, v in c.kwargs)) if (a := _attr(arg))]
    # a swap (``failed, self._x = self._x, set()``) drains; it fills nothing
    tuples = {a.line for a in fn.all_assigns if a.position is not None}
    swaps = {st.line for st in fn.stmts if st.line in tuples and swapped(fn, st)}
    for asg in fn.all_assigns:
        if (name := _attr(asg.target)) and (asg.aug or not assigns_empty(asg)) and \
                fn.name != "__init__" and asg.line not in swaps:
            out.append((name, asg.line, asg.target.startswith("self.")))
    return out


def empty_returns(fn: FnView) -> tuple[int, ...]:
    """Lines of ``fn``'s returns when each returns an empty collection: a
    literal one, or a local only ever bound to one and never filled."""
    rets = fn.all_returns
    if not rets:
        return ()
    filled = {op.container for op in fn.all_containers if op.op in ADD_OPS}
    filled |= {(c.callee or "").rpartition(".")[0] for c in fn.all_calls
               if (c.callee or "").rpartition(".")[2] in ADD_OPS}
    binds: dict[str, list[bool]] = {}
    for a in fn.all_assigns:
        binds.setdefault(a.target, []).append(assigns_empty(a) and not a.aug)
    for r in rets:
        v = (r.value or "").replace(" ", "")
        if v in EMPTY_CONTAINERS:
            continue
        if v in binds and all(binds[v]) and v not in filled:
            continue
        return ()
    return tuple(r.line for r in rets)


@dataclass(frozen=True)
class Unreported:
    """A failure branch of ``fqn`` (a handler, or a branch that logs an
    error) that records no failed blocks, in a class that records them for
    its other failures (``fill``)."""

    fqn: str
    line: int  # the ``except`` or the branch's test
    attr: str
    fill: Fill
    # analysed helpers the branch hands the request to (none of them records blocks)
    helpers: tuple[tuple[str, int], ...] = ()


LOUD = ("error", "exception", "critical")


def lines_in_loops(fn: FnView, picked: Callable[[FnView, str], bool]) -> set[int]:
    """Lines of the statements inside a ``for`` whose iterable ``picked`` accepts."""
    out: set[int] = set()
    for s in fn.stmts:
        if s.kind == "for" and picked(fn, s.text.partition(" in ")[2] if s.text else ""):
            out |= {t.line for t in walk(s.body)}
    return out


def unreported_failures(fns: dict[str, FnView], fills: list[Fill], resolve: Resolve,
                        request_names: Callable[[str], set[str]],
                        save_walks: Callable[[FnView, str], bool] = lambda fn, it: False
                        ) -> list[Unreported]:
    """Failure branches, in the classes of the direct ``fills`` of the
    failed-blocks containers, that fill none of them (directly or through
    an analysed helper, a few calls deep). ``request_names(fqn)``: the names
    of the function that hold a request's id or data; a failure branch that
    names none of them is not about a request (a loop's catch-all). A class
    that turns failed request ids into blocks in a loop over failed ids
    elsewhere is left out: its branches report the id, and the blocks follow
    from it. A branch inside a loop over state ``save_walks`` says holds
    saves (``for rid, fut in self.store_futures.items()``) is about a save,
    which loses no loaded block."""
    attrs = {f.attr for f in fills}
    writes = _writers(fns, attrs, resolve)
    markers = failure_markers(fns, attrs)
    out = []
    for cls in sorted({f.cls for f in fills if f.cls}):
        members = [fn for fn in fns.values() if fn.cls == cls]
        # a class that converts failed ids into blocks in a loop is judged
        # only where it marks a request failed and records no blocks; a loop
        # that walks pending state successes leave too (every in-flight
        # transfer, drained when the server is gone) converts nothing
        fed = set(markers) | _failure_fed(members, markers, request_names)
        converts = any(_converts(fn, attrs, fed) for fn in members)
        if converts and not markers:
            continue
        fill = next(f for f in fills if f.cls == cls)
        for fn in members:
            names = request_names(fn.fqn)
            if not names:
                continue
            saves = lines_in_loops(fn, save_walks)
            branches = [(b, body) for b, body in (
                _marked_branches(fn, markers, set()) if converts else
                failure_branches(fn, names, markers)) if b.line not in saves]
            filled = [(b, body) for b, body in branches
                      if any(_fills_in(fn, s, attrs, writes, resolve) for s in walk(body))]
            for branch, body in branches:
                # names the branch makes itself (the error ``response`` it
                # sends) are not the request it was given
                made = {a.target for st in walk(body) for a in fn.assigns(st)}
                if not (names - made) & {n for st in walk(body) for n in st.names}:
                    continue
                if _covered(branch, body, filled) or _returned(fn, body) or \
                        _summary(fn, branch, body, fn.fqn in writes) or _defers(fn, branch, body) or \
                        _other_arm_fills(fn, branch, body, attrs, writes, resolve):
                    continue
                if not any(_fills_in(fn, s, attrs, writes, resolve) for s in walk(body)):
                    helpers = tuple((t, c.line) for st in walk(body) for c in fn.calls(st)
                                    if names & set(c.args) for t in resolve(fn, c))
                    out.append(Unreported(fn.fqn, branch.line, fill.attr, fill, helpers))
    return out


def _covered(branch: Stmt, body: tuple[Stmt, ...],
             filled: list[tuple[Stmt, tuple[Stmt, ...]]]) -> bool:
    """The branch lies inside a failure branch that records the blocks (a
    best-effort notification failing after the failure was recorded)."""
    return any(obody is not body and any(st is branch for st in walk(obody))
               for _, obody in filled)


def _other_arm_fills(fn: FnView, branch: Stmt, body: tuple[Stmt, ...], attrs: set[str],
                     writes: set[str], resolve: Resolve) -> bool:
    """The branch is one arm of an ``if`` whose other arm records the blocks:
    the test chooses how the failure is reported (``if hma:
    failed_reqs.put(rid) else: invalid.update(blocks)``), it does not forget it."""
    if branch.kind != "if":
        return False
    other = branch.orelse if body is branch.body else branch.body
    return any(_fills_in(fn, s, attrs, writes, resolve) for s in walk(other))


def _summary(fn: FnView, branch: Stmt, body: tuple[Stmt, ...], writer: bool) -> bool:
    """A branch that only logs the failures a local collection gathered, in
    a function that records the blocks itself (``if failed:
    logger.error(..., failed)`` after the loop that recorded each one)."""
    if not writer or branch.kind != "if" or any(
            not is_logging(c.callee or "") for st in walk(body) for c in fn.calls(st)):
        return False
    gathered = {op.container for op in fn.all_containers
                if op.op in ADD_OPS and "." not in op.container}
    return bool(gathered & set(branch.names))


def _defers(fn: FnView, branch: Stmt, body: tuple[Stmt, ...]) -> bool:
    """The branch sets a local flag that a later test reads (``has_error =
    True; break`` ... ``if has_error:``): that later branch handles it."""
    flags = {a.target for st in walk(body) for a in fn.assigns(st)
             if "." not in a.target and "True" in (a.literal, a.value)}
    return bool(flags) and any(st.kind == "if" and st.line > branch.line and flags & set(st.names)
                               for st in fn.stmts)


def _returned(fn: FnView, body: tuple[Stmt, ...]) -> bool:
    """The branch adds the request to a local collection the function returns
    (``err_reqs.append(rid)`` ... ``return ok, err_reqs``): the caller is told
    of the failure and owes the report."""
    local = {op.container for st in walk(body) for op in fn.containers(st)
             if op.op in ADD_OPS and "." not in op.container}
    if not local:
        return False
    returned = {n for r in fn.all_returns for n in IDENT.findall(r.value or "")}
    return bool(local & returned)


def failure_sites(fns: dict[str, FnView], cls: str) -> list[tuple[str, int]]:
    """(function, line) of every failure branch in the methods of ``cls``:
    an ``except`` that neither re-raises nor catches an absence, and an
    ``if``/``else`` body that logs an error. Where a failed-blocks container
    is never filled, these are the places that should fill it."""
    return [(fqn, line) for fqn, fn in sorted(fns.items()) if fn.cls == cls
            for line in dict.fromkeys(b.line for b, _ in failure_branches(fn, None))]


def _writers(fns: dict[str, FnView], attrs: set[str], resolve: Resolve) -> set[str]:
    """Functions that fill one of ``attrs``, or call (transitively) one that does."""
    found = {f for f, fn in fns.items() if any(a in attrs for a, _, _ in _fills(fn)
                                               if not _passes_only(fn, a))}
    for _ in range(DEPTH):
        more = {f for f, fn in fns.items() if f not in found and any(
            t in found for c in fn.all_calls for t in resolve(fn, c))}
        if not more:
            break
        found |= more
    return found


def _passes_only(fn: FnView, attr: str) -> bool:
    """``attr`` reaches ``fn``'s fills only as a call argument (no add of its own)."""
    return all(a != attr for a, _, _ in _adds(fn)) and \
        not any(_attr(a.target) == attr for a in fn.all_assigns)


def _fills_in(fn: FnView, s: Stmt, attrs: set[str], writes: set[str],
              resolve: Resolve) -> bool:
    if any(a in attrs for a, line, _ in _fills(fn) if line == s.line):
        return True
    return any(t in writes for c in fn.calls(s) for t in resolve(fn, c))


def _converts(fn: FnView, attrs: set[str], fed: set[str]) -> bool:
    """A loop over failed ids (``_walks_failed``) whose body
    fills a failed-blocks container for every item it walks, not only on a
    failure branch (``for rid in failed: if meta := self._meta.get(rid):
    self._invalid.update(meta.block_ids)``): the items are failed requests,
    turned into blocks here."""
    lines = {line for a, line, _ in _fills(fn) if a in attrs}
    return any(s.kind == "for" and _unconditional(fn, s.body, lines) and
               _walks_failed(s, fed) for s in fn.stmts)


def _walks_failed(loop: Stmt, fed: set[str]) -> bool:
    """The loop walks failed ids: a local (a subset the function computed),
    or a ``self`` collection a failure branch fills; not a ``self``
    container of every in-flight transfer."""
    own = [n for n in loop.names if n.startswith("self.") and n.count(".") == 1]
    return not own or any(_name_of(n) in fed for n in own)


def _name_of(chain: str) -> str:
    """``self._failed`` -> ``_failed``; a local's name as it is."""
    return chain.rpartition(".")[2] if chain.startswith("self.") else chain


def _failure_fed(members: list[FnView], markers: frozenset[str],
                 request_names: Callable[[str], set[str]]) -> set[str]:
    """Collections (``self`` attributes by name, and locals) that a failure
    branch of one of ``members`` adds to: where failed ids are gathered."""
    out: set[str] = set()
    for fn in members:
        for _, body in failure_branches(fn, request_names(fn.fqn) or None, markers):
            for st in walk(body):
                out.update(_name_of(c.container) for c in fn.containers(st)
                           if c.op in ADD_OPS)
    return out


def _unconditional(fn: FnView, body: tuple[Stmt, ...], lines: set[int]) -> bool:
    """A line of ``lines`` in ``body``, directly or under ``if``s that are
    not failure branches (a lookup guard), never under an ``except``."""
    for st in body:
        if st.line in lines and st.kind == "simple":
            return True
        if st.kind in ("if", "with") and not _logs_error(fn, st.body) and \
                _unconditional(fn, st.body, lines):
            return True
    return False


def failure_branches(fn: FnView, names: set[str] | None, markers: frozenset[str] = frozenset()
                      ) -> Iterator[tuple[Stmt, tuple[Stmt, ...]]]:
    """(statement, body) of each ``except`` of ``fn`` that is not for an
    absence (``KeyError``, ``queue.Empty``) and whose ``try`` works on the
    request (a call given one of ``names``; any ``try`` when ``names`` is
    None), each ``if``/``else`` body that logs an error, and each body of a
    compound statement that marks the request failed (adds to one of
    ``markers``, see ``failure_markers``)."""
    seen: set[int] = set()
    for s in fn.stmts:
        if s.kind == "try" and (names is None or works_on(fn, s.body, names)):
            for h in s.handlers:
                if not benign(h) and not _reraises(h) and not _hands_back(fn, h.body):
                    seen.add(id(h.body))
                    yield h, h.body
        elif s.kind == "if":
            for body, other in ((s.body, s.orelse), (s.orelse, s.body)):
                if body and (_logs_error(fn, body) or _warns_over(fn, body, other)) and \
                        not _reraises_in(body) and not _hands_back(fn, body):
                    seen.add(id(body))
                    yield s, body
    yield from _marked_branches(fn, markers, seen)


def _marked_branches(fn: FnView, markers: frozenset[str], seen: set[int]
                     ) -> Iterator[tuple[Stmt, tuple[Stmt, ...]]]:
    """Bodies of ``fn`` (not in ``seen``) that add to a failure marker."""
    if not markers:
        return
    adds = _adds_by_line(fn)
    for s in fn.stmts:
        for body in (s.body, s.orelse, *(h.body for h in s.handlers)):
            if body and id(body) not in seen and not _reraises_in(body) and \
                    markers & _direct_adds(body, adds):
                seen.add(id(body))
                yield s, body


def _adds_by_line(fn: FnView) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for a, line, on_self in _adds(fn):
        if on_self:
            out.setdefault(line, set()).add(a)
    return out


def _direct_adds(body: tuple[Stmt, ...], adds: dict[int, set[str]]) -> set[str]:
    """Attributes the simple statements of ``body`` itself add to."""
    return {a for st in body if st.kind == "simple" for a in adds.get(st.line, ())}


def failure_markers(fns: dict[str, FnView], attrs: set[str]) -> frozenset[str]:
    """Attributes that mark a request failed: added to, at least twice, in a
    statement list that also adds to a failed-blocks attribute (``attrs``),
    and more often so than without (``self._failed_ids.add(rid)`` beside
    ``self._invalid_blocks.update(blocks)``). A list that adds to one and
    records no blocks has lost the blocks of that failure."""
    with_blocks: dict[str, int] = {}
    without: dict[str, int] = {}
    for fn in fns.values():
        adds = _adds_by_line(fn)
        for body in fn.lists:
            added = _direct_adds(body, adds)
            tally = with_blocks if added & attrs else without
            for a in added - attrs:
                tally[a] = tally.get(a, 0) + 1
    return frozenset(a for a, n in with_blocks.items() if n >= 2 and n > without.get(a, 0))


def _logs_error(fn: FnView, body: tuple[Stmt, ...]) -> bool:
    return logs(fn, body, LOUD)


def _warns_over(fn: FnView, body: tuple[Stmt, ...], other: tuple[Stmt, ...]) -> bool:
    """``if all(c.is_ready() for c in kv): logger.info("done") else:
    logger.warning("failed")``: one arm warns where the other only informs,
    so that arm is the outcome that went wrong."""
    return bool(other) and logs(fn, body, ("warning", "warn")) and \
        logs(fn, other, ("info", "debug")) and not logs(fn, other, ("warning", "warn") + LOUD)


def logs(fn: FnView, body: tuple[Stmt, ...], levels: tuple[str, ...]) -> bool:
    """A statement of ``body`` itself logs at one of ``levels``."""
    return any(is_logging(c.callee or "") and (c.callee or "").rpartition(".")[2] in levels
               for st in body for c in fn.calls(st))


def _reraises(h: Stmt) -> bool:
    return _reraises_in(h.body)


def _hands_back(fn: FnView, body: tuple[Stmt, ...]) -> bool:
    """The block ends with ``return None`` (or ``False``) in a function that
    returns a value elsewhere (``return kv``): it tells its caller the work
    failed, as a raise would (tpu-inference 0.32.0's ``_pull_kv``, whose
    caller records the blocks of a ``None`` pull)."""
    if not body or body[-1].kind != "return" or (body[-1].text or "").strip() not in (
            "None", "False"):
        return False
    return any(r.value not in (None, "None", "False") for r in fn.all_returns)


def _reraises_in(body: tuple[Stmt, ...]) -> bool:
    """The block ends by raising: the failure goes to the caller, not to vLLM's report."""
    return bool(body) and body[-1].kind == "raise"
