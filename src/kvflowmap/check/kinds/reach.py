"""``reach``: from an event there must be a path to a report.

Three event/report pairs, chosen with ``params.mode``:

- ``state_release`` (vLLM scheduler): every function that parks a request in
  ``parked_state`` needs a function fed by ``via_field`` (through calls) that
  sets one of ``release_states`` under a test of the parked state.
- ``async_reporter`` (any connector): a connector whose probe may answer
  ``load_kv_async=True`` must override a report method that can return
  finished-receiving ids (the base class reports nothing).
- ``pending_reported`` (any connector): ids that enter a pending-load
  container in the start methods must be drained by the report method, and
  any other method that removes them must hand them to a container the
  report method returns from (abort, preemption, error paths).
"""

from __future__ import annotations

from collections import deque

from kvflowmap.check import flowfacts as ff
from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.model import Finding, Step

PARAMS = {
    "mode": (str, "state_release", "state_release | async_reporter | pending_reported"),
    "parked_state": (str, "RequestStatus.WAITING_FOR_REMOTE_KVS", "state that parks a request"),
    "release_states": (list, ["RequestStatus.WAITING", "RequestStatus.PREEMPTED"],
                       "states that release it"),
    "via_field": (str, "KVConnectorOutput.finished_recving", "carrier that reports the release"),
    "depth": (int, 4, "call hops from the carrier's consumers"),
    "probe_method": (str, "get_num_new_matched_tokens", "method answering load_kv_async"),
    "async_element": (int, 1, "index of load_kv_async in the probe's result"),
    "report_methods": (list, ["get_finished", "get_transfer_results"],
                       "methods that report finished loads"),
    "report_element": (int, 1, "index of finished_recving in get_finished's result"),
    "start_methods": (list, ["start_load_kv"], "methods where loads start"),
    "exempt_methods": (list, ["__init__", "shutdown", "close", "__del__"],
                       "methods allowed to drop pending ids (teardown)"),
}


def check(ctx: CheckContext) -> list[Finding]:
    """Dispatch on ``mode``."""
    mode = ctx.param("mode", PARAMS["mode"][1])
    if mode == "state_release":
        return _state_release(ctx)
    if mode == "async_reporter":
        return each_function(ctx, ctx.target_classes, lambda c: _async_reporter(ctx, c))
    if mode == "pending_reported":
        return each_function(ctx, ctx.target_classes, lambda c: _pending_reported(ctx, c))
    raise ValueError(f"unknown reach mode {mode!r}")


def _p(ctx: CheckContext, name: str):
    return ctx.param(name, PARAMS[name][1])


# -- state_release -------------------------------------------------------------
def _node_matching(ctx: CheckContext, suffix: str, kind: str) -> list[str]:
    return sorted(n for n, k in ctx.graph.nodes(data="kind")
                  if k == kind and (n == suffix or n.endswith("." + suffix)))


def _state_release(ctx: CheckContext) -> list[Finding]:
    g = ctx.graph
    parked = _node_matching(ctx, _p(ctx, "parked_state"), "state")
    releases = {n for s in _p(ctx, "release_states") for n in _node_matching(ctx, s, "state")}
    targets = set(ctx.target_functions)
    out: list[Finding] = []
    for state in parked:
        setters = sorted({(u, d["line"]) for u, _, d in g.in_edges(state, data=True)
                          if d["kind"] == "sets_state" and u in targets})
        if not setters:
            continue
        path = _release_path(ctx, state, releases)
        for fn, line in setters:
            if path:
                continue
            out.append(ctx.finding(
                fn, line,
                f"requests parked in {state.rpartition('.')[0].rpartition('.')[2]}."
                f"{state.rpartition('.')[2]} here are never released: no function fed by "
                f"{_p(ctx, 'via_field')} sets {' or '.join(sorted(r.rpartition('.')[2] for r in releases))}"
                f" under a test of the parked state",
                path=(ctx.step(fn, line, f"sets {state.rpartition('.')[2]}"),),
                anchor=f"{state}:{fn}"))
    return out


def _release_path(ctx: CheckContext, state: str, releases: set[str]) -> list[str] | None:
    """Consumer of the carrier -> ... -> a function setting a release state
    whose path tests the parked state."""
    g = ctx.graph
    readers = {v for _, v, k in g.out_edges(state, data="kind") if k == "reads_state"}
    for field in _node_matching(ctx, _p(ctx, "via_field"), "field"):
        starts = [v for _, v, k in g.out_edges(field, data="kind") if k == "consumes"]
        prev: dict[str, str | None] = {s: None for s in starts}
        queue = deque((s, 0) for s in starts)
        while queue:
            node, d = queue.popleft()
            sets = {v for _, v, k in g.out_edges(node, data="kind") if k == "sets_state"}
            if sets & releases and _on_path(prev, node) & readers:
                return _unwind(prev, node)
            if d < _p(ctx, "depth"):
                for _, nxt, k in g.out_edges(node, data="kind"):
                    if k in ("call", "dispatch") and nxt not in prev:
                        prev[nxt] = node
                        queue.append((nxt, d + 1))
    return None


def _on_path(prev: dict[str, str | None], node: str) -> set[str]:
    return set(_unwind(prev, node))


def _unwind(prev: dict[str, str | None], node: str | None) -> list[str]:
    out = []
    while node is not None:
        out.append(node)
        node = prev[node]
    return out[::-1]


