"""States that reach a write through a parameter.

vLLM's ``Scheduler.finish_requests(request_ids, finished_status)`` writes
``request.status = finished_status``; the state is chosen by the caller
(``RequestStatus.FINISHED_ABORTED`` from the engine's abort,
``RequestStatus.FINISHED_ERROR`` for failed loads). A write of a parameter
takes every state member some analysed call site passes for it, by position
or keyword. The call sites come from the call edges into the function, so
what ``add_calls`` resolved is what counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from kvflowmap.facts import CallFact, FunctionFact
from kvflowmap.graph.build import Linker
from kvflowmap.graph.dataflow import state_member


@dataclass(frozen=True)
class PassedState:
    """``state`` passed for the parameter by ``caller`` at ``line``."""

    state: str
    caller: str
    line: int
    text: str  # the argument as written (``RequestStatus.FINISHED_ABORTED``)


def states_through_param(lk: Linker, module: str, scope: str, name: str) -> list[PassedState]:
    """State members callers pass for parameter ``name`` of ``module.scope``
    (empty when ``name`` is not one of its parameters)."""
    fqn = f"{module}.{scope}"
    d = lk.model.defs.get(fqn)
    if d is None or d.is_class:
        return []
    fn = cast(FunctionFact, d.fact)
    names = [p.name for p in fn.params if p.kind in ("posonly", "pos")]
    if name not in {p.name for p in fn.params}:
        return []
    out: set[PassedState] = set()
    for caller, _, data in lk.graph.in_edges(fqn, data=True) if fqn in lk.graph else ():
        if data.get("kind") != "call":
            continue
        cd = lk.model.defs.get(caller)
        caller_module = cd.module if cd is not None else caller
        caller_scope = caller[len(caller_module) + 1:] if cd is not None else ""
        for call in _calls_at(lk, caller_module, caller_scope, int(data.get("line") or 0),
                              fn.name):
            text = _argument(call, names, name, fn.class_qualname is not None)
            state = state_member(lk, (caller_module, caller_scope), text) if text else None
            if state is not None and text is not None:
                out.add(PassedState(state, caller, call.line, text))
    return sorted(out, key=lambda p: (p.state, p.caller, p.line))


def _calls_at(lk: Linker, module: str, scope: str, line: int, name: str) -> list[CallFact]:
    return [c for c in lk.model.scope_calls(module, scope)
            if c.line == line and (c.callee or "").rpartition(".")[2] == name]


def _argument(call: CallFact, positional: list[str], name: str, method: bool) -> str | None:
    """The text passed for ``name``: its keyword, else its position (a
    method's ``self`` is not passed)."""
    for kw, value in call.kwargs:
        if kw == name:
            return value
    params = positional[1:] if method and positional and positional[0] in ("self", "cls") \
        else positional
    if name in params:
        i = params.index(name)
        if i < len(call.args):
            return call.args[i]
    return None


def add_param_states(lk: Linker) -> None:
    """``sets_state`` edges for writes of a parameter, one per state passed
    (with the caller in ``via``)."""
    from kvflowmap.graph.dataflow import add_state_node

    for module in sorted(lk.model.facts):
        for a in lk.model.facts[module].assigns:
            if not a.value or "." not in a.target or not a.value.isidentifier():
                continue
            for p in states_through_param(lk, module, a.scope, a.value):
                add_state_node(lk, p.state)
                lk.add_edge(lk.scope_node(module, a.scope), p.state, "sets_state", module,
                            a.line, target=a.target, via=f"{a.value} from {p.caller}:{p.line}")
