"""The ``conforms`` called-member check: what the analysed vLLM calls on the
subject's objects exists there.

vLLM ships thin facades for third-party connectors: its ``LMCacheConnectorV1``
builds LMCache's ``LMCacheConnectorV1Impl`` and forwards every hook to it
(``return self._lmcache_engine.get_finished(finished_req_ids)``). When the
package's class lacks a method the facade forwards, the hook raises
``AttributeError``, every step (LMCache 0.3.0 had neither ``get_finished``
nor ``request_finished`` for vLLM 0.9.2's facade; 0.3.1 added both).

For each call ``x.m(...)`` in a module of the analysed vLLM that imports the
subject, ``x`` is evaluated; for each value that is an instance of an
analysed class of the subject whose whole MRO is analysed (or from the
standard library) and which has no ``__getattr__``, a missing ``m`` is
reported at the class, with vLLM's call as the path. A call the function
guards with ``hasattr``/``getattr`` on the same object is a version gate and
left alone.
"""

from __future__ import annotations

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.conforms_fields import asked_objects, members_known
from kvflowmap.check.kinds.conforms_members import known_member
from kvflowmap.check.model import Finding


def calling_modules(ctx: CheckContext) -> list[str]:
    """Modules of the analysed vLLM that import from the subject's packages
    (the hosts ``sources.hosts`` marks, and any other context module)."""
    table = ctx.model.table
    tops = {m.split(".")[0] for m, sf in table.files.items() if sf.subject and not sf.host}
    # vLLM as the subject has no package to call into (its own modules
    # calling each other are the other member checks' business)
    return sorted(m for m, sf in table.files.items() if (sf.host or not sf.subject)
                  and m.split(".")[0] not in tops and m in ctx.model.facts and any(
                      (i.module or "").split(".")[0] in tops for i in ctx.model.facts[m].imports))


def check_called_members(ctx: CheckContext, module: str) -> list[Finding]:
    """Calls in ``module`` (context code) of members a subject class lacks."""
    ff = ctx.model.facts[module]
    asked = asked_objects(ff, ("hasattr", "getattr"))
    out: list[Finding] = []
    seen: set[tuple[str, str]] = set()
    for c in sorted(ff.calls, key=lambda c: (c.line, c.col)):
        base, _, attr = (c.callee or "").rpartition(".")
        if not base or "(" in base or attr.startswith("__") or (c.scope, base) in asked:
            continue
        for kind, cls in ctx.values.eval((module, c.scope), base):
            if kind != "inst" or (cls, attr) in seen or not members_known(ctx, cls) or \
                    known_member(ctx, ctx.classes.mro(cls), attr):
                continue
            seen.add((cls, attr))
            fact = ctx.classes.class_fact(cls)
            where = f"{module}.{c.scope}" if c.scope else module
            label = ctx.where(module)[1] or "the analysed vLLM"
            out.append(ctx.finding(
                cls, fact.line if fact else 0,
                f"{cls.rpartition('.')[2]} has no '{attr}', which {label} calls on it "
                f"({c.callee} in {c.scope or module}): AttributeError where vLLM calls it",
                path=(ctx.step(where, c.line, f"vLLM calls {attr}() on a "
                               f"{cls.rpartition('.')[2]}"),),
                anchor=f"called-member:{attr}"))
    return out

