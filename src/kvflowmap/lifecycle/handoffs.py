"""Queue hand-offs: work one function puts on a queue of its object, and the
functions of that object that take it off.

``wait_for_save`` puts a task on ``self._save_queue``; a thread started in
``__init__`` takes it off and saves. No call joins the two, so what the
thread does is reached from no hook by calls alone. A hand-off edge (putter
-> taker) says that the taker does the putter's work: a save thread is on
the save path, a load thread on the load path.
"""

from __future__ import annotations

from kvflowmap.lifecycle.view import FnView

PUTS = frozenset({"put", "put_nowait"})
TAKES = frozenset({"get", "get_nowait"})
# a deque (or list) per key used as a queue: ``self.X[k].append(item)`` and
# ``q = self.X.get(k)`` ... ``q.popleft()``
_KEYED_PUTS = frozenset({"append", "appendleft"})
_KEYED_TAKES = frozenset({"popleft", "pop"})


def _queue_ops(fn: FnView, methods: frozenset[str]) -> set[str]:
    """Attributes ``X`` of ``self.X.<method>(...)`` calls in ``fn``."""
    return {attr for attr, _ in _queue_op_lines(fn, methods)}


def _queue_op_lines(fn: FnView, methods: frozenset[str]) -> list[tuple[str, int]]:
    """``(X, line)`` per ``self.X.<method>(...)`` call in ``fn``."""
    out = []
    for c in fn.all_calls:
        base, _, meth = (c.callee or "").rpartition(".")
        if meth in methods and base.startswith("self.") and base.count(".") == 1:
            out.append((base.partition(".")[2], c.line))
    return out


def queue_takes(fns: dict[str, FnView]) -> dict[tuple[str, str], list[tuple[str, int]]]:
    """Per ``(class, X)``, ``(function, line)`` of each ``self.X.get()`` (or
    ``get_nowait()``) that takes an item off a queue: where what a ``put``
    handed over leaves it. A ``get(key)`` is a lookup and is left out."""
    out: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for fqn, fn in sorted(fns.items()):
        if fn.cls is None:
            continue
        keyed = _keyed_gets(fn)
        for attr, line in _queue_op_lines(fn, TAKES):
            if attr not in keyed:
                out.setdefault((fn.cls, attr), []).append((fqn, line))
    return out


def _keyed_puts(fn: FnView) -> set[str]:
    """Attributes ``X`` of ``self.X[k].append(...)`` calls in ``fn``."""
    out = set()
    for c in fn.all_calls:
        base, _, meth = (c.callee or "").rpartition(".")
        if meth in _KEYED_PUTS and base.startswith("self.") and base.endswith("[]") \
                and base.count(".") == 1 and base[5:-2].isidentifier():
            out.add(base[5:-2])
    return out


def _keyed_takes(fn: FnView) -> set[str]:
    """Attributes ``X`` of a local bound to ``self.X.get(k)`` (or ``self.X[k]``)
    that ``fn`` then takes an element off with ``popleft()`` / ``pop()``."""
    bound: dict[str, str] = {}
    for a in fn.all_assigns:
        v = a.value or ""
        for suffix in (".get()", "[]"):
            head = v.removesuffix(suffix)
            if v.endswith(suffix) and head.startswith("self.") and head.count(".") == 1 \
                    and head[5:].isidentifier() and a.target.isidentifier():
                bound[a.target] = head[5:]
    out = set()
    for c in fn.all_calls:
        base, _, meth = (c.callee or "").rpartition(".")
        if meth in _KEYED_TAKES and not c.args and base in bound:
            out.add(bound[base])
    return out


def queue_handoffs(fns: dict[str, FnView]) -> dict[str, list[str]]:
    """Per function that puts on ``self.X``, the functions of the same class
    that take from ``self.X`` (a queue's ``get`` takes no key: a dict's
    ``get(k)`` is a lookup, left out), or that append to a per-key deque
    ``self.X[k]`` and those that pop from it."""
    takers, keyed_takers = _takers(fns)
    out: dict[str, list[str]] = {}
    for fqn, fn in fns.items():
        if fn.cls is None:
            continue
        for attr in sorted(_queue_ops(fn, PUTS)):
            out.setdefault(fqn, []).extend(t for t in takers.get((fn.cls, attr), ()) if t != fqn)
        for attr in sorted(_keyed_puts(fn)):
            out.setdefault(fqn, []).extend(
                t for t in keyed_takers.get((fn.cls, attr), ()) if t != fqn)
    return out


def _keyed_gets(fn: FnView) -> set[str]:
    """Attributes read with ``self.X.get(key)``: a mapping, not a queue."""
    return {(c.callee or "").rpartition(".")[0].partition(".")[2] for c in fn.all_calls
            if (c.callee or "").endswith(".get") and c.args}


def _takers(fns: dict[str, FnView]) -> tuple[dict[tuple[str, str], list[str]],
                                              dict[tuple[str, str], list[str]]]:
    """Per ``(class, X)``, the functions that take work off ``self.X``: a
    queue's ``get()``, and a per-key deque's ``popleft()``/``pop()``."""
    takers: dict[tuple[str, str], list[str]] = {}
    keyed_takers: dict[tuple[str, str], list[str]] = {}
    for key, found in queue_takes(fns).items():
        takers[key] = list(dict.fromkeys(fqn for fqn, _ in found))
    for fqn, fn in fns.items():
        if fn.cls is None:
            continue
        for attr in _keyed_takes(fn):
            keyed_takers.setdefault((fn.cls, attr), []).append(fqn)
    return takers, keyed_takers


def taken_queues(fns: dict[str, FnView]) -> set[tuple[str, str]]:
    """``(class, X)`` per ``self.X`` some function of the class takes work
    off: putting an item there hands it to whoever takes it."""
    takers, keyed_takers = _takers(fns)
    return set(takers) | set(keyed_takers)
