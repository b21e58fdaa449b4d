"""What every lifecycle mode shares: the model (built once per analysis),
the functions a rule looks at, and steps for a finding's path."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from typing import Protocol, TypeVar

from kvflowmap.check.context import CheckContext
from kvflowmap.check.model import Step
from kvflowmap.lifecycle.model import Lifecycle



class _InFunction(Protocol):
    """A model result that names the function it is about."""

    @property
    def fqn(self) -> str: ...


T = TypeVar("T", bound=_InFunction)

# methods whose exits are teardown: what they leave behind no request waits on
TEARDOWN = ("__init__", "__del__", "shutdown", "close")

def lifecycle(ctx: CheckContext) -> Lifecycle:
    """The lifecycle model of the analysis (``CheckContext.lifecycle``)."""
    return ctx.lifecycle()


def functions(ctx: CheckContext, lc: Lifecycle) -> list[str]:
    """Subject functions the rule applies to: those that run for the
    connector (``Lifecycle.connected``), in its ``applies_to`` modules."""
    mods = ctx.rule.applies_to.modules
    return [f for f in lc.functions if lc.connected(f) and (
        not mods or any(fnmatch.fnmatch(lc.functions[f].module, p) for p in mods))]


def by_function(ctx: CheckContext, lc: Lifecycle, items: Iterable[T]) -> dict[str, list[T]]:
    """Model results (each with an ``fqn``) grouped by function, only for
    the functions the rule applies to (``functions``)."""
    wanted = set(functions(ctx, lc))
    out: dict[str, list[T]] = {}
    for x in items:
        if x.fqn in wanted:
            out.setdefault(x.fqn, []).append(x)
    return out


def steps(ctx: CheckContext, fqn: str, lines: list[tuple[int, str]]) -> tuple[Step, ...]:
    """``(line, note)`` pairs of one function as finding steps."""
    return tuple(ctx.step(fqn, line, note) for line, note in lines if line)


def short(fqn: str) -> str:
    """``pkg.mod.Class.method`` -> ``Class.method``."""
    parts = fqn.split(".")
    return ".".join(parts[-2:])
