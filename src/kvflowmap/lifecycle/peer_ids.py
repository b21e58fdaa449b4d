"""Ids reported on a peer's word.

vLLM matches what a report hook hands back against its own requests. A
transfer thread that reads an id off a peer's message
(``msg.decode().rsplit(":", 1)``, ``msgpack.loads(msg)["req_id"]``) and puts
it, as it came, where the report hook collects finished ids, reports whatever
the peer sent: an id of the peer's own numbering (each vLLM instance suffixes
the ids it is given), a request this instance already reported or freed (a
late completion after a timeout), one it never had. The request the peer
meant is then never reported, and waits in ``WAITING_FOR_REMOTE_KVS`` or
holds its blocks for good. Looking the id up in this connector's own state on
the way (``if req_id not in self._reqs_to_send: continue``, ``rid =
self._transfer_to_req.get(tid)``) is what ties it to a local request.

Found backwards, from each statement that adds a value to a container a
report hook drains (``IdState.report_fed``): through assignments, loop
targets and parameters (to the callers' arguments), to a call that decodes
or receives bytes (``peer_calls``). A frame that looks the value up in a
``self`` container (``in`` / ``not in`` against it, ``.get(v)``, ``self.X[v]``
read) ends the search: the id was checked there.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from kvflowmap.facts import CallFact
from kvflowmap.lifecycle.containers import ADD_OPS, makes_defaultdict
from kvflowmap.lifecycle.ids import loop_targets
from kvflowmap.lifecycle.view import FnView

MAX_DEPTH = 5
_LOOKUPS = frozenset({"get", "__contains__"})


@dataclass(frozen=True)
class PeerId:
    """``fqn`` hands on, at ``line``, the ids of ``held`` (``self.<attr>``,
    or a local the report hook gets back), which ``add_fqn`` fills at
    ``add_line`` with ``value``: an id that came off a peer's message at
    ``source_line`` of ``source_fqn`` (``source``: the call), looked up
    nowhere on the way."""

    fqn: str
    line: int
    held: str
    value: str
    add_fqn: str
    add_line: int
    source_fqn: str
    source_line: int
    source: str


@dataclass(frozen=True)
class _Source:
    fqn: str
    line: int
    text: str


Resolve = Callable[[FnView, CallFact], list[str]]
# the call sites that may run a function: ((module, scope), call, parameters
# filled before the arguments), ``Evaluator.call_sites``
Sites = Callable[[str], list[tuple[tuple[str, str], CallFact, int]]]


@dataclass(frozen=True)
class _Walk:
    """What the backward search needs besides where it is."""

    fns: dict[str, FnView]
    sites: Sites
    peer_calls: frozenset[str]
    # attribute names of ``defaultdict``s: reading a missing key there adds it
    defaults: frozenset[str]


def peer_ids(fns: dict[str, FnView], fed: set[str], peer_calls: frozenset[str],
             resolve: Resolve, sites: Sites, judged: list[str], hooks: tuple[str, ...],
             local: set[tuple[str, str]]) -> list[PeerId]:
    """Per report hook (``hooks``: the report functions named for a
    channel) and ``fed`` container it hands back, the first add, in a
    ``judged`` function, of a peer's unchecked id. A hook that maps what it
    drained through its own state before handing it back (``done =
    {self._to_req[t] for t in done if t in self._to_req}``) checks every add.
    Also each add of one into a ``local`` collection ((function, name) pairs
    a report hook hands back: ``notified.add(req_id)`` ... ``return
    notified``), reported where it is made."""
    w = _Walk(fns, sites, peer_calls, _defaultdicts(fns))
    out = []
    for fqn in judged:
        fn = fns[fqn]
        if _rebuilds_from_self(fn):
            continue
        for op in fn.all_containers:
            if (fqn, op.container) not in local or op.op not in ADD_OPS or not op.key or \
                    not op.key.isidentifier():
                continue
            src = _trace(w, fn, op.key, 0, set())
            if src is not None:
                out.append(PeerId(fqn, op.line, op.container, op.key, fqn, op.line, src.fqn,
                                  src.line, src.text))
    handed = _handed(fns, fed, resolve, hooks)
    adds: dict[str, tuple[str, int, str, _Source]] = {}
    for fqn in judged:
        fn = fns[fqn]
        for op in fn.all_containers:
            attr = op.container[5:] if op.container.startswith("self.") else ""
            if attr not in fed or attr in adds or op.op not in ADD_OPS or not op.key or \
                    not op.key.isidentifier():
                continue
            src = _trace(w, fn, op.key, 0, set())
            if src is not None:
                adds[attr] = (fqn, op.line, op.key, src)
    for (hook, line), attrs in sorted(handed.items()):
        if _rebuilds_from_self(fns[hook]):
            continue
        for attr in sorted(attrs & adds.keys()):
            fqn, add_line, value, src = adds[attr]
            out.append(PeerId(hook, line, f"self.{attr}", value, fqn, add_line, src.fqn,
                              src.line, src.text))
    return out


def _handed(fns: dict[str, FnView], fed: set[str], resolve: Resolve,
            hooks: tuple[str, ...]) -> dict[tuple[str, int], set[str]]:
    """(report hook, line) -> the ``fed`` attributes it takes there, itself
    (``done = self._done``) or through a helper that hands them out."""
    drains: dict[str, set[str]] = {}  # function -> fed attributes it hands out
    for fn in fns.values():
        texts = [a.origin or a.value or "" for a in fn.all_assigns]
        texts += [r.origins[0] if r.origins and r.origins[0] else (r.value or "")
                  for r in fn.all_returns]
        got = {t[5:] for t in texts if t.startswith("self.") and t[5:] in fed}
        if got:
            drains[fn.fqn] = got
    out: dict[tuple[str, int], set[str]] = {}
    for fqn in hooks:
        hook = fns.get(fqn)
        if hook is None:
            continue
        for a in hook.all_assigns:
            src = a.origin or a.value or ""
            if src.startswith("self.") and src[5:] in fed:
                out.setdefault((fqn, a.line), set()).add(src[5:])
        for c in hook.all_calls:
            got = set().union(*(drains.get(t, set()) for t in resolve(hook, c)))
            if got:
                out.setdefault((fqn, c.line), set()).update(got)
    return out


def _rebuilds_from_self(fn: FnView) -> bool:
    """A local of ``fn`` bound again to an expression (not a plain name or
    call) that reads a ``self`` container: ids mapped or filtered through
    the connector's state."""
    bound: set[str] = set()
    for s in fn.stmts:
        for a in fn.assigns(s):
            if a.target in bound and a.value is None and not a.aug and any(
                    n.startswith("self.") and n.count(".") == 1 for n in s.names):
                return True
            bound.add(a.target)
    return False


