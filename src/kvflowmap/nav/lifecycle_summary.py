"""What ``kvflowmap lifecycle`` shows: request ids through each connector package.

Built from ``lifecycle.model.Lifecycle`` (no rendering here): per package its
request-keyed containers with the sites that add to, remove from and reset
them, and per class the functions on the hook paths (``Lifecycle.sides``)
with the containers they touch, where they hand ids to, and the reports the
ids reach. A report is a function named like ``get_finished`` (or a method of
a report channel of the protocol); it reads a container when the container's
attribute name appears in one of its statements.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only: a warm ``lifecycle`` decodes the stored rows
    # without loading the lifecycle model (and LibCST behind it)
    from kvflowmap.lifecycle.containers import Container
    from kvflowmap.lifecycle.model import ContainerInfo
    from kvflowmap.lifecycle.model import Lifecycle
    from kvflowmap.lifecycle.view import FnView

_WHOLE = re.compile(r"self\.(\w+)(?:\.copy\(\))?")
REPORT_NAMES = frozenset({"get_finished", "get_transfer_results",
                          "get_block_ids_with_load_errors"})
HAND_KINDS = ("handover", "spawn", "return")


@dataclass(frozen=True)
class SiteRow:
    """One add/remove/reset of a container: the function and its line."""

    function: str  # qualified name inside its module (``Cls.meth``)
    line: int
    module: str = ""  # the function's module ("" when it is not an analysed function)


@dataclass(frozen=True)
class ContainerRow:
    """A request-keyed container of a package."""

    label: str
    owner: str
    attr: str
    adds: tuple[SiteRow, ...]
    removes: tuple[SiteRow, ...]
    resets: tuple[SiteRow, ...]
    reported_by: tuple[str, ...]  # report functions reading it (``Cls.get_finished``)


@dataclass(frozen=True)
class Hand:
    """An id handed on: to a callee (handover), a spawned task, or the caller."""

    kind: str  # handover | spawn | return
    target: str  # callee chain; "" for return
    line: int


@dataclass(frozen=True)
class FunctionRow:
    """A function on a hook path and how the ids it sees move."""

    name: str
    qualname: str
    line: int
    sides: tuple[str, ...]
    adds: tuple[str, ...]
    removes: tuple[str, ...]
    resets: tuple[str, ...]
    hands: tuple[Hand, ...]
    reports: tuple[str, ...]


@dataclass(frozen=True)
class ClassRows:
    """The functions of one class (or module, for module-level functions)."""

    owner: str  # class or module FQN
    is_class: bool
    functions: tuple[FunctionRow, ...]


@dataclass(frozen=True)
class PackageLifecycle:
    """Containers and hook functions of one top-level connector package."""

    package: str
    containers: tuple[ContainerRow, ...] = ()
    classes: tuple[ClassRows, ...] = field(default_factory=tuple)


def _package(dotted: str) -> str:
    return dotted.partition(".")[0]


def _qualname(lc: Lifecycle, fqn: str) -> str:
    fn = lc.functions.get(fqn)
    return fn.fact.qualname if fn is not None else fqn


def _site(lc: Lifecycle, fqn: str, line: int) -> SiteRow:
    fn = lc.functions.get(fqn)
    return SiteRow(_qualname(lc, fqn), line, fn.module if fn is not None else "")


def _report_names(lc: Lifecycle) -> set[str]:
    return set(REPORT_NAMES) | {m for c in lc.spec.channels for m in c.methods}


def _report_functions(lc: Lifecycle) -> list[FnView]:
    names = _report_names(lc)
    return [fn for _, fn in sorted(lc.functions.items()) if fn.name in names]


def _chain_tails(fn: FnView) -> set[str]:
    """The last attribute of every name or chain in ``fn``'s statements."""
    out = set()
    for s in fn.stmts:
        for n in s.names:
            out.add(n.replace("[]", "").replace("()", "").rpartition(".")[2])
    return out


def _helper_readers(lc: Lifecycle) -> dict[Container, tuple[str, ...]]:
    """Container -> the report functions (qualnames) that call, up to three
    calls away, a method of the container's class (or a base or subclass)
    that names it and hands a value back: the worker's ``get_finished``
    reports what its thread's ``get_and_clear_finished_requests`` copies out
    of ``self.finished_requests``."""
    classes = lc.classes
    out: dict[Container, set[str]] = {}
    by_attr: dict[str, list[Container]] = {}
    for c in lc.containers:
        by_attr.setdefault(c.attr.rpartition(".")[2], []).append(c)
    for fn in _report_functions(lc):
        for cls, tail in _returned_tails(lc, fn):
            for c in by_attr.get(tail, ()):
                if classes.is_class(c.owner) and classes.related(c.owner, cls):
                    out.setdefault(c, set()).add(fn.fact.qualname)
    return {c: tuple(sorted(v)) for c, v in out.items()}


