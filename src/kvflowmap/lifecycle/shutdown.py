"""Shutdown: a connector's shutdown hook closes every long-lived resource
its objects hold that the code closes anywhere at all.

A connector owns objects: its halves, adapters, clients and threads, each
stored on ``self`` from a constructor call, and their own such attributes in
turn. The code says which of these hold something to give back by closing
them somewhere (``self.mq_client.close()`` on a failed start,
``self._thread.join()`` in a stop method), or by their class having a close
method of its own. When a connector overrides the shutdown hook, the hook is
where all of them are given back; one it never reaches keeps its socket,
thread or server session open after the engine stopped (LMCache 0.4.7: the
connector's shutdown shut the worker adapter down but never the scheduler
adapter's message-queue client and heartbeat thread; fixed in 0.5.0).

Found by structure only: ownership is ``self.A = <constructor>(...)`` in any
method of an owned class; a close is a call ``self.A.<name>()`` with a name
from the protocol's ``lifecycle.closes``; the shutdown path is what the hook
makes run (calls, constructors, threads, callbacks).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace

from kvflowmap.facts import CallFact
from kvflowmap.lifecycle.view import FnView


@dataclass(frozen=True)
class Unclosed:
    """``hook`` (the shutdown of ``cls``) never closes ``owner``'s attribute
    ``attr``, reached from ``cls`` through ``via`` (attribute names); the code
    closes it at ``closed_at`` (function, line), or, when that is None, its
    class ``kind`` has the close method ``closer``."""

    fqn: str  # the hook, or the owner's close method the hook runs
    cls: str
    owner: str
    attr: str
    via: tuple[str, ...]
    kind: str | None
    closed_at: tuple[str, int] | None
    closer: str | None
    hook: str = ""  # the shutdown hook (``fqn`` when it is reported there)


Resolve = Callable[[FnView, CallFact], list[str]]


def _matches(name: str, patterns: Collection[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _aliases(fn: FnView) -> dict[str, str]:
    """Locals bound to an attribute of ``self``: ``w = self.A`` or ``w =
    getattr(self, "A", None)`` -> {w: A}."""
    out = {}
    for s in fn.stmts:
        for a in fn.assigns(s):
            if "." in a.target or not a.value:
                continue
            head, _, attr = a.value.partition(".")
            if head == "self" and attr.isidentifier():
                out[a.target] = attr
            elif a.value.startswith("getattr("):
                for c in fn.calls(s):
                    if c.callee == "getattr" and c.args[:1] == ("self",) \
                            and len(c.literal_args) > 1 and c.literal_args[1]:
                        out[a.target] = c.literal_args[1]
    return out


def _closes(fn: FnView, closes: Collection[str]) -> list[tuple[str, int, str]]:
    """(attribute, line, method) per call of ``fn`` that closes an attribute
    of ``self``: ``self.A.close()``, or through a local bound to it."""
    aliases = _aliases(fn)
    out = []
    for c in fn.facts.calls:
        parts = (c.callee or "").split(".")
        if c.scope != fn.fact.qualname or "(" in (c.callee or "") or not _matches(parts[-1],
                                                                                 closes):
            continue
        if len(parts) == 3 and parts[0] == "self":
            out.append((parts[1], c.line, parts[-1]))
        elif len(parts) == 2 and parts[0] in aliases:
            out.append((aliases[parts[0]], c.line, parts[-1]))
    return out


def _constructed(fn: FnView, resolve: Resolve, classes, external: Collection[str] = ()
                 ) -> dict[str, str | None]:
    """Attributes ``fn`` stores a constructed object in: ``self.A = K(...)``
    -> {A: K's FQN, or None when K is neither analysed nor one of the
    ``external`` classes known to hold a resource}."""
    out: dict[str, str | None] = {}
    for s in fn.stmts:
        for a in fn.assigns(s):
            head, _, attr = a.target.partition(".")
            if head != "self" or not attr or "." in attr or not a.value or "(" not in a.value:
                continue
            callee = a.value.partition("(")[0].strip()
            call = next((c for c in fn.calls(s) if c.callee == callee), None)
            if call is None or not callee[:1].isalpha() or callee.rpartition(".")[2][:1].islower():
                continue  # a factory or method call; a class name is capitalised
            kind = None
            for t in resolve(fn, call):
                k = t[:-len(".__init__")] if t.endswith(".__init__") else t
                if classes.is_class(k) or k in external:
                    kind = k
                    break
            out[attr] = kind
    return out


def unclosed(fns: dict[str, FnView], classes, base: str, hook_name: str,
             closes: Collection[str], resolve: Resolve,
             runs_from: Callable[[list[str]], set[str]],
             closeables: Collection[str] = ()) -> list[Unclosed]:
    """Per connector class (deriving from ``base``) that overrides
    ``hook_name`` in the analysed code: the owned attributes the code closes
    somewhere (or whose class has a close method, or is one of the library
    classes ``closeables`` names as ``module.Class.method``) that nothing the
    hook makes run closes."""
    external = {c.rpartition(".")[0]: c.rpartition(".")[2] for c in closeables}
    methods: dict[str, list[FnView]] = {}
    for fn in fns.values():
        if fn.cls:
            methods.setdefault(fn.cls, []).append(fn)
    owned: dict[str, dict[str, str | None]] = {k: {} for k in methods}  # class -> {attr: kind}
    closed_somewhere: dict[tuple[str, str], tuple[str, int]] = {}
    for k, ms in methods.items():
        for fn in ms:
            owned[k].update(_constructed(fn, resolve, classes, external))
            for attr, line, _ in _closes(fn, closes):
                closed_somewhere.setdefault((k, attr), (fn.fqn, line))
    out = []
    for cls in sorted(methods):
        if cls == base or base not in classes.mro(cls):
            continue
        hook = classes.find_member(cls, hook_name)
        if hook is None or hook not in fns or hook.rpartition(".")[0] != cls:
            continue  # judged in the class that overrides the hook
        closed, ran = _closed(hook, fns, classes, owned, closes, runs_from)
        for u in _walk(cls, hook, owned, closed, closed_somewhere, methods, closes, external):
            # the owner's own close method, when the hook runs one, is where
            # the close is missing (NIXL's worker ``shutdown``)
            there = sorted(f for f in ran if f in fns and fns[f].cls == u.owner
                           and _matches(fns[f].name, closes))
            out.append(replace(u, fqn=there[0] if there else u.fqn, hook=hook))
    return out


def _closed(hook: str, fns: dict[str, FnView], classes, owned: dict[str, dict[str, str | None]],
            closes: Collection[str], runs_from: Callable[[list[str]], set[str]]
            ) -> tuple[set[tuple[str, str]], set[str]]:
    """(class, attribute) pairs closed by what ``hook`` makes run (and what
    it makes run), following
    a close of an owned object into its class's method of that name (the
    call graph may not type ``w = getattr(self, "A", None); w.close()``)."""
    ran = set(runs_from([hook]))
    closed: set[tuple[str, str]] = set()
    todo = list(ran)
    while todo:
        g = fns.get(todo.pop())
        if g is None or g.self_cls is None:
            continue
        for attr, _, name in _closes(g, closes):
            closed.add((g.self_cls, attr))
            kind = owned.get(g.self_cls, {}).get(attr)
            m = classes.find_member(kind, name) if kind else None
            if m and m not in ran:
                more = runs_from([m]) - ran
                ran |= more
                todo += sorted(more)
    return closed, ran


def _closer(kind: str | None, methods: dict[str, list[FnView]],
            closes: Collection[str], external: dict[str, str]) -> str | None:
    """The close method an analysed class defines itself, or a known
    library class has, if any."""
    if kind in external:
        return external[kind]
    for fn in methods.get(kind or "", ()):
        if _matches(fn.name, closes):
            return fn.name
    return None


def _walk(cls: str, hook: str, owned: dict[str, dict[str, str | None]],
          closed: set[tuple[str, str]], somewhere: dict[tuple[str, str], tuple[str, int]],
          methods: dict[str, list[FnView]], closes: Collection[str],
          external: dict[str, str]) -> list[Unclosed]:
    """Owned attributes from ``cls`` on, breadth first; the objects an
    unclosed attribute holds are not walked into (they go with it)."""
    out = []
    seen = {cls}
    frontier: list[tuple[str, tuple[str, ...]]] = [(cls, ())]
    while frontier:
        nxt = []
        for owner, via in frontier:
            for attr, kind in sorted(owned.get(owner, {}).items()):
                where = somewhere.get((owner, attr))
                closer = _closer(kind, methods, closes, external)
                if (owner, attr) not in closed and (where or closer):
                    out.append(Unclosed(hook, cls, owner, attr, (*via, attr), kind, where,
                                        closer))
                    continue  # what it holds goes with it
                if kind and kind not in seen:
                    seen.add(kind)
                    nxt.append((kind, (*via, attr)))
        frontier = nxt
    return out
