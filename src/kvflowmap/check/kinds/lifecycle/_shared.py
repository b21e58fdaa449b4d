"""What every lifecycle mode shares: the model (built once per analysis),
the functions a rule looks at, and steps for a finding's path."""

from __future__ import annotations

import fnmatch
from collections.abc import Collection, Iterable, Iterator
from typing import Protocol, TypeVar

from kvflowmap.check.context import CheckContext
from kvflowmap.check.model import Step
from kvflowmap.lifecycle.effects import HANDLING
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


def probe_commit_pairs(ctx: CheckContext, lc: Lifecycle, wanted: Collection[str]
                       ) -> Iterator[tuple[str, str]]:
    """``(probe, commit hook)`` that each class of the ``wanted`` functions
    resolves the protocol's two names to, both analysed; once per commit
    hook, in the class that defines it."""
    for cls in sorted({fn.cls for f, fn in lc.functions.items() if f in wanted and fn.cls}):
        probe = ctx.classes.find_member(cls, lc.spec.probe)
        commit = ctx.classes.find_member(cls, lc.spec.commit)
        if commit is None or probe is None or commit.rpartition(".")[0] != cls:
            continue
        if commit in lc.functions and probe in lc.functions:
            yield probe, commit


def record_lines(lc: Lifecycle, fqn: str) -> set[int]:
    """Lines of the statements of ``fqn`` that keep the request id."""
    fn = lc.functions[fqn]
    return {s.line for s in fn.stmts
            if any(e.kind in HANDLING and e.kind != "return" for e in lc.effects.of(fn, s))}


def async_returns(lc: Lifecycle, probe: str, idx: int, never: tuple[str, ...]) -> list[int]:
    """Lines where the probe returns a tuple that asks for a load: its async
    element is not a literal 'no' (``return n, True``), or its token count is
    not a literal nothing (``return hit - computed, False``: a synchronous load
    the commit hook must record just the same)."""
    fn = lc.functions[probe]
    lines = []
    for r in fn.all_returns:
        if not r.elements or idx >= len(r.elements):
            continue
        count = r.elements[0].strip() if idx != 0 else ""
        if r.elements[idx].strip() not in never or count not in ("0", "None", ""):
            lines.append(r.line)
    return lines


def asking_returns(lc: Lifecycle, probe: str, idx: int, never: tuple[str, ...],
                   depth: int = 2) -> list[int]:
    """``async_returns`` of ``probe``, and the lines of its returns of a call
    to an analysed function whose own returns ask for a load
    (``return self._complete_lookup(...)``), ``depth`` calls deep."""
    lines = set(async_returns(lc, probe, idx, never))
    fn = lc.functions[probe]
    if depth > 0:
        for s in fn.stmts:
            if s.kind != "return" or any(r.elements for r in fn.returns(s)):
                continue
            if any(asking_returns(lc, t, idx, never, depth - 1)
                   for c in fn.calls(s) for t in lc.subject_callees(fn, c) if t != probe):
                lines.add(s.line)
    return sorted(lines)


def off_line(ctx: CheckContext, cls: str, fqns: Iterable[str], *, exact: bool) -> set[str]:
    """Of the methods ``fqns``, those that never run on an instance of
    ``cls``: a method of a class sharing an analysed base with ``cls`` that
    is neither ``cls`` nor one of its bases (a sibling's override, reached
    from the shared base by a dispatch edge), nor, unless ``exact``, one of
    its subclasses (a receiver typed ``cls`` may hold one)."""
    line = set(ctx.classes.mro(cls))
    out = set()
    for f in fqns:
        k = f.rpartition(".")[0]
        if not ctx.classes.is_class(k) or k in line or (not exact and ctx.classes.related(k, cls)):
            continue
        if any(b in line and ctx.classes.is_class(b) for b in ctx.classes.mro(k)):
            out.add(f)
    return out