def _returned_tails(lc: Lifecycle, fn: FnView, depth: int = 3) -> set[tuple[str, str]]:
    """``(class, attribute)`` per attribute named by a method the report
    function ``fn`` calls (up to ``depth`` calls away) that hands a value
    back, with the method's class."""
    out: set[tuple[str, str]] = set()
    names = _report_names(lc)
    seen, frontier = {fn.fqn}, [fn]
    for _ in range(depth):
        nxt = []
        for f in frontier:
            for c in f.all_calls:
                for t in lc.effects.calls.resolve(f.ctx, c):
                    h = lc.functions.get(t.fqn)
                    if t.external or h is None or t.fqn in seen or h.name in names:
                        continue  # a report function the facade calls is listed itself
                    seen.add(t.fqn)
                    nxt.append(h)
                    if h.self_cls:
                        out |= {(h.self_cls, a) for a in _returned_attrs(h)}
        frontier = nxt
    return out


def _self_attr(chain: str | None) -> str | None:
    """``X`` of ``self.X`` or its copy ``self.X.copy()``: the whole
    container, not an element taken out (``self.X.pop(k)``); else None."""
    m = _WHOLE.fullmatch(chain or "")
    return m.group(1) if m else None


def _returned_attrs(h: FnView) -> set[str]:
    """The ``self`` attributes whose contents ``h`` returns: ``return
    self.X``, or a local bound from it (``done = self.X.copy()``; the swap
    ``done = self.X`` then ``self.X = set()``). A value only computed from
    it (``return rid in self.X``) is not its contents."""
    bound: dict[str, str] = {}
    for a in h.all_assigns:
        attr = _self_attr(a.origin) or _self_attr(a.value)
        if attr and a.target.isidentifier():
            bound[a.target] = attr
    out = set()
    for r in h.all_returns:
        for e in (r.elements or (r.value,)):
            e = (e or "").strip()
            attr = _self_attr(e) or bound.get(e)
            if attr:
                out.add(attr)
    return out


def _readers(lc: Lifecycle) -> dict[Container, tuple[str, ...]]:
    """Container -> the report functions (qualnames) of its package whose
    statements name its attribute; those of the owner's own class hierarchy
    when there are any (``_reqs_to_send`` of a push worker is not read by the
    pull worker's ``get_finished``)."""
    classes = lc.effects.values.classes
    reports = [(fn, _chain_tails(fn)) for fn in _report_functions(lc)]
    out: dict[Container, tuple[str, ...]] = {}
    for c in lc.containers:
        tail, pkg = c.attr.rpartition(".")[2], _package(c.owner)
        found = [fn for fn, tails in reports if _package(fn.module) == pkg and tail in tails]
        own = set(classes.mro(c.owner)) if classes.is_class(c.owner) else {c.owner}
        related = [fn for fn in found if fn.cls and (
            fn.cls in own or c.owner in classes.mro(fn.cls))]
        out[c] = tuple(sorted({fn.fact.qualname for fn in related or found}))
    return out


def _inherited_name(lc: Lifecycle, fqn: str) -> tuple[str, str]:
    """(qualname, module) of a method of a vLLM class."""
    fn = lc.inherited_fns[fqn]
    return fn.fact.qualname, fn.module


def _container_row(lc: Lifecycle, owner: str, parts: list[Container],
                   readers: dict[Container, tuple[str, ...]],
                   via_helpers: dict[Container, tuple[str, ...]],
                   queue_takes: dict[tuple[str, str], list[tuple[str, int]]],
                   inherited: dict[str, list[ContainerInfo]]) -> ContainerRow:
    """The row of ``owner``'s container ``parts[0].attr``, gathered from the
    containers ``parts`` (those of ``owner`` and of its bases) with the sites
    that act on an ``owner`` object (the methods its MRO runs). ``queue_takes``
    (``lifecycle.handoffs.queue_takes``) adds a queue's ``get()`` sites to its
    removals, and ``inherited`` (attribute -> ``model.inherited_containers``)
    the sites of vLLM's methods that run on an ``owner`` object."""
    mro = set(lc.classes.mro(owner)) if lc.classes.is_class(owner) else set()
    attr = parts[0].attr
    # the queue takes of this object's classes and of those deriving from them
    kin = mro | {k for c in parts if lc.classes.is_class(c.owner)
                 for k in lc.classes.all_subclasses(c.owner)}
    takes: dict[str, list[tuple[str, int]]] = {}
    for (cls, a), found in queue_takes.items():
        if cls in kin or cls in {c.owner for c in parts}:
            takes.setdefault(a, []).extend(found)

    def acts(fqn: str) -> bool:
        fn = lc.functions.get(fqn)
        return not mro or fn is None or not fn.cls or fn.cls in mro

    def sites(kind: str) -> tuple[SiteRow, ...]:
        found = {_site(lc, s.fqn, s.line) for c in parts
                 for s in lc.containers[c].of_kind(kind) if acts(s.fqn)}
        found |= {SiteRow(qual, s.line, module) for c in inherited.get(attr, ())
                  if c.container.owner in mro for s in c.of_kind(kind)
                  if lc.runs_inherited(s.fqn, owner)
                  for qual, module in [_inherited_name(lc, s.fqn)]}
        if kind == "remove":  # a queue's ``get()`` takes an item out
            found |= {_site(lc, fqn, line) for c in parts
                      for fqn, line in takes.get(c.attr, ()) if acts(fqn)}
        return tuple(sorted(found, key=lambda r: (r.function, r.line, r.module)))

    # a report function of a sibling class reads another object's container
    names = {k.rpartition(".")[2] for k in mro}
    read = {r for c in parts for r in readers.get(c, ())
            if not names or "." not in r or r.rpartition(".")[0] in names}
    # through a helper: the report function of a class of this object, or of
    # an unrelated one (the worker whose thread holds it), never a sibling's
    siblings = {k.rpartition(".")[2] for b in mro for k in lc.classes.all_subclasses(b)} - names
    read |= {r for c in parts for r in via_helpers.get(c, ())
             if r.rpartition(".")[0] not in siblings}
    return ContainerRow(f"{owner.rpartition('.')[2]}.{attr}", owner, attr, sites("add"),
                        sites("remove"), sites("reset"), tuple(sorted(read)))


