"""``states``: request-state transitions found in the code against an allowed table.

``allowed`` lists ``FROM -> TO`` pairs by member name (``*`` matches any).
A transition whose starting state the code does not establish (``*``) passes
when ``TO`` is allowed from some state, unless ``strict_unknown`` is set.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.spec import KindSpec
from kvflowmap.check.model import Finding, Step
from kvflowmap.check.options import option
from kvflowmap.graph.transitions import Transition, extract_transitions

READS = ("Reads: the request-state transitions of the target functions (each assignment "
         "of a state member, with the states the enclosing tests establish).")


@dataclass(frozen=True)
class Options:
    """Parameters of the ``states`` kind."""

    allowed: tuple[str, ...] = option((), "allowed transitions, 'FROM -> TO' by member name; "
                                      "'*' wildcards")
    strict_unknown: bool = option(False, "report transitions whose FROM the code does not "
                                  "establish")


def _pairs(opts: Options) -> list[tuple[str, str]]:
    out = []
    for item in opts.allowed:
        left, sep, right = str(item).partition("->")
        if not sep:
            raise ValueError(f"allowed entry {item!r} is not 'FROM -> TO'")
        out.append((left.strip(), right.strip()))
    return out


def _ok(pairs: list[tuple[str, str]], frm: str, to: str) -> bool:
    return any(fnmatch.fnmatchcase(frm, a) and fnmatch.fnmatchcase(to, b) for a, b in pairs)


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per transition the table does not allow."""
    pairs = _pairs(opts)
    strict = opts.strict_unknown
    targets = set(ctx.target_functions)
    out: list[Finding] = []
    for t in extract_transitions(ctx.linker):
        if t.function not in targets:
            continue
        to = t.short(t.to_state)
        froms = [t.short(s) for s in t.from_states]
        if froms == ["*"]:
            # Unknown start: strict mode needs an explicit '* -> TO' entry.
            allowed = _ok(pairs, "*", to) if strict else any(
                fnmatch.fnmatchcase(to, b) for _, b in pairs)
        else:
            allowed = all(_ok(pairs, f, to) for f in froms)
        if not allowed:
            out.append(_finding(ctx, t, froms, to))
    return out


def _finding(ctx: CheckContext, t: Transition, froms: list[str], to: str) -> Finding:
    frm = " | ".join(froms)
    steps = (Step(t.file, t.line, t.function, f"guard: {t.guard or '(none)'}"),
             Step(t.file, t.line, t.function, f"sets {to}"))
    return ctx.finding(t.function, t.line, f"transition {frm} -> {to} is not in the allowed table",
                       path=steps, anchor=f"{frm}->{to}")


SPEC = KindSpec(Options, check, READS)