# -- async_reporter ------------------------------------------------------------
def _async_reporter(ctx: CheckContext, cls: str) -> list[Finding]:
    probe = ctx.classes.find_member(cls, _p(ctx, "probe_method"))
    if probe is None or not _is_own(ctx, probe):
        return []
    site = _async_return(ctx, probe)
    if site is None:
        return []
    fqn, line, text = site
    steps = [ctx.step(fqn, line, f"returns {text}: the scheduler parks the request")]
    reporters = [ctx.classes.find_member(cls, m) for m in _p(ctx, "report_methods")]
    own = [r for r in reporters if r and _is_own(ctx, r)]
    if not own:
        names = " nor ".join(_p(ctx, "report_methods"))
        return [ctx.finding(fqn, line, f"{cls.rpartition('.')[2]} may answer load_kv_async=True "
                            f"but overrides neither {names}: the base class reports no "
                            f"finished_recving, so the request waits in WAITING_FOR_REMOTE_KVS "
                            f"forever", path=tuple(steps), anchor=f"no-reporter:{cls}")]
    idx = _p(ctx, "report_element")
    for r in own:
        rets = [(d, x) for d in ff.delegates(ctx, r) for x in ff.returns_of(ctx, d)]
        if any(ff.element(x, idx) not in ("None", "set()", "frozenset()") for _, x in rets):
            return []
        if not rets:
            return []
    r = own[0]
    steps.append(ctx.step(r, ctx.function(r).line, "every return reports no finished_recving"))
    return [ctx.finding(fqn, line, f"{cls.rpartition('.')[2]} may answer load_kv_async=True but "
                        f"{r.rpartition('.')[2]} never returns finished_recving ids",
                        path=tuple(steps), anchor=f"empty-reporter:{cls}")]


def _is_own(ctx: CheckContext, method: str) -> bool:
    """Defined in the analysed connector, not in the protocol base class."""
    owner = method.rpartition(".")[0]
    return owner != ctx.protocol.base_class and owner not in ctx.classes.mro(
        ctx.protocol.base_class)[1:]


def _async_return(ctx: CheckContext, probe: str) -> tuple[str, int, str] | None:
    idx = _p(ctx, "async_element")
    for d in ff.delegates(ctx, probe):
        for r in ff.returns_of(ctx, d):
            text = ff.element(r, idx)
            if text is not None and text not in ("False", "None"):
                return d, r.line, r.value or ""
    return None


# -- pending_reported ----------------------------------------------------------
def _pending_reported(ctx: CheckContext, cls: str) -> list[Finding]:
    report = f"{cls}.{_p(ctx, 'report_methods')[0]}"
    starts = [f"{cls}.{m}" for m in _p(ctx, "start_methods") if f"{cls}.{m}" in ctx.model.defs]
    if report not in ctx.model.defs or not starts:
        return []
    closure = ff.same_class_callees(ctx, report)
    sinks = _report_sinks(ctx, report)
    consulted = _consulted(ctx, closure)
    out: list[Finding] = []
    pending: dict[str, tuple[str, int]] = {}
    for s in starts:
        for fn in ff.same_class_callees(ctx, s):
            for op in ff.containers_of(ctx, fn):
                attr = ff.self_attr(op.container)
                if attr and op.op in ff.ADD_OPS and attr not in sinks and attr in consulted:
                    pending.setdefault(attr, (fn, op.line))
    for attr, (fn, line) in sorted(pending.items()):
        out += _removals_without_report(ctx, cls, attr, closure, sinks, fn, line)
    return out


def _report_sinks(ctx: CheckContext, report: str) -> set[str]:
    """``self`` containers whose contents reach the reported element."""
    idx = _p(ctx, "report_element")
    closure = ff.same_class_callees(ctx, report)
    names = {ff.element(r, idx) for fn in closure for r in ff.returns_of(ctx, fn)}
    names = {n for n in names if n and n.isidentifier()}
    sinks: set[str] = set()
    for _ in range(4):  # a few rounds of local copies are plenty
        for fn in closure:
            for a in ff.assigns_of(ctx, fn):
                if a.target in names and a.value:
                    _absorb(a.value, names, sinks)
            for c in ff.calls_of(ctx, fn):
                base, _, meth = (c.callee or "").rpartition(".")
                if base in names and meth in ("update", "add", "extend", "append", "union"):
                    for arg in c.args:
                        if arg:
                            _absorb(arg, names, sinks)
    return sinks


def _absorb(chain: str, names: set[str], sinks: set[str]) -> None:
    attr = ff.self_attr(chain)
    if attr:
        sinks.add(attr)
    elif chain.isidentifier():
        names.add(chain)


def _consulted(ctx: CheckContext, closure: list[str]) -> set[str]:
    """Attributes the report method reads or drains (not merely adds to)."""
    out: set[str] = set()
    for fn in closure:
        adds = {(o.line, o.col) for o in ff.containers_of(ctx, fn) if o.op in ff.ADD_OPS}
        for r in ff.own(ctx, fn, ctx.facts(fn).reads):
            if r.base == "self" and (r.line, r.col) not in adds:
                out.add(r.attr)
    return out


def _removals_without_report(ctx: CheckContext, cls: str, attr: str, closure: list[str],
                             sinks: set[str], add_fn: str, add_line: int) -> list[Finding]:
    out = []
    exempt = {f"{cls}.{m}" for m in _p(ctx, "exempt_methods")}
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
