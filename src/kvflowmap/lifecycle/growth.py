"""State a connector's hooks fill and never drain, although the code has a
drain for it.

A helper object often keeps what each step creates until someone empties it:
a device keeps the CUDA events it recorded (``self.events.append(event)``)
until ``destroy_event_handles()`` clears them, a store keeps the KV events
it produced until ``take_events()`` hands them over. A connector class whose
hooks reach the fill and never the drain lets the container grow every step
for the life of the process: uc-manager 0.5.0's direct connector recorded a
dump event in ``wait_for_save`` each step and never destroyed them (its
layer-wise sibling did, in its own ``wait_for_save``).

By structure, per connector class (every analysed class deriving from the
protocol's base, by the members its MRO resolves to): what its hooks make
run (calls, threads, executor tasks, queue hand-offs); in that code, an
addition (``append``, ``add``, ``x[k] = v``...) to a ``self.X`` container of
some class; the container is drained somewhere in the subject (a ``pop``,
``remove``, ``clear``, or rebinding it empty outside ``__init__``, in a
method of that class or of a class related to it) and nowhere in what the
connector's hooks make run. Containers keyed by request ids are
``kvc-request-state-balanced``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kvflowmap.lifecycle.containers import ADD_OPS, PURE, REMOVE_OPS, RESET_OPS, self_attr
from kvflowmap.lifecycle.view import FnView

# additions by key: writing a key again replaces its value
_KEYED_ADDS = frozenset({"update", "setdefault"})
# constructors and set-up fill once; they are no step
SETUP = frozenset({"__init__", "__post_init__", "register_kv_caches", "setup", "_setup",
                    "initialize"})


@dataclass(frozen=True)
class Undrained:
    """Hook ``hook`` of the connector classes ``connectors`` makes ``fqn``
    add to ``self.{attr}`` (a ``owner``) at ``line``; ``drain`` drains it at
    ``drain_line``, and nothing those classes' hooks run does."""

    hook: str
    connectors: tuple[str, ...]
    fqn: str
    line: int
    owner: str
    attr: str
    drain: str
    drain_line: int


Box = tuple[str, str]  # (class of the method touching self.X, X)


def fills(fn: FnView, keyed: Callable[[FnView, str | None], bool]) -> list[tuple[str, int]]:
    """``(X, line)`` of each addition to a ``self.X`` container in ``fn``
    of an element ``fn`` makes (a local it binds, not a parameter), not a
    request id (``keyed`` says which are)."""
    if fn.cls is None or fn.name in SETUP:
        return []
    out = []
    for op in fn.all_containers:
        attr = self_attr(op.container)
        if op.op not in ADD_OPS or attr is None or op.container != f"self.{attr}":
            continue
        if op.op == "setitem" or op.op in _KEYED_ADDS:
            continue  # a key may come back (a layer's slot): no growth to judge
        element = next((c.args[0] for c in fn.all_calls if c.line == op.line and c.args
                        and c.callee == f"self.{attr}.{op.op}"), op.key)
        # something new enters: a local the function makes (a recorded event, a
        # measurement), not a parameter handed back (a slot returned to a pool)
        made = bool(element) and element not in fn.param_names and any(
            a.target == element and a.line <= op.line for a in fn.all_assigns)
        if made and not keyed(fn, element):
            out.append((attr, op.line))
    return out


def drains(fn: FnView) -> list[tuple[str, int]]:
    """``(X, line)`` of each removal from or emptying of ``self.X`` in ``fn``
    (a rebinding to empty outside the constructor counts; any other
    rebinding hands the old one on)."""
    if fn.cls is None:
        return []
    out = [(attr, op.line) for op in fn.all_containers
           if op.op in REMOVE_OPS | RESET_OPS and (attr := self_attr(op.container)) is not None]
    if fn.name not in ("__init__", "__post_init__"):
        out += [(attr, a.line) for a in fn.all_assigns
                if (attr := self_attr(a.target)) and a.target == f"self.{attr}"]
    return out


def escapes(fn: FnView) -> set[str]:
    """``X`` of each ``self.X`` ``fn`` hands whole to a call that is no pure
    builtin (``process(self.events)``): that code may drain it."""
    return {attr for c in fn.all_calls for arg in c.args
            if arg and (attr := self_attr(arg)) and arg == f"self.{attr}"
            and (c.callee or "") not in PURE}


def undrained(connectors: Iterable[tuple[str, list[str]]], fns: dict[str, FnView],
              runs_from: Callable[[str, list[str]], set[str]],
              related: Callable[[str, str], bool],
              keyed: Callable[[FnView, str | None], bool],
              per_call: Callable[[str], bool]) -> list[Undrained]:
    """Per hook implementation and fill site, the connector classes (``(class,
    its hook implementations)``, in the order given) whose hooks make it run,
    of a container another connector class's hooks drain and nothing their
    own hooks drain (see the module docstring). ``runs_from(cls, starts)`` is
    what ``starts`` make run on an instance of ``cls``; ``per_call(owner)``
    says the hooks make instances of class ``owner`` as they run (a step's
    metadata, a request's tracker): those do not live on."""
    todo = list(connectors)
    runs = {cls: {h: runs_from(cls, [h]) for h in hooks} for cls, hooks in todo}
    # per connector class, where its hooks drain: (class, X) -> (fqn, line)
    ran: dict[str, dict[Box, tuple[str, int]]] = {}
    for cls, _ in todo:
        mine: dict[Box, tuple[str, int]] = {}
        for f in sorted({f for run in runs[cls].values() for f in run}):
            fn = fns.get(f)
            if fn is None or fn.cls is None:
                continue
            for attr, line in drains(fn):
                mine.setdefault((fn.cls, attr), (f, line))
            for attr in escapes(fn):
                mine.setdefault((fn.cls, attr), (f, 0))
        ran[cls] = mine

    def drained_by(cls: str, owner: str, attr: str) -> tuple[str, int] | None:
        return next((at for (k, a), at in sorted(ran[cls].items())
                     if a == attr and related(k, owner)), None)

    out: dict[tuple[str, str, int], Undrained] = {}
    for cls, hooks in todo:
        seen: set[Box] = set()
        for hook in hooks:
            if hook in fns and fns[hook].name in SETUP:
                continue  # set-up fills once (what it starts drains, above)
            for f in sorted(runs[cls][hook]):
                filler = fns.get(f)
                if filler is None or filler.cls is None or per_call(filler.cls):
                    continue  # an object made per call (a step's metadata) does not grow
                owner = filler.cls
                for attr, line in fills(filler, keyed):
                    if (owner, attr) in seen:
                        continue
                    seen.add((owner, attr))
                    if drained_by(cls, owner, attr) is not None:
                        continue
                    # a sibling connector's hooks drain it: the container is meant to be
                    sibling = next((at for k, _ in todo if k != cls
                                    and (at := drained_by(k, owner, attr)) and at[1]), None)
                    if sibling is None:
                        continue
                    was = out.get((hook, f, line))
                    out[(hook, f, line)] = Undrained(
                        hook, (*was.connectors, cls) if was else (cls,), f, line, owner, attr,
                        sibling[0], sibling[1])
    return [out[k] for k in sorted(out)]
