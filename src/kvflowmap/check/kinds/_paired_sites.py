"""What each node of one function's CFG does to one ``paired`` rule's resources.

A *resource* is taken by an acquire call (``pin(b)``, ``lease = c.lease(k)``)
or by an entry put into a named container (``self._inflight.add(k)``). A node
*releases* it (a release call that mentions it, a removal from the same
container with a compatible key, a reset of the container, a helper whose
summary releases) or *hands it over* (stores it into an owning structure,
returns it, passes it to a method that stores its argument). ``trace`` then
searches the CFG for a path from the acquire to an exit that does neither.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from kvflowmap.model.cfg import CFG, build_cfg
from kvflowmap.check.kinds._paired_alias import call_resource
from kvflowmap.check.kinds._paired_inferred import inferred_acquires
from kvflowmap.check.kinds._paired_match import call_matches, chain_matches
from kvflowmap.check.kinds._paired_model import EMPTY, Resource, Summary, Trace, walk
from kvflowmap.check.kinds._paired_spec import Spec
from kvflowmap.check.kinds._paired_text import (emptiness, is_decrement, is_log_call, mentions,
                                               rhs, statement_text)
from kvflowmap.check.kinds._paired_trace import trace
from kvflowmap.facts import CONTAINER_METHODS, ContainerOpFact, Stmt

_SELF_OWNED = re.compile(r"^self(\.\w+)+(\.(get|setdefault)\(\)|\[\])?$")
_BOUND_METHOD = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\.(\w+)(?!\w|\s*\()")
_CONSTANT = re.compile(r"^(None|-?\d+|False|True)$")
_CALLBACK = re.compile(r"callback|add_done|\bthen\b|finally_", re.I)


def removals(chain: str, spec: Spec) -> set[str]:
    """``chain.op`` for each removal operation of the rule."""
    return {f"{chain}.{op}" for op in spec.remove_ops if op != "delitem"}


class FunctionSites:
    """Classifies the events of one function for one rule."""

    def __init__(self, ctx, spec: Spec, fqn: str, summary_of: Callable[[str], Summary]) -> None:
        self.ctx, self.spec, self.fqn, self.summary_of = ctx, spec, fqn, summary_of
        d = ctx.definition(fqn)
        self.module, self.fn, self.ff = d.module, d.fact, ctx.facts(fqn)
        self.path = ctx.where(fqn)[2]
        self._texts: dict[int, str] = {}
        self._targets: dict[int, list[tuple[str, bool]]] = {}
        self._roles: dict[int, frozenset[str]] = {}
        self._cfg: CFG | None = None
        self.memo: dict[str, dict] = {}  # per-function results of the path search helpers
        self._assigns = ctx.model.assigns.get((self.module, self.fn.qualname), {})
        self._locals = set(self._assigns) | {p.name for p in self.fn.params}
        self._owned: set[str] | None = None

    @property
    def _self_owned(self) -> set[str]:
        """Locals bound to objects self owns (slot = self._slots.setdefault(k)):
        storing into them stores into self. Built on first use (most
        functions never ask; building it for each was a tenth of rule time)."""
        if self._owned is None:
            self._owned = {name for name, facts in self._assigns.items()
                           if any(_SELF_OWNED.match(a.value or "") for a in facts)}
        return self._owned

    @property
    def cfg(self) -> CFG:
        """Built on first use: most functions acquire nothing and need none."""
        if self._cfg is None:
            self._cfg = build_cfg(self.fn.body, self._may_raise)
        return self._cfg

    # -- events ----------------------------------------------------------------
    def events(self, stmt: Stmt, kind: str) -> list[int]:
        """Indexes of ``stmt``'s events of one kind (call, container, assign, return)."""
        return [i for k, i in stmt.events if k == kind]

    def text(self, stmt: Stmt) -> str:
        """The statement's source text (see ``statement_text``), memoised."""
        if id(stmt) not in self._texts:
            self._texts[id(stmt)] = statement_text(self.path, stmt)
        return self._texts[id(stmt)]

    def targets(self, index: int) -> list[tuple[str, bool]]:
        """(fqn, external) of what call ``index`` may run."""
        if index not in self._targets:
            call = self.ff.calls[index]
            self._targets[index] = [(t.fqn, t.external) for t in self.ctx.resolve_call(self.fqn, call)]
        return self._targets[index]

    def roles(self, index: int) -> frozenset[str]:
        """acquire / release / handover, from the rule's patterns and, for
        analysed helpers, from their summaries."""
        if index not in self._roles:
            self._roles[index] = frozenset(self._compute_roles(index))
        return self._roles[index]

    def _compute_roles(self, index: int) -> set[str]:
        call, spec = self.ff.calls[index], self.spec
        fqns = [f for f, _ in self.targets(index)]
        if call_matches(spec.exclude, call.callee, fqns):
            return set()
        roles = {r for r, pats in (("acquire", spec.acquire), ("release", spec.release),
                                   ("handover", spec.handover_calls))
                 if call_matches(pats, call.callee, fqns)}
        if spec.summaries and not roles:
            for fqn, external in self.targets(index):
                s = EMPTY if external else self.summary_of(fqn)
                # What a helper hands back matters more than what it dropped.
                roles |= {"acquire"} if s.returns_resource else set()
                roles |= {"release"} if "call" in s.releases and not s.returns_resource else set()
                roles |= {"handover"} if s.stores_param else set()
        return roles - {"acquire"} if "release" in roles else roles

    def helper_tokens(self, index: int) -> frozenset[str]:
        if not self.spec.summaries:
            return frozenset()
        return frozenset().union(*(self.summary_of(f).releases
                                   for f, ext in self.targets(index) if not ext))

    def _may_raise(self, stmt: Stmt) -> bool:
        if not self.spec.calls_raise:
            return False
        calls = self.events(stmt, "call")
        if stmt.kind == "simple" and calls and is_log_call(self.ff.calls[calls[0]].callee):
            # a logging statement (its outermost call, met first): what its
            # arguments compute is for the message (``mem.get_ref_count()``)
            return False
        return any(self.call_may_raise(i) for i in calls)

    def call_may_raise(self, index: int) -> bool:
        """Whether call ``index`` may raise: not a ``no_raise`` pattern, not a
        record class's constructor, not a helper summarised as nothrow."""
        call = self.ff.calls[index]
        targets = self.targets(index)
        if call_matches(self.spec.no_raise, call.callee, [f for f, _ in targets]):
            return False
        if not targets or not self.spec.summaries:
            return True
        for fqn, external in targets:
            d = None if external else self.ctx.model.defs.get(fqn)
            if d is None:
                return True
            # Building a class with no __init__ of ours (a dataclass) runs no
            # code that could fail; a helper summarised as nothrow neither.
            if not d.is_class and not self.summary_of(fqn).nothrow:
                return True
        return False

    # -- acquisitions ----------------------------------------------------------
    def acquires(self) -> list[Resource]:
        """Every acquisition, one per (CFG node, event): finally bodies are
        copied per way out, so a statement can stand for several nodes."""
        if self.spec.infer_from_release:
            return inferred_acquires(self)
        if not any(self.acquiring(s) for s in walk(self.fn.body)):
            return []  # spare the CFG
        out: list[Resource] = []
        for node in self.cfg.nodes:
            s = node.stmt
            if node.kind != "stmt" or s is None:
                continue
            for kind, i in self.acquiring(s):
                if kind == "call":
                    out.append(call_resource(self, node.id, s, self.ff.calls[i]))
                else:
                    co = self.ff.containers[i]
                    out.append(Resource(node.id, "container", co.container, co.key,
                                        frozenset(), co.line, co.col))
        return out

    def acquiring(self, s: Stmt) -> list[tuple[str, int]]:
        """(event kind, index) of the acquisitions a statement makes itself."""
        if s.kind == "with":
            return []  # a context manager's __exit__ releases what a with item takes
        out = [("call", i) for i in self.events(s, "call") if "acquire" in self.roles(i)]
        for i in self.events(s, "container"):
            co = self.ff.containers[i]
            if co.op in self.spec.add_ops and chain_matches(self.spec.containers, co.container) \
                    and not (co.op == "setitem" and is_decrement(self.text(s))):
                out.append(("container", i))
        return out

    # -- what a node does to a resource -----------------------------------------
    def releases(self, node: int, r: Resource) -> bool:
        n = self.cfg.nodes[node]
        s = n.stmt
        if n.kind != "stmt" or s is None:
            return False
        if r.kind == "call":
            return self._call_released(s, r) or self._given_up(s, r)
        for i in self.events(s, "container"):
            co = self.ff.containers[i]
            if co.container == r.what and co.op in self.spec.remove_ops and _keys_ok(r.key, co):
                return True
        if any(self.ff.assigns[i].target == r.what for i in self.events(s, "assign")):
            return True  # reset or swap: self._c = {}, self._c -= done
        unrecorded = {m for m in removals(r.what, self.spec)
                      if m.rpartition(".")[2] not in CONTAINER_METHODS}
        if any(self.ff.calls[i].callee in unrecorded for i in self.events(s, "call")):
            return True  # a removal the index keeps no container fact for (difference_update)
        if _CALLBACK.search(self.text(s)) and any(
                re.search(re.escape(m) + r"(?!\w|\s*\()", self.text(s))
                for m in removals(r.what, self.spec)):
            return True  # task.add_done_callback(self._c.discard): removed when done
        token = f"container:{r.what}"
        return any(token in self.helper_tokens(i) and self._names_ok(s, r, release=True)
                   for i in self.events(s, "call"))

    def _given_up(self, s: Stmt, r: Resource) -> bool:
        """With ``infer_from_release``: the only name of the resource is bound
        to a constant (``fd = -1  # now managed by fdopen``), the idiom for
        "ownership moved" that the function's own ``if fd >= 0: close(fd)``
        then respects."""
        if not self.spec.infer_from_release or len(r.handles) != 1:
            return False
        return s.kind == "simple" and bool(_CONSTANT.match(rhs(self.text(s)).strip())) and any(
            a.target in r.handles for a in map(self.ff.assigns.__getitem__,
                                                self.events(s, "assign")))

    def _call_released(self, s: Stmt, r: Resource) -> bool:
        if any("release" in self.roles(i) for i in self.events(s, "call")):
            return self._names_ok(s, r, release=True)
        if s.kind == "for":  # ``for x in held: release(x)`` releases every element
            target, _, it = (s.text or "").partition(" in ")
            if r.handles and mentions(it, r.handles):
                body = list(walk(s.body))
                if any(self.acquiring(b) for b in body):
                    return False  # a loop that swaps leases is not a release loop
                inner = {t.strip(" ()[]") for t in target.split(",")} | set(r.handles)
                return any(mentions(self.text(b), inner) and
                           any("release" in self.roles(i) for i in self.events(b, "call"))
                           for b in body)
        return False

    def _names_ok(self, s: Stmt, r: Resource, release: bool) -> bool:
        """Whether ``s`` mentions the resource; a resource with no known name
        matches any statement (loose, so unknown flow never reports)."""
        names = set(r.handles) | ({r.key} if r.key else set()) if release else _handover_names(r)
        return not names or mentions(self.text(s), names)

    def hands_over(self, node: int, r: Resource) -> bool:
        s = self.cfg.nodes[node].stmt
        if self.cfg.nodes[node].kind != "stmt" or s is None or r.released_on_failure:
            # What is released before a raise is not the function's to store
            # (``self._requests[req_id] = request`` keeps the request, not its probe).
            return False
        if s.kind == "return" and self.spec.return_hands_over and s.text and r.kind == "call":
            names = _handover_names(r)
            if node == r.node or (names and mentions(s.text, names)):
                return True
        if self.spec.infer_from_release and r.kind == "call" and r.handles and \
                self._deferred(s, r):
            return True
        if not self._names_ok(s, r, release=False):
            return False
        if self.spec.infer_from_release and not _handover_names(r):
            return False  # a nameless resource (``self._acquire_step()``) is not stored
        for i in self.events(s, "container"):
            co = self.ff.containers[i]
            if co.container != r.what and co.op in self.spec.add_ops and \
                    self._owner(co.container, r):
                return True
        for i in self.events(s, "assign"):
            a = self.ff.assigns[i]
            if a.target != r.what and "." in a.target and self._owner(a.target, r):
                return True
        # A container entry is handed over only to the listed container owners.
        return r.kind == "call" and any("handover" in self.roles(i)
                                        for i in self.events(s, "call"))

    def _deferred(self, s: Stmt, r: Resource) -> bool:
        """The release is left to code that runs later: a nested function
        that uses the resource (a closure handed to a thread or callback), or
        a release method passed uncalled (``context.add_callback(s.close)``)."""
        if s.kind == "def":
            inner = f"{self.fn.qualname}.{s.names[0]}" if s.names else ""
            return any(f.qualname == inner and any(set(x.names) & r.handles for x in walk(f.body))
                       for f in self.ff.functions) if inner else False
        for m in _BOUND_METHOD.finditer(self.text(s)):
            if m.group(1) in r.handles and call_matches(self.spec.release, m.group(2), []):
                return True
        return False

    def _owner(self, chain: str, r: Resource) -> bool:
        if r.kind != "call":
            return chain_matches(self.spec.container_owners, chain)
        return self.owns(chain)

    def owns(self, chain: str) -> bool:
        """Whether a store into ``chain`` hands a value over: an owner pattern,
        an object self owns, or (in a nested function) an enclosing local."""
        if chain_matches(self.spec.owners, chain):
            return True
        if "." in chain and chain.split(".")[0] in self._self_owned:
            return True
        # In a nested function, a store into an enclosing function's local
        # hands the value to the enclosing function.
        parent = self.ctx.model.defs.get(f"{self.module}.{self.fn.qualname.rpartition('.')[0]}")
        return parent is not None and not parent.is_class and \
            chain.split(".")[0] not in self._locals

    def filled(self, node: int, before: frozenset[str]) -> frozenset[str]:
        """Local collections known non-empty after ``node``: those it adds to,
        minus those it rebinds."""
        s = self.cfg.nodes[node].stmt
        if s is None or self.cfg.nodes[node].kind != "stmt":
            return before
        added = {self.ff.containers[i].container for i in self.events(s, "container")
                 if self.ff.containers[i].op in self.spec.add_ops}
        rebound = {self.ff.assigns[i].target for i in self.events(s, "assign")}
        out = (before - rebound) | {c for c in added if "." not in c}
        return before if out == before else frozenset(out)

    def pruned(self, node: int, label: str, names: frozenset[str] | None) -> bool:
        """An edge on which a tested name is known empty (``if x is None``):
        nothing is held there. ``names=None`` prunes on any name (guards)."""
        s = self.cfg.nodes[node].stmt
        if s is None or s.kind not in ("if", "while") or label == "exception":
            return False
        if label != "true":
            # The false edge of a test that ends a block carries the label of
            # the way out it falls into (``end``, or ``raise`` in a finally copy).
            label = "false"
        empty_true, empty_false = emptiness(s.text or "")
        empty = empty_true if label == "true" else empty_false
        return bool(empty) if names is None else bool(empty & names)

    def trace(self, r: Resource) -> Trace:
        """Leaking paths from ``r`` (see ``_paired_trace.trace``)."""
        return trace(self, r)


def _handover_names(r: Resource) -> set[str]:
    """What a store or return must mention to take the resource: its names,
    else its key (a container entry is known by its key)."""
    if r.kind == "call" and r.handles:
        return set(r.handles)
    return {r.key} if r.key else set()


def _keys_ok(key: str | None, co: ContainerOpFact) -> bool:
    return key is None or co.key is None or co.key == key
