"""Attributes that background work changes while the connector runs.

A test of one is an outcome, not configuration: ``if not self.is_healthy:
return`` reads what a heartbeat thread flips (``self._health_event.clear()``),
so the branch is the connector's failure path and an id it leaves with is
lost; ``if not self.is_kv_writer: return`` reads a role fixed when the
connector was built, a decision (``decisions.config_test``). Found by
structure: an event (``self.X = threading.Event()``), ``self.X = ...`` in code
only threads, executor tasks and callbacks run, ``self.X.set()`` / ``.clear()``
there, and the ``@property`` methods that read such an attribute.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kvflowmap.lifecycle.view import FnView

# methods that flip a flag object in place (``threading.Event``)
_FLIPS = ("set", "clear")
_FLAGS = ("Event",)


def _self_attr(chain: str | None) -> str | None:
    """``X`` of ``self.X`` or ``self.X.more``."""
    if not chain or not chain.startswith("self."):
        return None
    return chain.split(".")[1] or None


def runtime_attrs(fns: Mapping[str, FnView], background: Iterable[str]) -> frozenset[str]:
    """Names of ``self`` attributes that background code assigns or flips,
    and of the properties that read one."""
    # a flag built to be flipped by another thread (``threading.Event()``)
    changed = {name for fn in fns.values() for a in fn.all_assigns
               if a.target.count(".") == 1 and (name := _self_attr(a.target))
               and (a.value or "").removesuffix("()").rpartition(".")[2] in _FLAGS}
    for fqn in sorted(background):
        fn = fns.get(fqn)
        if fn is None:
            continue
        for a in fn.all_assigns:
            if a.target.count(".") == 1 and (name := _self_attr(a.target)):
                changed.add(name)
        for c in fn.all_calls:
            callee = c.callee or ""
            if callee.rpartition(".")[2] in _FLIPS and callee.count(".") == 2 and \
                    (name := _self_attr(callee)):
                changed.add(name)
    if not changed:
        return frozenset()
    props = [fn for fn in fns.values()
             if fn.cls and any(d.rpartition(".")[2] == "property" for d in fn.fact.decorators)]
    for fn in props:
        read = {r.attr for r in fn.reads if r.base == "self"} | {
            n for c in fn.all_calls if (n := _self_attr(c.callee))}
        if read & changed:
            changed.add(fn.name)
    return frozenset(changed)