def _peer(text: str, peer_calls: frozenset[str]) -> bool:
    """A chain with a call that decodes or receives (``msg.decode().rsplit()``)."""
    return any(p.endswith("()") and p[:-2] in peer_calls for p in text.split("."))


def _root(text: str) -> str:
    """The name a chain starts from (``msg`` of ``msg.rsplit()``, ``data`` of ``data[]``)."""
    head = text.split(".")[0].split("[")[0]
    return head if head.isidentifier() and not text.startswith(("self.", "cls.")) else ""


def _defaultdicts(fns: dict[str, FnView]) -> frozenset[str]:
    return frozenset(a.target[5:] for fn in fns.values() for a in fn.all_assigns
                     if a.target.startswith("self.") and a.target.count(".") == 1 and
                     makes_defaultdict(a.value))


def checked(fn: FnView, name: str, defaults: frozenset[str] = frozenset()) -> bool:
    """``fn`` looks ``name`` up in a ``self`` container: a membership test
    against one, ``self.X.get(name)``, or a ``self.X[name]`` read (a
    ``KeyError`` for an id it does not hold) of an entry ``fn`` does not put
    in itself, in a container that is no ``defaultdict``."""
    for cmps in fn.compares.values():
        for cmp in cmps:
            if name in cmp.operands and any(o in ("In", "NotIn") for o in cmp.ops) and \
                    any(o.startswith("self.") for o in cmp.operands if o != name):
                return True
    for c in fn.all_calls:
        if c.callee and c.callee.startswith("self.") and \
                c.callee.rpartition(".")[2] in _LOOKUPS and c.args[:1] == (name,):
            return True
    keyed = re.compile(rf"\bself\.([\w.]+)\[\s*{re.escape(name)}\s*\]")

    # an entry this function puts in itself is no state it found there
    written = {op.container for op in fn.all_containers if op.key == name and op.op in ADD_OPS}

    def held(chain: str) -> bool:  # a read of a missing key there raises
        return chain.rpartition(".")[2] not in defaults and f"self.{chain}" not in written

    for s in fn.stmts:
        if name not in s.names:
            continue
        if s.text and any(held(m) for m in keyed.findall(s.text)):  # ``if self._t[rid] == n:``
            return True
        # ``x = self._meta[rid]``, and ``self._count[rid] += 1``, which reads it first
        for a in fn.assigns(s):
            read = a.value if (a.value or "").startswith("self.") else \
                a.target if a.aug and a.target.startswith("self.") else ""
            if read and read.endswith("[]") and held(read[5:-2]):
                return True
    return False


def _trace(w: _Walk, fn: FnView, name: str, depth: int,
           seen: set[tuple[str, str]]) -> _Source | None:
    """Where ``name`` in ``fn`` came off a peer's message, unchecked; None
    when it did not, or a frame on the way looked it up."""
    if depth > MAX_DEPTH or (fn.fqn, name) in seen:
        return None
    seen.add((fn.fqn, name))
    if checked(fn, name, w.defaults):
        return None
    found: _Source | None = None
    for a in fn.all_assigns:
        if a.target != name or a.aug:
            continue
        src = a.origin or a.value or ""
        if _peer(src, w.peer_calls):
            found = found or _Source(fn.fqn, a.line, src)
            continue
        root = _root(src)
        if root and root != name:
            found = found or _trace(w, fn, root, depth, seen)
    for s in fn.stmts:
        if s.kind != "for":
            continue
        targets, iterable = loop_targets(s.text)
        if name in targets:
            if _peer(iterable, w.peer_calls):
                found = found or _Source(fn.fqn, s.line, iterable)
            elif (root := _root(iterable)) and root != name:
                found = found or _trace(w, fn, root, depth, seen)
    params = fn.param_names
    if name in params and name not in ("self", "cls"):
        for (module, scope), c, offset in w.sites(fn.fqn):
            g = w.fns.get(f"{module}.{scope}")
            if g is None:
                continue
            pos = params.index(name) - offset
            kwargs = dict(c.kwargs)
            arg = kwargs.get(name) if name in kwargs else (
                c.args[pos] if 0 <= pos < len(c.args) else None)
            root = _root(arg) if arg else ""
            if arg and _peer(arg, w.peer_calls):
                found = found or _Source(g.fqn, c.line, arg)
            elif root:
                found = found or _trace(w, g, root, depth + 1, seen)
    return found
