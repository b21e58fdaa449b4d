"""Request-keyed containers: where a connector keeps per-request state.

A container is named by its owner (the class whose instances hold it, or the
module of a module-level registry) and its attribute. ``self._x`` in a method
of ``W`` is ``W._x``; ``self._tracker._done`` is ``Tracker._done`` when the
type of ``self._tracker`` is known, else ``W._tracker._done``; ``_REG`` at
module level is ``mod._REG``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.facts import AssignFact, Stmt
from kvflowmap.lifecycle.view import FnView
from kvflowmap.model.values import Evaluator

ADD_OPS = frozenset({"setitem", "add", "append", "appendleft", "extend", "update",
                     "setdefault", "insert", "put", "put_nowait"})
REMOVE_OPS = frozenset({"pop", "popitem", "popleft", "discard", "remove", "delitem",
                        "get_nowait"})
RESET_OPS = frozenset({"clear"})
# How an empty builtin container is written: ``set()``, ``{}``, ``defaultdict(list)``,
# and typed, ``set[str]()`` (the facts keep it as ``set[]()``).
_EMPTY_CALLS = ("set", "dict", "list", "deque", "defaultdict", "OrderedDict",
                "collections.defaultdict", "collections.OrderedDict", "collections.deque")
EMPTY_CONTAINERS = frozenset({f"{c}()" for c in _EMPTY_CALLS} |
                             {f"{c}[]()" for c in _EMPTY_CALLS} | {"{}", "[]"})


def makes_defaultdict(value: str | None) -> bool:
    """An assigned value that is a ``defaultdict`` (``defaultdict(set)``,
    ``collections.defaultdict[K, V](int)``): reading a missing key adds it."""
    return (value or "").startswith(("defaultdict", "collections.defaultdict"))


@dataclass(frozen=True, order=True)
class Container:
    """A request-keyed container: ``owner`` (class or module FQN) and ``attr``."""

    owner: str
    attr: str

    @property
    def label(self) -> str:
        return f"{self.owner.rpartition('.')[2]}.{self.attr}"


def container_of(chain: str, fn: FnView, values: Evaluator) -> Container | None:
    """The container a chain names inside ``fn``; None for locals, and for
    what a call hands back (``self.reqs.setdefault(k, m).__dict__``, or the
    list ``self.reqs.setdefault(k, []).append(x)`` appends to: no attribute
    of any object is called that; the ``setdefault`` itself is the add)."""
    if "()" in chain:  # ``self.reqs.setdefault(k, []).append(x)``: the call's value
        return None
    parts = chain.replace("[]", "").replace("()", "").split(".")
    if not parts or not parts[0]:
        return None
    head = parts[0]
    cls = fn.self_cls
    if head in ("self", "cls") and cls and len(parts) >= 2:
        if len(parts) == 2:
            return Container(cls, parts[1])
        owner = owner_type(fn, ".".join(parts[:-1]), values)
        if owner:
            return Container(owner, parts[-1])
        return Container(cls, ".".join(parts[1:]))
    if len(parts) == 1 and _is_module_global(fn, head):
        return Container(fn.module, head)
    return None


def owner_type(fn: FnView, chain: str, values: Evaluator) -> str | None:
    """The analysed class of an instance chain such as ``self._tracker``."""
    found = sorted(fqn for kind, fqn in values.eval(fn.ctx, chain)
                   if kind == "inst" and fqn in values.model.defs)
    return found[0] if len(found) == 1 else None


def is_method_call(chain: str, op: str, fn: FnView, values: Evaluator) -> bool:
    """``self.client.discard(rid)`` where ``self.client`` is an object of an
    analysed class that defines ``discard``: a call of that method (the
    call graph follows it into the class's own state), not an operation on
    a container called ``client``. A class deriving from a builtin
    container without overriding the method stays a container."""
    owner = owner_type(fn, chain, values)
    return owner is not None and values.classes.find_member(owner, op) is not None


def _is_module_global(fn: FnView, name: str) -> bool:
    local = any(a.target == name for a in fn.all_assigns) or name in fn.param_names
    if local:
        return False
    return any(a.scope == "" and a.target == name for a in fn.facts.assigns)


# Builtins and methods that read without changing anything or handing an id on.
PURE = frozenset({"len", "str", "repr", "int", "float", "bool", "hash", "isinstance", "format",
                   "type", "id", "print", "min", "max", "any", "all", "sorted", "list", "set",
                   "tuple", "dict", "getattr", "hasattr", "next", "iter", "enumerate", "zip",
                   "sum", "abs", "round", "range", "reversed", "callable", "divmod"})
READ_METHODS = frozenset({"get", "__contains__", "count", "index", "keys", "values", "items",
                           "startswith", "endswith", "format", "encode", "decode", "split",
                           "join", "copy", "issubset", "issuperset", "intersection",
                           "difference", "union", "empty", "qsize"})


def assigns_empty(a: AssignFact) -> bool:
    """``x = set()``, ``x = {}``: an assignment of an empty builtin container
    (not ``x = set(other)``, whose value is also ``set()`` but whose origin,
    the collection copied, is not)."""
    if (a.value or a.literal or "").replace(" ", "") not in EMPTY_CONTAINERS:
        return False
    origin = (a.origin or "").replace(" ", "")
    return not origin or origin in EMPTY_CONTAINERS


def swaps_out(fn: FnView, s: Stmt, chain: str) -> bool:
    """``s`` is a swap ``done, <chain> = <chain>, set()`` (``swapped``)."""
    return swapped(fn, s) == chain


def swapped(fn: FnView, s: Stmt) -> str | None:
    """The chain a swap ``done, self._x = self._x, set()`` takes the contents
    out of (into a local) and binds an empty container to, or None. The facts
    keep no value per position of a tuple assignment, so the shape is read
    off the statement: two unpacked targets, a local and the chain, and an
    empty builtin container made in it."""
    assigns = fn.assigns(s)
    if len(assigns) != 2 or any(a.position is None or a.aug for a in assigns):
        return None
    chains = [a.target for a in assigns if not a.target.isidentifier()]
    if len(chains) != 1 or not any((c.callee or "") in _EMPTY_CALLS and not c.args
                                   and not c.kwargs for c in fn.calls(s)):
        return None
    return chains[0]


def self_attr(chain: str) -> str | None:
    """``X`` for ``self.X`` and ``self.X[]...`` (a container chain), else None."""
    if not chain.startswith("self."):
        return None
    head = chain[5:].split("[")[0]
    return head if head and "." not in head and head.isidentifier() else None


def resets(fn: FnView, s: Stmt) -> list[tuple[str, int]]:
    """(attribute, line) of each ``self.X`` statement ``s`` empties:
    ``self.X.clear()`` or ``self.X = set()``."""
    out = [(attr, op.line) for op in fn.containers(s) if op.op in RESET_OPS
           and (attr := self_attr(op.container)) and op.container == f"self.{attr}"]
    out += [(attr, a.line) for a in fn.assigns(s) if not a.aug and assigns_empty(a)
            and (attr := self_attr(a.target)) and a.target == f"self.{attr}"]
    return out