def _per_object(lc: Lifecycle) -> list[tuple[str, list[Container]]]:
    """(owner, its containers) per row: one per container, except for an
    attribute that a class and its subclasses both touch (NIXL's
    ``_recving_transfers``, added to by the pull worker and removed from by
    the base): a row per subclass without subclasses, gathering the base's
    sites and its own, since each such object holds its own container."""
    classes = lc.classes
    by_attr: dict[str, list[Container]] = {}
    for c in lc.containers:
        by_attr.setdefault(c.attr, []).append(c)

    def derives(sub: Container, base: Container) -> bool:
        return classes.is_class(sub.owner) and classes.is_class(base.owner) and \
            base.owner in classes.mro(sub.owner)[1:]

    out: list[tuple[str, list[Container]]] = []
    for c in sorted(lc.containers):
        kin = by_attr[c.attr]
        if any(derives(c, o) for o in kin):
            continue  # the row of a class below the topmost one holds it
        if not any(derives(o, c) for o in kin):
            out.append((c.owner, [c]))
            continue
        for leaf in sorted(k for k in classes.all_subclasses(c.owner)
                           if not classes.subclasses.get(k)):
            mro = classes.mro(leaf)
            out.append((leaf, [o for o in kin if o.owner in mro]))
    return out


def _function_row(lc: Lifecycle, fqn: str, readers: dict[Container, tuple[str, ...]]) \
        -> FunctionRow:
    fn = lc.functions[fqn]
    touched: dict[str, set[str]] = {"add": set(), "remove": set(), "reset": set()}
    reached: set[str] = set()
    hands: set[Hand] = set()
    for e in lc.effects_of(fqn):
        if e.kind in touched and e.container is not None and e.container in lc.containers:
            touched[e.kind].add(e.container.label)
            if e.kind == "add":
                reached.update(readers.get(e.container, ()))
        elif e.kind in HAND_KINDS:
            hands.add(Hand(e.kind, e.target, e.line))
    return FunctionRow(
        name=fn.name, qualname=fn.fact.qualname, line=fn.fact.line,
        sides=tuple(sorted(lc.sides.get(fqn, ()))),
        adds=tuple(sorted(touched["add"])), removes=tuple(sorted(touched["remove"])),
        resets=tuple(sorted(touched["reset"])),
        hands=tuple(sorted(hands, key=lambda h: (h.line, h.kind, h.target))),
        reports=tuple(sorted(reached)))


def summarise(lc: Lifecycle) -> list[PackageLifecycle]:
    """One ``PackageLifecycle`` per top-level package with containers or hooks."""
    from kvflowmap.lifecycle.handoffs import queue_takes
    from kvflowmap.lifecycle.model import inherited_containers

    inherited: dict[str, list[ContainerInfo]] = {}
    for c, info in inherited_containers(lc).items():
        inherited.setdefault(c.attr, []).append(info)
    readers = _readers(lc)
    via_helpers = _helper_readers(lc)
    takes = queue_takes(lc.functions)
    reached_by = {c: tuple(sorted({*readers.get(c, ()), *via_helpers.get(c, ())}))
                  for c in {*readers, *via_helpers}}
    containers: dict[str, list[ContainerRow]] = {}
    for holder, parts in _per_object(lc):
        containers.setdefault(_package(holder), []).append(
            _container_row(lc, holder, parts, readers, via_helpers, takes,
                           inherited))
    owners: dict[str, dict[tuple[str, bool], list[FunctionRow]]] = {}
    for fqn in sorted(lc.sides):
        fn = lc.functions.get(fqn)
        if fn is None:
            continue
        owner = (fn.cls or fn.module, fn.cls is not None)
        owners.setdefault(_package(fn.module), {}).setdefault(owner, []).append(
            _function_row(lc, fqn, reached_by))
    out = []
    for pkg in sorted(set(containers) | set(owners)):
        classes = tuple(ClassRows(o, is_cls, tuple(sorted(rows, key=lambda r: (r.line, r.name))))
                        for (o, is_cls), rows in sorted(owners.get(pkg, {}).items()))
        out.append(PackageLifecycle(pkg, tuple(containers.get(pkg, ())), classes))
    return out
