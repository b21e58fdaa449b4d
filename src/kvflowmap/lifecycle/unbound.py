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

from collections.abc import Iterator
from dataclasses import dataclass

from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.ids import loop_targets
from kvflowmap.lifecycle.view import FnView, walk

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


def unbound_reads(fn: FnView) -> list[Unbound]:
    """Each read, after a ``try``, of a name only its body binds, while a
    handler of it goes on (module docstring); one per name and ``try``."""
    out: list[Unbound] = []
    for st, rest in _with_rest(fn.fact.body, ()):
        if st.kind != "try" or not st.handlers:
            continue
        binds = {n: line for n, line in _binds(fn, st.body).items()
                 if not _bound_before(fn, n, st.line)}
        for h in st.handlers:  # the handler itself reads what the try may not have bound
            for name, line in sorted(binds.items()):
                if name in _bound_by(fn, h):
                    continue  # ``except E as e`` binds its own ``e``
                read = _first_read(fn, name, h.body)
                if read is not None:
                    out.append(Unbound(fn.fqn, name, read, line, h.line, in_handler=True))
        for h in st.handlers:
            if any(s.kind in EXITS for s in h.body):
                continue
            mine = set(_binds(fn, h.body)) | set(_bound_by(fn, h))
            for name, line in sorted(binds.items()):
                if name in mine or any(u.name == name and u.handler_line == h.line
                                       for u in out):
                    continue
                read = _first_read(fn, name, rest)
                if read is not None:
                    out.append(Unbound(fn.fqn, name, read, line, h.line))
            break  # one handler that goes on is enough
    return out


def _with_rest(block: tuple[Stmt, ...], after: tuple[Stmt, ...]
               ) -> Iterator[tuple[Stmt, tuple[Stmt, ...]]]:
    """Each statement with the statements that run after it: the rest of
    its block, then what follows the compound statements around it."""
    for i, st in enumerate(block):
        rest = (*block[i + 1:], *after)
        yield st, rest
        if st.kind in ("def", "class"):
            continue
        for part in (st.body, st.orelse, *(h.body for h in st.handlers), st.final):
            yield from _with_rest(part, rest)


def _binds(fn: FnView, block: tuple[Stmt, ...]) -> dict[str, int]:
    """Plain names ``block`` binds (assignments, loop targets), with the
    first line of each."""
    out: dict[str, int] = {}
    for s in walk(block):
        for n in _bound_by(fn, s):
            out.setdefault(n, s.line)
    return out


def _bound_by(fn: FnView, s: Stmt) -> list[str]:
    """Plain names the statement itself (a compound one: its header) binds."""
    names = [a.target for a in fn.assigns(s) if a.target.isidentifier() and not a.aug]
    if s.kind == "for":  # its targets (not the names in its iterable)
        names += loop_targets(s.text)[0]
    return names


def _bound_before(fn: FnView, name: str, line: int) -> bool:
    """A parameter, or bound by a statement before ``line`` (any branch)."""
    if name in fn.param_names:
        return True
    return any(s.line < line and name in _bound_by(fn, s) for s in fn.stmts
               if s.kind not in ("def", "class"))


def _first_read(fn: FnView, name: str, rest: tuple[Stmt, ...]) -> int | None:
    """The line of the first statement of ``rest`` (nested ones in order)
    that names ``name``, when it reads it; None when that statement only
    binds it again, or none names it."""
    for st in rest:
        for s in walk((st,)):
            if s.kind in ("def", "class"):
                continue
            if not any(n == name or n.startswith(name + ".") for n in s.names):
                continue
            rebinds = name in {a.target for a in fn.assigns(s) if not a.aug}
            reads = [a for a in fn.assigns(s) if a.target != name]
            return None if rebinds and not reads and s.kind == "simple" else s.line
    return None
