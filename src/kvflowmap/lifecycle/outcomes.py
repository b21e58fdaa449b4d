"""How the paths through a block of statements end, for a question asked
of each simple statement ("does it act on the request?", "does it reply?"):
acted, left the loop, ran off the end, or went back to the loop head first.

Structural, over the statement tree (``Stmt``): ``if``/``else`` arms, ``with``
and ``try`` bodies, handlers and ``finally``; a nested loop counts as acting
when any statement in it acts (its own ``continue`` is its business).
"""

from __future__ import annotations

from collections.abc import Callable

from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.view import walk


def outcomes(stmts: list[Stmt] | tuple[Stmt, ...], acts: Callable[[Stmt], bool],
             ends: list[int], falls: list[int] | None = None, tail: bool = True) -> set[str]:
    """How the paths through ``stmts`` end: ``acc`` (``acts`` held for a statement),
    ``exit`` (left the loop by return or raise), ``fall`` (ran off the end);
    a ``continue`` or ``break`` before acting adds its line to ``ends``, and,
    with ``falls``, the last line of each path that runs off the end of the
    whole region (``tail``: this block ends it) is added there."""
    res: set[str] = set()
    for n, s in enumerate(stmts):
        k = s.kind
        last = tail and n == len(stmts) - 1
        if k in ("continue", "break"):
            ends.append(s.line)
            return res
        if k in ("return", "raise"):
            return res | {"exit"}
        if k == "if":
            o = outcomes(s.body, acts, ends, falls, last)
            if s.orelse:
                o |= outcomes(s.orelse, acts, ends, falls, last)
            else:
                o |= {"fall"}
                if last and falls is not None:
                    falls.append(s.line)  # the implicit ``else``
        elif k in ("with", "try"):
            o = outcomes(s.body, acts, ends, falls, last and not s.final)
            # a body that acts on every path: its handlers run after the act or
            # when the act itself failed (``try: sock.send(r) except: pass``)
            for h in s.handlers if o != {"acc"} else ():
                o |= outcomes(h.body, acts, ends, falls, last and not s.final)
            if s.final:
                o |= outcomes(s.final, acts, ends, falls, last)
        elif k in ("for", "while"):
            # a nested loop that acts on the request (``for r in [rid, *others]``)
            # counts; its own continue and break are its business
            o = {"acc"} if any(acts(b) for b in walk(s.body)) else {"fall"}
            if "fall" in o and last and falls is not None:
                falls.append(s.line)
        elif k in ("def", "class"):
            o = {"fall"}
        else:
            o = {"acc"} if acts(s) else {"fall"}
            if "fall" in o and last and falls is not None:
                falls.append(s.line)
        res |= o - {"fall"}
        if "fall" not in o:
            return res
    return res | {"fall"}
