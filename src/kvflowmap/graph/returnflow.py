"""Producers of a carrier field through return values.

vLLM fills ``KVConnectorOutput.finished_recving`` from what the connector's
hook returns (``output.finished_recving = results.finished_recving``,
``results = connector.get_transfer_results(...)``), and a connector's facade
returns what its worker half returns, which returns the set a helper filled.
The functions that *produce* the field are those returns, not only the vLLM
line that stores it. This pass follows the stored value back: through locals
(tuple unpacking keeps the position), attribute reads of a returned object
(``results.finished_recving`` -> the ``finished_recving=`` keyword of the
returned constructor), ``or``/``set()`` copies, and calls, to every analysed
function whose return hands the value on, and adds a ``produces`` edge (with
``via="return"``) from each of them to the field.

Dispatch follows the receiver: a call on ``self`` reaches an override in a
subclass only when that subclass still runs the calling method (a class that
overrides ``get_transfer_results`` is not reached through the base one's
``self.get_finished()``); a call on another object reaches every override of
the resolved method, since the object may be any subclass.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.facts import AUG_MERGES, CallFact, ReturnFact
from kvflowmap.graph.build import Linker
from kvflowmap.graph.dataflow import Store

MAX_DEPTH = 8
MAX_CHAINS = 4  # ways up to the field kept per producing edge (``path`` shows one)

# (function, return line, the local it returns of the value or "", and the
# functions the value is returned on through before the tracing scope gets
# it: (function, line of its return), the nearest to the producer first)
Found = tuple[str, int, str, tuple[tuple[str, int], ...]]


@dataclass(frozen=True)
class Want:
    """What part of a value is followed: a tuple position, an attribute, or all."""

    slot: int | None = None
    field: str | None = None


def add_return_producers(lk: Linker, stores: list[Store]) -> None:
    """``produces`` edges from the functions whose return values the carrier
    writes ``stores`` (``dataflow.add_fields``) are filled from (see the
    module docstring)."""
    found: dict[tuple[str, str], tuple[int, str]] = {}
    chains: dict[tuple[str, str], list[tuple[tuple[str, str, int], ...]]] = {}
    for s in stores:
        if s.value and s.field in lk.graph:
            storer = f"{s.module}.{s.scope}"
            for fqn, line, local, up in _trace(lk, s.module, s.scope, s.value,
                                               Want(s.position), 0, {}):
                found.setdefault((fqn, s.field), (line, local))
                chain = (*((f, _file_of(lk, f), ln) for f, ln in up),
                         (storer, lk.where(s.module)["file"], s.line))
                kept = chains.setdefault((fqn, s.field), [])
                if chain not in kept and len(kept) < MAX_CHAINS:
                    kept.append(chain)
    for (fqn, field), (line, local) in sorted(found.items()):
        d = lk.model.defs[fqn]
        # ``value``: the local (or ``local.field``) the return hands on into
        # the field (``path`` follows only what that is made of); ``up``: the
        # ways the value climbs from ``fqn`` to the line that stores it, as
        # (function, file, line) hops, the last the storing one (``path``
        # shows them, so that the facade and vLLM's caller are not skipped)
        extra: dict[str, object] = {"value": local} if local else {}
        extra["up"] = tuple(sorted(chains[(fqn, field)], key=lambda c: (len(c), c)))
        lk.add_edge(fqn, field, "produces", d.module, line, via="return", **extra)


def _file_of(lk: Linker, fqn: str) -> str:
    return str(lk.where(lk.model.defs[fqn].module)["file"])


def trace_value(lk: Linker, module: str, scope: str, origin: str,
                want: Want) -> list[tuple[str, int, str]]:
    """(function, return line, returned local or "") of every analysed
    function whose return value ``origin``, read in ``module``/``scope``,
    comes from (through locals, tuple positions, attributes and calls)."""
    return [(f, line, local) for f, line, local, _ in _trace(lk, module, scope, origin, want,
                                                             0, {})]


# what one trace of a stored value has found per (module, scope, origin,
# want); None while that trace is in progress (a cycle finds nothing new)
Seen = dict[tuple[str, str, str, Want], "list[Found] | None"]


def _trace(lk: Linker, module: str, scope: str, origin: str, want: Want,
           depth: int, seen: Seen) -> list[Found]:
    """(function, return line, the plain local it returns of the value or "")
    of every analysed function whose return the value ``origin`` (read in
    ``module``/``scope``) comes from. A value met again gives what it gave
    the first time, not nothing: NIXL's push worker returns
    ``super().get_transfer_results()``, which the facade's call reached
    first, and the push worker was dropped as handing nothing on."""
    key = (module, scope, origin, want)
    if depth > MAX_DEPTH:
        return []
    if key in seen:
        return seen[key] or []
    seen[key] = None
    seen[key] = found = _trace_value(lk, module, scope, origin, want, depth, seen)
    return found


def _trace_value(lk: Linker, module: str, scope: str, origin: str, want: Want,
                 depth: int, seen: Seen) -> list[Found]:
    if origin.endswith("()"):
        return _through_call(lk, module, scope, origin[:-2], want, depth, seen)
    head, _, attr = origin.partition(".")
    if attr and "." not in attr and head != "self" and want.field is None:
        # ``results.finished_recving``: that attribute of what ``results`` holds
        return _trace(lk, module, scope, head, Want(want.slot, attr), depth + 1, seen)
    if attr:
        return []
    out = []
    scope_assigns = lk.model.assigns.get((module, scope), {})
    if want.field is not None:
        # ``results.failed_recving = self.worker.take_failed()`` before
        # ``return results``: that field is what the write put there
        written = [a for a in scope_assigns.get(f"{origin}.{want.field}", ()) if not a.aug]
        for a in written:
            src = a.origin or a.value
            if src:
                out += _trace(lk, module, scope, src, Want(want.slot), depth + 1, seen)
        if written:
            return out
    for a in scope_assigns.get(origin, ()):
        # ``done |= t.take_done()`` puts what the call returns in; ``-=`` takes out
        if a.aug and a.op not in AUG_MERGES:
            continue
        src = a.origin or a.value
        if not src:
            continue
        if a.position is not None:
            if want.slot is None:
                out += _trace(lk, module, scope, src, Want(a.position, want.field),
                              depth + 1, seen)
        else:
            out += _trace(lk, module, scope, src, want, depth + 1, seen)
    return out


def _through_call(lk: Linker, module: str, scope: str, callee: str,
                  want: Want, depth: int, seen: Seen) -> list[Found]:
    if callee.endswith(".result") and callee[:-len(".result")].isidentifier():
        done = _through_future(lk, module, scope, callee[:-len(".result")], want, depth, seen)
        if done:
            return done
    call = _call_of(lk, module, scope, callee)
    if call is None:
        return []
    out = []
    for target in _targets(lk, module, scope, call):
        out += _returned_by(lk, target, want, depth, seen)
    return out


def _returned_by(lk: Linker, target: str, want: Want, depth: int,
                 seen: Seen) -> list[Found]:
    """The returns of analysed function ``target`` that hand on the wanted
    part, and where that comes from in turn."""
    out: list[Found] = []
    d = lk.model.defs[target]
    for r in lk.model.scope_returns(d.module, d.fact.qualname):
        nxt = _part(r, want)
        if nxt is None:
            continue
        origin, rest = nxt
        # ``return done`` hands the local on whole; ``return results`` of a
        # wanted field hands on ``results.<field>`` (``local.field``)
        local = origin if origin and origin.isidentifier() and rest.slot is None else ""
        if local and rest.field:
            local = f"{local}.{rest.field}"
        deeper = _trace(lk, d.module, d.fact.qualname, origin, rest, depth + 1, seen) \
            if origin else []
        if not deeper and origin and _from_analysed(lk, d.module, d.fact.qualname, origin):
            # ``return self.worker.get_finished(ids)`` (or a local unpacked
            # from it) of a worker whose every return hands nothing in the
            # wanted slot (``return set(), recving``)
            continue
        out.append((target, r.line, local, ()))
        # found inside ``target``: the value climbs through ``target``'s return too
        out += [(f, ln, loc, (*up, (target, r.line))) for f, ln, loc, up in deeper]
    return out


def _from_analysed(lk: Linker, module: str, scope: str, origin: str, depth: int = 3) -> bool:
    """``origin`` is a call that runs analysed functions only, or a local
    every binding of which is one: what it holds is all in analysed code,
    so a trace that finds nothing there means there is nothing."""
    if origin.endswith("()"):
        call = _call_of(lk, module, scope, origin[:-2])
        targets = lk.calls.resolve((module, scope), call) if call is not None else []
        # a constructor makes the value here: it is no function handing one on
        return bool(targets) and all(
            not t.external and t.fqn in lk.model.defs and not lk.classes.is_class(t.fqn)
            and not t.fqn.endswith(".__init__") for t in targets)
    if not origin.isidentifier() or depth == 0:
        return False
    binds = [a for a in lk.model.assigns.get((module, scope), {}).get(origin, ()) if not a.aug]
    return bool(binds) and all(
        _from_analysed(lk, module, scope, a.origin or a.value or "", depth - 1) for a in binds)


def _call_of(lk: Linker, module: str, scope: str, callee: str) -> CallFact | None:
    """The first call of ``callee`` in the scope (what a value's origin names)."""
    return next((c for c in lk.model.scope_calls(module, scope) if c.callee == callee), None)


def _through_future(lk: Linker, module: str, scope: str, fut: str, want: Want,
                    depth: int, seen: Seen) -> list[Found]:
    """``fut.result()`` of a local future bound from a call that runs an
    analysed function (``run_coroutine_threadsafe(self.fetch(), loop)``,
    ``executor.submit(self.work, x)``, ``loop.run_in_executor(None, self.work)``):
    what that function returns."""
    out = []
    calls = lk.model.scope_calls(module, scope)
    for a in lk.model.assigns.get((module, scope), {}).get(fut, ()):
        value = a.value or ""
        if a.aug or a.position is not None or not value.endswith("()"):
            continue
        maker = next((c for c in calls if c.line == a.line and c.callee == value[:-2]), None)
        if maker is None:
            continue
        for arg in maker.args:
            if not arg:
                continue
            if arg.endswith("()"):  # a coroutine (or value) made by a call
                out += _trace(lk, module, scope, arg, want, depth + 1, seen)
            else:  # a function handed over to run
                for kind, fqn in lk.values.eval((module, scope), arg):
                    if kind == "func" and fqn in lk.model.defs:
                        out += _returned_by(lk, fqn, want, depth + 1, seen)
            if out:
                break
    return out


def _part(r: ReturnFact, want: Want) -> tuple[str | None, Want] | None:
    """What of return ``r`` carries the wanted part, and what remains to want
    of it; None when this return hands nothing of it (``return None, done``
    for slot 0)."""
    if want.slot is not None and r.elements is not None:
        if want.slot >= len(r.elements) or _nothing(r.elements[want.slot]):
            return None
        return r.origins[want.slot], Want(None, want.field)
    if want.field is not None and r.fields:
        match = next((v for k, v in r.fields if k == want.field), None)
        return (match, Want()) if match else None
    if not r.origins or r.value in (None, "None"):
        return None
    return r.origins[0], want


# What a return slot holds when it hands on no value: ``return set(), recving``.
_NOTHING = frozenset({"None", "set()", "{}", "[]", "()", "dict()", "list()", "tuple()",
                      "frozenset()"})


def _nothing(element: str | None) -> bool:
    """The returned element is ``None`` or a literal empty collection."""
    return (element or "").replace(" ", "") in _NOTHING


def _targets(lk: Linker, module: str, scope: str, call: CallFact) -> list[str]:
    """Analysed functions a call can run, overrides included (see the module
    docstring for how the receiver decides which)."""
    caller = lk.model.defs.get(f"{module}.{scope}")
    owner = caller.fqn.rpartition(".")[0] if caller is not None else ""
    # ``self.m()``, not ``self.worker.m()`` (a call on another object)
    head, _, rest = (call.callee or "").partition(".")
    on_self = bool(rest) and "." not in rest and lk.values.is_self((module, scope), head) \
        and lk.classes.is_class(owner)
    out: set[str] = set()
    for t in lk.calls.resolve((module, scope), call):
        if t.external or t.fqn not in lk.model.defs:
            continue
        out.add(t.fqn)
        for o in lk.classes.overrides(t.fqn):
            sub = o.rpartition(".")[0]
            if not on_self or caller is None or _still_runs(lk, sub, caller.fqn):
                out.add(o)
    return sorted(out)


def _still_runs(lk: Linker, sub: str, method: str) -> bool:
    """Objects of ``sub`` run ``method`` (a base class's): ``sub`` inherits
    it, or its override calls ``super().<name>()`` (vLLM 0.34.0's
    ``OffloadingConnector.get_transfer_results`` runs the base one, whose
    ``self.get_finished()`` is then the offloading connector's)."""
    name = method.rpartition(".")[2]
    found = lk.classes.find_member(sub, name)
    if found == method:
        return True
    d = lk.model.defs.get(found or "")
    return d is not None and any((c.callee or "") == f"super().{name}"
                                 for c in lk.model.scope_calls(d.module, d.fact.qualname))
