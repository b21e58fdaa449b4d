"""Conservation per container: ids that enter a request-keyed container must
be able to leave it, and one a report or a drain reads must be filled.

Checked per *leaf* class (an analysed class no other analysed class derives
from): the code that runs on its instances is the members its MRO resolves
to, so a sibling subclass's removal does not count for it. For each
``self.X`` those members touch:

- ``never-removed``: ids are added (``self.X[rid] = ...``, ``.add(rid)``) and
  nothing can take them out: no ``pop``/``del``/``discard``/``remove``/
  ``clear``, no reassignment outside ``__init__``, no augmented assignment,
  and ``self.X`` is never handed to other code (passed to a call, aliased,
  returned, or named through another object). Every request leaves an entry
  behind for the life of the process, and an id reused after preemption
  still looks pending.
- ``never-filled``: ids are taken out of ``self.X``, a report reads it, or
  the metadata builder hands it to the workers (``meta.reqs_in_batch =
  self._reqs_in_batch``), yet nothing can put one in (same escape rules). The
  hook that should record the request does not, and whatever waits on
  ``self.X`` (a report, the worker's transfer) waits forever.

A reassignment to an empty container outside ``__init__`` (``self.X =
set()`` after handing the old one on) empties it; any other reassignment
may fill it and counts as a hand-off.

Only containers the class initialises itself with an empty builtin
container (``{}``, ``set()``, ``defaultdict(list)``, an unbounded ``deque()``)
are judged: a custom or bounded container manages its own contents.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kvflowmap.facts import AssignFact
from kvflowmap.lifecycle.containers import (ADD_OPS, EMPTY_CONTAINERS, PURE, READ_METHODS,
                                           REMOVE_OPS, RESET_OPS, assigns_empty,
                                           makes_defaultdict, self_attr)
from kvflowmap.lifecycle.effects import is_logging
from kvflowmap.lifecycle.view import FnView
from kvflowmap.model.classes import ClassIndex

_INITS = frozenset({"__init__", "__post_init__", "setup", "_setup", "reset", "initialize"})


def is_init(name: str) -> bool:
    """A method that sets the instance up (``__init__``, ``_init_state``)."""
    return name in _INITS or name.startswith(("_init_", "init_"))
_LEAVE_METHODS = REMOVE_OPS | RESET_OPS | frozenset({"difference_update",
                                                     "intersection_update"})


@dataclass(frozen=True)
class Use:
    """One place a member of the class touches ``self.X``."""

    fqn: str
    line: int
    what: str  # add | remove | clear | read | init | escape | forward


# a leaf class's members (and the defs nested in them) and, per ``self``
# attribute, their uses of it in source order (``leaf_uses``)
LeafUses = tuple[list[FnView], dict[str, list[Use]]]


@dataclass(frozen=True)
class Unbalanced:
    """A container of ``cls`` whose ids cannot leave (or enter)."""

    cls: str
    attr: str
    how: str  # never-removed | never-filled
    site: Use  # the first add (never-removed) or the first take/read (never-filled)
    uses: tuple[Use, ...]
    # set when only one process side leaks: the class serves both, and its
    # removals all run in the other process (``scheduler`` or ``worker``)
    side: str = ""


def unbalanced(fns: dict[str, FnView], classes: ClassIndex, per_leaf: Mapping[str, LeafUses],
               keyed: set[str], owed_attrs: set[str], id_removals: dict[tuple[str, str], int],
               live: Callable[[str], bool] = lambda fqn: True,
               sides: Mapping[str, frozenset[str]] | None = None) -> list[Unbalanced]:
    """Every unbalanced container of every leaf class of the subject.

    ``per_leaf``: ``leaf_uses`` of the subject; ``keyed``: attribute names ids
    enter by key or element (``IdState.keyed_attrs``);
    ``owed_attrs``: attribute names report hooks read; ``id_removals``: per
    (function, attribute), removals keyed by an id (a container whose only fill
    was lost still shows them); ``live(fqn)``: the function runs for the
    connector (a removal, or a hand-off of the container, in a method nothing
    calls takes nothing out); ``sides``: per function, the process
    sides (``scheduler``, ``worker``) whose hooks reach it (a class that
    serves both has one instance per process, so each side must balance on
    its own)."""
    foreign, duck = _foreign_attrs(fns)
    importers = _importers(fns)
    out: list[Unbalanced] = []
    leaves = sorted(per_leaf)
    judged: dict[str, LeafUses] = {}
    adders: dict[str, set[str]] = {}  # attribute -> leaves whose members add to it
    for leaf in leaves:
        members, all_uses = per_leaf[leaf]
        # dead code takes nothing out, but only where the class runs at all
        # for the connector (code outside its reach is judged as written)
        alive = any(live(m.fqn) for m in members)
        exported = {m.fqn for m in members if _is_property(m)}
        uses = {attr: [u for u in us if not alive or u.what not in ("remove", "clear", "escape")
                       or live(u.fqn) or (u.what == "escape" and u.fqn in exported)]
                for attr, us in all_uses.items()}
        judged[leaf] = (members, uses)
        for attr, us in uses.items():
            if any(u.what == "add" for u in us):
                adders.setdefault(attr, set()).add(leaf)
    for leaf in leaves:
        members, uses = judged[leaf]
        reached = (_foreign_to(members, foreign, importers) | duck) if uses else set()
        for attr, us in sorted(uses.items()):
            if attr in reached or "escape" in {u.what for u in us}:
                continue
            if not _empty_builtin(members, attr):
                continue
            found = _judge(leaf, attr, us, keyed, owed_attrs, id_removals)
            if found is None and sides:
                found = _one_side(leaf, attr, us, keyed, sides)
            if found and found.how == "never-filled" and _sibling_state(
                    classes, leaf, us, adders.get(attr, set()) - {leaf}):
                continue
            if found:
                out.append(found)
    return out


def leaf_uses(fns: dict[str, FnView], classes: ClassIndex, builder: str = ""
              ) -> dict[str, LeafUses]:
    """Per leaf class of the subject: the functions that run on its instances
    (members its MRO resolves to, the defs nested in them) and, per ``self``
    attribute, every use they make of it in source order."""
    by_cls: dict[str, list[FnView]] = {}
    for fn in fns.values():
        if fn.cls:
            by_cls.setdefault(fn.cls, []).append(fn)
    nested = _nested(fns)
    out: dict[str, LeafUses] = {}
    for leaf in sorted(c for c in by_cls if classes.is_class(c) and not classes.subclasses.get(c)):
        members = _members(leaf, by_cls, classes, fns)
        members += [n for m in members for n in nested.get(m.fqn, ())]
        out[leaf] = (members, _uses(members, builder))
    return out


def _sibling_state(classes: ClassIndex, leaf: str, us: list[Use], fillers: set[str]) -> bool:
    """Every use of the container is in a base class that a sibling leaf
    (one of ``fillers``) shares and fills it through: the base serves both
    and this leaf simply never uses it (a pull-only queue in a push
    worker), while a leaf whose own classes take from it still counts."""
    shared = {k for f in fillers for k in classes.mro(f)}
    return bool(fillers) and all(u.fqn.rpartition(".")[0] in shared or u.what == "init"
                                 for u in us)


def _judge(cls: str, attr: str, us: list[Use], keyed: set[str], owed_attrs: set[str],
           id_removals: dict[tuple[str, str], int]) -> Unbalanced | None:
    kinds = {u.what for u in us}
    steps = tuple(u for u in us if u.what != "init")
    adds = [u for u in us if u.what == "add"]
    if adds and attr in keyed and not kinds & {"remove", "clear"}:
        return Unbalanced(cls, attr, "never-removed", adds[0], steps)
    # a drain of a container nothing fills (``while self._failed: self._failed.pop()``);
    # removals keyed by an id first
    taken = sorted((u for u in us if u.what == "remove"),
                   key=lambda u: ((u.fqn, attr) not in id_removals, u.line))
    forwards = [u for u in us if u.what == "forward"]
    if not adds and (taken or forwards or (attr in owed_attrs and "read" in kinds)):
        first = (taken or forwards or [u for u in us if u.what == "read"])[0]
        return Unbalanced(cls, attr, "never-filled", first, steps)
    return None


def _one_side(cls: str, attr: str, us: list[Use], keyed: set[str],
              sides: Mapping[str, frozenset[str]]) -> Unbalanced | None:
    """``never-removed`` on one side of a class that serves both: ids enter
    in code only one side's hooks reach, and every removal runs only for
    the other side's hooks. The scheduler's and the workers' instances are
    separate objects in separate processes, so the other side's removals
    never touch these entries. Code of unknown or both sides counts as
    able to remove on either."""
    if attr not in keyed:
        return None
    for side in ("scheduler", "worker"):
        only = frozenset({side})
        adds = [u for u in us if u.what == "add" and sides.get(u.fqn) == only]
        if not adds:
            continue
        removes = [u for u in us if u.what in ("remove", "clear")
                   and side in sides.get(u.fqn, frozenset({side}))]
        if not removes:
            steps = tuple(u for u in us if u.what != "init")
            return Unbalanced(cls, attr, "never-removed", adds[0], steps, side)
    return None


def _members(leaf: str, by_cls: dict[str, list[FnView]], classes: ClassIndex,
             fns: dict[str, FnView]) -> list[FnView]:
    """The subject functions that run on instances of ``leaf``: members its
    MRO resolves to, and the overridden ones their ``super()`` calls reach."""
    out = []
    chosen: set[str] = set()
    for k in classes.mro(leaf):
        for fn in by_cls.get(k, ()):
            method = fn.fact.qualname.split(".")
            cls_depth = len((fn.fact.class_qualname or "").split("."))
            name = method[cls_depth] if len(method) > cls_depth else fn.name
            if classes.find_member(leaf, name) == f"{k}.{name}":
                out.append(fn)
                chosen.add(f"{k}.{name}")
    # overridden methods still run when an override calls ``super().m()``
    # (the base ``__init__`` that creates the containers, above all)
    todo = list(out)
    while todo:
        fn = todo.pop()
        for c in fn.all_calls:
            callee = c.callee or ""
            if not callee.startswith("super()."):
                continue
            found = classes.find_member(leaf, callee[8:], after=fn.cls)
            if found and found not in chosen and found in fns:
                chosen.add(found)
                out.append(fns[found])
                todo.append(fns[found])
    return out


def _nested(fns: dict[str, FnView]) -> dict[str, list[FnView]]:
    """Method FQN -> the defs nested in it at any depth (callbacks and
    closures that use the method's ``self``)."""
    out: dict[str, list[FnView]] = {}
    for fqn, fn in fns.items():
        if fn.cls:
            continue
        parent = fqn.rpartition(".")[0]
        while parent and parent not in fns:
            parent = parent.rpartition(".")[0]
        while parent in fns and not fns[parent].cls:
            parent = parent.rpartition(".")[0]
        if parent in fns and fns[parent].cls:
            out.setdefault(parent, []).append(fn)
    return out


def _uses(members: list[FnView], builder: str = "") -> dict[str, list[Use]]:
    """Per attribute, every use of ``self.X`` by the members, in source order."""
    out: dict[str, list[Use]] = {}

    def use(attr: str, fn: FnView, line: int, what: str) -> None:
        out.setdefault(attr, []).append(Use(fn.fqn, line, what))

    # ``self.X = defaultdict(set)`` (or ``defaultdict[K, V](set)``): reading
    # ``self.X[rid]`` puts the key in
    auto = {attr for fn in members if is_init(fn.name) for a in fn.all_assigns
            if (attr := self_attr(a.target)) is not None and a.target == f"self.{attr}"
            and makes_defaultdict(a.value)}
    for fn in members:
        init = is_init(fn.name)
        # where the metadata builder puts what it returns: the workers read it
        handed = _metadata_lines(fn) if fn.name == builder else frozenset()
        for s in fn.stmts:
            attrs = {n.split(".")[1] for n in s.names if n.startswith("self.")
                     and n.count(".") >= 1 and n.split(".")[1]}
            if not attrs:
                continue
            handled: set[str] = set()
            for op in fn.containers(s):
                attr = self_attr(op.container)
                if attr is None:
                    continue
                handled.add(attr)
                if op.op in ADD_OPS:
                    use(attr, fn, op.line, "init" if init else "add")
                elif op.op == "clear":
                    # empties it, but takes no id out: a container only ever
                    # cleared and never read is dead state, not a drain
                    use(attr, fn, op.line, "clear")
                elif op.op in _LEAVE_METHODS or op.op == "delitem":
                    use(attr, fn, op.line, "remove")
            for a in fn.assigns(s):
                attr = self_attr(a.target) if a.target.count(".") == 1 else None
                if attr is not None and a.aug and attr in handled:
                    continue  # ``self._x -= done``: the container op above
                if attr is not None:
                    handled.add(attr)
                    use(attr, fn, a.line, "init" if init and not a.aug else
                        "clear" if not a.aug and _empty(a) else "escape")
                if a.value and (attr := self_attr(a.value)) in auto and \
                        a.value.startswith(f"self.{attr}[]") and not init:
                    handled.add(attr)
                    # ``x = self.X[rid]`` (or ``self.X[rid][w]``): a default entry
                    use(attr, fn, a.line, "add")
                elif a.value and (attr := self_attr(a.value)) is not None and \
                        a.value == f"self.{attr}":
                    # ``meta.reqs = self._reqs``: handed to the workers, or aliased
                    use(attr, fn, a.line, "forward" if a.line in handed and
                        a.target.partition(".")[0] in _returned(fn) else "escape")
            for c in fn.calls(s):
                callee = c.callee or ""
                for arg in (*c.args, *(v for _, v in c.kwargs)):
                    attr = self_attr(arg or "")
                    if attr is not None and arg == f"self.{attr}" and not (
                            is_logging(callee) or callee in PURE):
                        # ``return Meta(reqs=self._reqs)``: the metadata carries it
                        use(attr, fn, c.line, "forward" if c.line in handed and
                            not callee.startswith(("self.", "super()")) else "escape")
                recv = callee.rpartition(".")[0]
                # ``self._x[rid].extend(...)``: a method of an entry, not of
                # the container (a read of it, not a hand-off)
                attr = self_attr(recv) if callee.count(".") == 2 and not recv.endswith("]") \
                    else None
                meth = callee.rpartition(".")[2]
                if attr is not None and meth in _LEAVE_METHODS and attr not in handled:
                    use(attr, fn, c.line, "remove")  # ``difference_update``: no container op
                elif attr is not None and meth not in ADD_OPS | _LEAVE_METHODS | READ_METHODS:
                    use(attr, fn, c.line, "escape")  # a method of its own: not a builtin
            for r in fn.returns(s):
                for attr in attrs:
                    if re.search(rf"\bself\.{re.escape(attr)}\b", r.value or ""):
                        use(attr, fn, r.line, "escape")
            for attr in sorted(attrs - handled):
                use(attr, fn, s.line, "read")
    return out


def _is_property(fn: FnView) -> bool:
    """A ``@property``: read as an attribute, so no call edge shows who uses
    what it returns (a container it returns is handed out though it looks dead)."""
    return any(d.rpartition(".")[2] in ("property", "cached_property")
               for d in fn.fact.decorators)


def _empty(a: AssignFact) -> bool:
    """``self.X = set()``, ``self.X = {}``: a fresh empty builtin container (a
    display with items counts as a hand-off)."""
    return assigns_empty(a)


def _returned(fn: FnView) -> set[str]:
    """Locals the function returns (``return meta``)."""
    return {(r.value or "").strip() for r in fn.all_returns}


def _metadata_lines(fn: FnView) -> frozenset[int]:
    """Lines of the metadata builder that put something into what it returns:
    assignments to a returned local's fields, the constructor call bound to
    a returned local, and the return statements."""
    back = _returned(fn)
    lines = {r.line for r in fn.all_returns}
    lines |= {a.line for a in fn.all_assigns
              if a.target.partition(".")[0] in back and ("." in a.target or a.value)}
    return frozenset(lines)


def _empty_builtin(members: list[FnView], attr: str) -> bool:
    """The class initialises ``self.X`` to an empty, unbounded builtin container."""
    found = False
    for fn in members:
        if not is_init(fn.name):
            continue
        for a in fn.all_assigns:
            if a.target != f"self.{attr}" or a.aug:
                continue
            if a.value is None and a.literal is None:
                found = True  # a display with items, a comprehension
            elif (a.value or a.literal) in EMPTY_CONTAINERS:
                bounded = any(c.line == a.line and any(k == "maxlen" for k, _ in c.kwargs)
                              for c in fn.all_calls)
                if bounded:
                    return False
                found = True
            else:
                return False
    return found


def _foreign_attrs(fns: dict[str, FnView]) -> tuple[dict[str, set[str]], set[str]]:
    """Per module, attribute names it reaches through another object
    (``self._tracker._done``, ``worker._done``): who else fills or drains
    them is not known here. And, over all modules, the private names reached
    through a parameter or local (``transfer_manager._cached_ic[rid] = ...``
    in a helper handed the object): code that fills another class's private
    state without importing it."""
    out: dict[str, set[str]] = {}
    duck: set[str] = set()
    for fn in fns.values():
        mine = out.setdefault(fn.module, set())
        for s in fn.stmts:
            for n in s.names:
                # every name after the first object: ``self.worker.wrapper.done``
                # reaches ``wrapper`` on the worker and ``done`` on the wrapper
                parts = n.split(".")
                if len(parts) >= 3 and parts[0] == "self":
                    mine.update(parts[2:])
                elif len(parts) >= 2 and parts[0] not in ("self", "cls"):
                    mine.update(parts[1:])
                    if parts[1].startswith("_") and not parts[1].startswith("__"):
                        duck.add(parts[1])
    return out, duck


def _importers(fns: dict[str, FnView]) -> dict[str, set[str]]:
    """Per analysed module, the modules that import it (``import m``, ``from m
    import x``, ``from pkg import m``; relative imports resolved)."""
    modules = {fn.module: fn.facts for fn in fns.values()}
    out: dict[str, set[str]] = {m: {m} for m in modules}
    for m, facts in modules.items():
        for i in facts.imports:
            base = _absolute(m, i.module, i.level, facts.path)
            for target in (base, f"{base}.{i.name}" if i.name else None):
                if target in out:
                    out[target].add(m)
    return out


def _absolute(importer: str, module: str, level: int, path: str) -> str:
    """The absolute module an import names (``from ..x import y`` in ``a.b.c``
    -> ``a.x``)."""
    if not level:
        return module
    package = importer if path.endswith("__init__.py") else importer.rpartition(".")[0]
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{module}" if module else package


def _foreign_to(members: list[FnView], foreign: dict[str, set[str]],
                importers: dict[str, set[str]]) -> set[str]:
    """Names reached through other objects by the members' modules or by a
    module that imports one of them: an object of the class can only come
    from there."""
    users = set().union(*(importers.get(fn.module, {fn.module}) for fn in members))
    return set().union(*(foreign.get(m, set()) for m in users))
