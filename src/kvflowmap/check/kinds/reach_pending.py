"""``reach`` mode ``pending_reported``: ids leaving a pending-load container
are reported.

The pending-load containers are found by structure: filled in the start
methods (``start_load_kv`` and its helpers) and feeding what the report
method (``get_finished``) returns as finished receiving. Any other method
that removes ids from one must hand them to a container the report method
returns from, or return them to its caller.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvflowmap.check import flowfacts as ff
from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.model import Finding, Step
from kvflowmap.check.options import option

READS = ("Reads: the container operations on self attributes in the start methods and "
         "the same-class methods they call, the return statements and statement trees of "
         "the report method's same-class call tree, and the removals in every other "
         "method of the class.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``reach`` mode ``pending_reported``."""

    report_methods: tuple[str, ...] = option(("get_finished", "get_transfer_results"),
                                             "methods that report finished loads (the first "
                                             "is the report method)")
    report_element: int = option(1, "index of finished_recving in get_finished's result")
    start_methods: tuple[str, ...] = option(("start_load_kv",), "methods where loads start")
    exempt_methods: tuple[str, ...] = option(("__init__", "shutdown", "close", "__del__"),
                                             "methods allowed to drop pending ids (teardown)")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """Pending-load removals that report nothing, per target class."""
    return each_function(ctx, ctx.target_classes, lambda c: pending_reported(ctx, opts, c))


def pending_reported(ctx: CheckContext, opts: Options, cls: str) -> list[Finding]:
    """Findings of one connector class."""
    report = f"{cls}.{opts.report_methods[0]}"
    starts = [f"{cls}.{m}" for m in opts.start_methods if f"{cls}.{m}" in ctx.model.defs]
    if report not in ctx.model.defs or not starts:
        return []
    closure = ff.same_class_callees(ctx, report)
    sinks, feeders = _report_flow(ctx, opts, closure)
    out: list[Finding] = []
    pending: dict[str, tuple[str, int]] = {}
    for s in starts:
        for fn in ff.same_class_callees(ctx, s):
            for op in ff.containers_of(ctx, fn):
                attr = ff.self_attr(op.container)
                if attr and op.op in ff.ADD_OPS and attr in feeders and attr not in sinks:
                    pending.setdefault(attr, (fn, op.line))
    for attr, (fn, line) in sorted(pending.items()):
        out += _removals_without_report(ctx, opts, cls, attr, closure, sinks, fn, line)
    return out


def _report_flow(ctx: CheckContext, opts: Options,
                 closure: list[str]) -> tuple[set[str], set[str]]:
    """(sinks, feeders) of the reported element of the report method.

    Locals flowing into the returned element are followed through copies and
    ``update``/``add`` calls. A sink is a ``self`` container added wholesale
    (``done.update(self._failed)``): where other paths hand ids over. A feeder
    is one whose members are iterated or popped into it (``for _, ids in
    self._pending.items(): done.update(ids)``): the in-flight structure."""
    idx = opts.report_element
    elements = {ff.element(r, idx) for fn in closure for r in ff.returns_of(ctx, fn)}
    names = {n for n in elements if n and n.isidentifier()}
    sinks: set[str] = set()
    feeders: set[str] = set()
    for _ in range(4):  # a few rounds of local copies are plenty
        for fn in closure:
            _follow(ctx, fn, names, sinks, feeders)
    return sinks, feeders


def _follow(ctx: CheckContext, fn: str, names: set[str], sinks: set[str],
            feeders: set[str]) -> None:
    calls_by_line: dict[int, list[str]] = {}
    for c in ff.calls_of(ctx, fn):
        base, _, meth = (c.callee or "").rpartition(".")
        calls_by_line.setdefault(c.line, []).extend(a for a in c.args if a)
        if base in names and meth in ("update", "add", "extend", "append", "union"):
            for arg in c.args:
                if arg:
                    _absorb(arg, names, sinks)
    for a in ff.assigns_of(ctx, fn):
        if a.target not in names or not a.value:
            continue
        attr = ff.self_attr(a.value)
        if attr:
            sinks.add(attr)
        elif a.value.startswith("self.") and ff.self_attr(a.value.split(".")[0] + "." +
                                                          a.value.split(".")[1]):
            feeders.add(a.value.split(".")[1])  # n = self._x.pop(...)
        elif a.value.isidentifier():
            names.add(a.value)
        for arg in calls_by_line.get(a.line, ()):  # n = helper(self._x)
            if fed := ff.self_attr(arg):
                feeders.add(fed)
    for stmt in _walk(ctx.function(fn).body):
        if stmt.kind == "for" and stmt.text and " in " in stmt.text:
            targets, _, iterable = stmt.text.partition(" in ")
            if {t.strip(" ()[]") for t in targets.split(",")} & names:
                # ``self._x.items()``, ``list(self._x)``, ``sorted(self._x)``...
                m = re.search(r"\bself\.(\w+)", iterable)
                if m:
                    feeders.add(m.group(1))


def _walk(stmts):
    for s in stmts:
        yield s
        for part in (s.body, s.orelse, s.handlers, s.final):
            yield from _walk(part)


def _absorb(chain: str, names: set[str], sinks: set[str]) -> None:
    attr = ff.self_attr(chain)
    if attr:
        sinks.add(attr)
    elif chain.isidentifier():
        names.add(chain)


def _removals_without_report(ctx: CheckContext, opts: Options, cls: str, attr: str,
                             closure: list[str],
                             sinks: set[str], add_fn: str, add_line: int) -> list[Finding]:
    out = []
    exempt = {f"{cls}.{m}" for m in opts.exempt_methods}
    for fn in sorted(f for f in ctx.model.defs if f.rpartition(".")[0] == cls):
        if fn in closure or fn in exempt or ctx.model.defs[fn].is_class:
            continue
        helpers = ff.same_class_callees(ctx, fn)
        removals = [o for o in ff.containers_of(ctx, fn)
                    if ff.self_attr(o.container) == attr and o.op in ff.REMOVE_OPS]
        if not removals or _adds_to_sink(ctx, helpers, sinks):
            continue
        rm = removals[0]
        steps = (Step(ctx.where(add_fn)[0], add_line, add_fn, f"id enters self.{attr}"),
                 ctx.step(fn, rm.line, f"{rm.op} removes it from self.{attr}"),
                 ctx.step(fn, ctx.function(fn).end_line,
                          "returns without adding it to what the report method returns"))
        out.append(ctx.finding(
            fn, rm.line,
            f"ids removed from self.{attr} in {fn.rpartition('.')[2]} are never reported in "
            f"finished_recving: the request stays in WAITING_FOR_REMOTE_KVS",
            column=rm.col, path=steps, anchor=f"{attr}:{rm.op}"))
    return out


def _adds_to_sink(ctx: CheckContext, fns: list[str], sinks: set[str]) -> bool:
    for fn in fns:
        for o in ff.containers_of(ctx, fn):
            if ff.self_attr(o.container) in sinks and o.op in ff.ADD_OPS:
                return True
        for a in ff.assigns_of(ctx, fn):
            if a.aug and ff.self_attr(a.target) in sinks:
                return True
    return False
