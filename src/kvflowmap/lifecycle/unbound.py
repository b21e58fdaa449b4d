"""Names a handled exception leaves unbound.

A ``try`` binds a local (``agent_meta = self._get_meta(req)``); its
``except`` logs the failure and goes on (no ``return``, ``raise``,
``continue`` or ``break``, and no value of its own for the name); a
statement after the ``try`` reads the local. Or the handler itself reads it
(``except Exception: return start``, ``start`` a loop target of the ``try``). When the ``try`` fails before
the binding, that read raises ``UnboundLocalError``: the failure the handler
meant to absorb escapes anyway, as another exception, out of the worker hook
or the background loop that ran it (vllm-ascend 0.13.0's
``MooncakeLayerwiseConnectorWorker.update_decoder_info``, fixed in 0.18.0).
In a loop the read sees the previous request's value instead.

Found on the statement tree: the names a ``try`` body binds (assignments and
loop targets), less those bound before the ``try`` anywhere in the function
(or parameters) and those the handler binds; the first statement after the
``try`` (in its block, then in the blocks around it) that names one of them
reads it, unless that statement only binds it again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kvflowmap.facts import CallFact, Stmt
from kvflowmap.lifecycle.ids import loop_targets
from kvflowmap.lifecycle.view import FnView, mentions, walk

EXITS = frozenset({"return", "raise", "continue", "break"})


@dataclass(frozen=True)
class Unbound:
    """``name`` bound at ``bound_line`` in a ``try`` whose handler at
    ``handler_line`` goes on, read at ``line`` after it."""

    fqn: str
    name: str
    line: int
    bound_line: int
    handler_line: int
    in_handler: bool = False  # read by the handler itself


def unbound_reads(fn: FnView, always_raises: Callable[[FnView, CallFact], bool]
                  = lambda fn, c: False) -> list[Unbound]:
    """Each read, after a ``try``, of a name only its body binds, while a
    handler of it goes on (module docstring); one per name and ``try``.
    ``always_raises(fn, call)``: the call never returns (an analysed helper
    every way out of which raises), so a handler ending in it leaves."""
    out: list[Unbound] = []
    first_bound: dict[str, int] | None = None  # name -> first line binding it
    for st, rest, in_loop in _with_rest(fn.fact.body, (), ()):
        if st.kind != "try" or not st.handlers:
            continue
        if first_bound is None:
            first_bound = {}
            for s in fn.stmts:
                if s.kind not in ("def", "class"):
                    for n in _bound_by(fn, s):
                        first_bound[n] = min(first_bound.get(n, s.line), s.line)
        # bound before the try (a parameter, or any statement above it, any branch)
        before = set(fn.param_names) | {n for n, line in first_bound.items() if line < st.line}
        binds = {n: line for n, line in _binds(fn, st.body).items()
                 if n != "_" and n not in before and not _bound_first(fn, st.body, n)}
        for h in st.handlers:  # the handler itself reads what the try may not have bound
            for name, line in sorted(binds.items()):
                if name in _bound_by(fn, h):
                    continue  # ``except E as e`` binds its own ``e``
                read = _first_read(fn, name, h.body)
                if read is not None:
                    out.append(Unbound(fn.fqn, name, read, line, h.line, in_handler=True))
        # a try that leaves its loop by ``break`` once it has the value (a
        # retry loop) reaches what follows the loop only with it bound
        after = in_loop if _breaks(st.body) else rest
        for h in st.handlers:
            if _leaves(fn, h.body, always_raises):
                continue
            mine = set(_binds(fn, h.body)) | set(_bound_by(fn, h))
            for name, line in sorted(binds.items()):
                if name in mine or any(u.name == name and u.handler_line == h.line
                                       for u in out):
                    continue
                read = _first_read(fn, name, after)
                if read is not None:
                    out.append(Unbound(fn.fqn, name, read, line, h.line))
            break  # one handler that goes on is enough
    return out


def _bound_first(fn: FnView, body: tuple[Stmt, ...], name: str) -> bool:
    """The ``try`` binds ``name`` before anything in it can raise: only
    assignments of literal displays (``keys = []``) come first."""
    for s in body:
        literal = s.kind == "simple" and bool(fn.assigns(s)) and all(
            a.literal is not None for a in fn.assigns(s)) and not fn.calls(s)
        if not literal:
            return False
        if name in _bound_by(fn, s):
            return True
    return False


def _leaves(fn: FnView, body: tuple[Stmt, ...],
            always_raises: Callable[[FnView, CallFact], bool]) -> bool:
    """The handler body leaves: a ``return``/``raise``/``continue``/``break``
    of its own, or a last statement that calls what never returns."""
    if any(s.kind in EXITS for s in body):
        return True
    return bool(body) and any(always_raises(fn, c) for c in fn.calls(body[-1]))


def _breaks(body: tuple[Stmt, ...]) -> bool:
    """A ``break`` in ``body`` that leaves the loop around it (not one of an
    inner loop)."""
    for s in body:
        if s.kind == "break":
            return True
        if s.kind in ("for", "while", "def", "class"):
            continue
        if any(_breaks(part) for part in (s.body, s.orelse, *(h.body for h in s.handlers),
                                          s.final)):
            return True
    return False


def _with_rest(block: tuple[Stmt, ...], after: tuple[Stmt, ...], in_loop: tuple[Stmt, ...]
               ) -> Iterator[tuple[Stmt, tuple[Stmt, ...], tuple[Stmt, ...]]]:
    """Each statement with the statements that run after it: the rest of
    its block, then what follows the compound statements around it; and
    the part of those inside the nearest loop around it."""
    for i, st in enumerate(block):
        rest = (*block[i + 1:], *after)
        inside = (*block[i + 1:], *in_loop)
        yield st, rest, inside
        if st.kind in ("def", "class"):
            continue
        loop = st.kind in ("for", "while")
        for part in (st.body, st.orelse, *(h.body for h in st.handlers), st.final):
            yield from _with_rest(part, rest, () if loop and part is st.body else inside)


def _binds(fn: FnView, block: tuple[Stmt, ...]) -> dict[str, int]:
    """Plain names ``block`` binds (assignments, loop targets), with the
    first line of each."""
    out: dict[str, int] = {}
    for s in walk(block):
        for n in _bound_by(fn, s):
            out.setdefault(n, s.line)
    return out


def _bound_by(fn: FnView, s: Stmt) -> list[str]:
    """Plain names the statement itself (a compound one: its header) binds:
    assignments, tuple targets, loop and comprehension targets."""
    names = [a.target for a in fn.assigns(s) if a.target.isidentifier() and not a.aug]
    if s.kind in ("simple", "except"):
        names += [b.target for b in fn.binds.get(s.line, ()) if b.target.isidentifier()]
    if s.kind == "for":  # its targets (not the names in its iterable)
        names += loop_targets(s.text)[0]
    return names


def _first_read(fn: FnView, name: str, rest: tuple[Stmt, ...]) -> int | None:
    """The line of the first statement of ``rest`` (nested ones in order)
    that names ``name``, when it reads it; None when that statement binds it
    again from something else, or none names it."""
    for st in rest:
        for s in walk((st,)):
            if s.kind in ("def", "class") or not _names(fn, s, name):
                continue
            if s.kind == "for":
                targets, iterable = loop_targets(s.text)
                if name in targets and not mentions(iterable, (name,)):
                    return None
                return s.line
            if name in _bound_by(fn, s) and not any(
                    mentions(t, (name,)) for a in fn.assigns(s) if a.target == name
                    for t in (a.value, a.origin)):
                return None
            return s.line
    return None


def _names(fn: FnView, s: Stmt, name: str) -> bool:
    """The statement names ``name`` (not only as a keyword of a call:
    ``Response(cached_keys=[])``)."""
    if not any(n == name or n.startswith(name + ".") for n in s.names):
        return False
    keywords = {k for c in fn.calls(s) for k, _ in c.kwargs}
    if name not in keywords:
        return True
    values = [v for c in fn.calls(s) for v in (*c.args, *(v for _, v in c.kwargs))]
    return any(mentions(v, (name,)) for v in values) or name in _bound_by(fn, s)
