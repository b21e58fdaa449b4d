"""The request-lifecycle model of the analysed connector code.

Built once per analysis from the facts and the resolved model (no rule code
here): which names hold request ids in every subject function, which
containers are request-keyed and where ids enter and leave them, what each
statement does with an id (``effects``), the dropping paths (``paths``),
and the report channels (``reports``). Rules of kind ``lifecycle`` read it.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from typing import Any
from dataclasses import dataclass, field, replace

from kvflowmap.facts import CallFact, Stmt
from kvflowmap.model.cfg import CFG, build_cfg
from kvflowmap.lifecycle.balance import LeafUses, Unbalanced, is_init, leaf_uses, unbalanced
from kvflowmap.lifecycle.containers import (ADD_OPS, PURE, REMOVE_OPS, Container, container_of,
                                           resets, self_attr)
from kvflowmap.lifecycle.effects import Effect, Effects, is_logging, is_stub
from kvflowmap.lifecycle.completions import Completions, Uncompleted, uncompleted
from kvflowmap.lifecycle.retirements import Retirements, Unretired, handed_items, unretired
from kvflowmap.lifecycle.retirements import hands_on as retire_hands_on
from kvflowmap.lifecycle.counts import SetPending, set_pending
from kvflowmap.lifecycle.counts_moved import Unmoved, count_containers, unmoved
from kvflowmap.lifecycle.ids import (IDENT, QUEUE_PUTS, IdState, bind_call, bind_defaults,
                                     coll_returner_names, flow_locals, returns_group, returns_id, seed)
from kvflowmap.lifecycle.callbacks import Unchecked, unchecked
from kvflowmap.lifecycle.handoffs import queue_handoffs, taken_queues
from kvflowmap.lifecycle.id_types import seed_annotated, seed_class_fields
from kvflowmap.lifecycle.inherited import (inherited_methods, inherited_starts, override_calls,
                                          packages_of, reached)
from kvflowmap.lifecycle.announced import Unannounced, unannounced
from kvflowmap.lifecycle.intakes import Intake, intakes
from kvflowmap.lifecycle.unseen import Unseen, unseen
from kvflowmap.lifecycle.asserted import Asserted, asserted_entries
from kvflowmap.lifecycle.polled import Unacted, unacted
from kvflowmap.lifecycle.replies import Unreplied, rep_sockets, unreplied
from kvflowmap.lifecycle.shutdown import Unclosed, unclosed
from kvflowmap.lifecycle.step_releases import SkippedRelease, skipped_releases
from kvflowmap.lifecycle.peer_ids import PeerId, peer_ids
from kvflowmap.lifecycle.probe_left import ProbeLeft, probe_leftovers
from kvflowmap.lifecycle.runtime import runtime_attrs
from kvflowmap.lifecycle.resumed import PartialReset, ResumedAppend, partial_resets, resumed_appends
from kvflowmap.lifecycle.reported_twice import ReportedTwice, reported_twice
from kvflowmap.lifecycle.locks import (CopyClear, Locks, Unlocked, copy_then_clear,
                                       held_by_callers, unlocked)
from kvflowmap.lifecycle.paths import Drop, drops
from kvflowmap.lifecycle.reports import owed_containers, report_functions
from kvflowmap.lifecycle.report_sources import seed_report_sources
from kvflowmap.lifecycle.taken import Taken, lost_locals, takers
from kvflowmap.lifecycle.together import Endings, Partial, partial_removals
from kvflowmap.lifecycle.unreported import Unreported, unreported
from kvflowmap.lifecycle.threads import Spawn, spawn_target, spawns, thread_body
from kvflowmap.lifecycle.spec import LifecycleSpec, Spawner, lifecycle_spec
from kvflowmap.lifecycle.swallowed import Swallowed, forgotten, swallowed
from kvflowmap.lifecycle.view import FnView, bound_args, view, walk
from kvflowmap.model.classes import ClassIndex

MAX_ROUNDS = 8


@dataclass
class Site:
    """One place where an id enters, leaves or resets a container."""

    fqn: str
    line: int
    kind: str  # add | remove | reset


@dataclass
class ContainerInfo:
    """A request-keyed container and every site that touches it."""

    container: Container
    sites: list[Site] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[Site]:
        return [s for s in self.sites if s.kind == kind]


@dataclass
class Lifecycle:
    """Request ids through the subject code (see the module docstring)."""

    spec: LifecycleSpec
    state: IdState
    effects: Effects
    functions: dict[str, FnView]
    containers: dict[Container, ContainerInfo]
    classes: ClassIndex
    # fqn -> the process sides ("scheduler", "worker") whose hooks reach it
    sides: dict[str, frozenset[str]] = field(default_factory=dict)
    # containers a report hook reads: an id in them is waiting for a report
    owed: frozenset[Container] = frozenset()
    # threads, executor tasks and callbacks the subject starts (protocol spawners)
    spawned: tuple[Spawn, ...] = ()
    # constructions of a ``threading.Thread`` subclass, each starting its ``run``
    constructed_threads: tuple[Spawn, ...] = ()
    # report hooks and the subject functions they call (``reports.report_functions``)
    reporters: tuple[str, ...] = ()
    # functions the save hooks reach and the load hooks do not (calls, threads,
    # queue hand-offs): a save's failure owes vLLM no failed load blocks
    save_only: frozenset[str] = frozenset()
    _connected: frozenset[str] = frozenset()
    # what runs because a function runs (``_run_edges``), and where vLLM enters
    _runs: dict[str, list[str]] = field(default_factory=dict)
    _starts: tuple[str, ...] = ()
    _cfgs: dict[str, CFG] = field(default_factory=dict)
    _unbalanced: list[Unbalanced] | None = None
    _leaf_uses: dict[str, LeafUses] | None = None
    _drops: dict[str, list[Drop]] = field(default_factory=dict)
    _raises: dict[str, bool] = field(default_factory=dict)
    _named: frozenset[str] | None = None
    _reps: dict[tuple[str, str], int] | None = None
    _takers: dict[str, str] | None = None
    _thread_roots: dict[str, frozenset[str]] | None = None
    _completions: dict[tuple[str, ...], Completions] = field(default_factory=dict)
    _retirements: Retirements | None = None
    _count_containers: frozenset[str] | None = None
    _handed_items: dict[str, tuple[str, ...]] | None = None
    _taken_queues: set[tuple[str, str]] | None = None
    # methods of vLLM's classes (context) that run on the subject's objects,
    # each with the subject classes whose objects run it (``lifecycle.inherited``)
    inherited: dict[str, frozenset[str]] = field(default_factory=dict)
    inherited_fns: dict[str, FnView] = field(default_factory=dict)
    _own_classes: frozenset[str] | None = None
    # ``_runs`` with queue hand-offs added (``runs_from``), built once
    _handed: dict[str, list[str]] | None = None
    _background_code: frozenset[str] | None = None
    _save_only_containers: frozenset[Container] | None = None
    _held: dict[str, Locks] | None = None
    # the linker's call resolution (``graph.calls``), for raise summaries
    _calls: Any = None
    _unseen: dict[tuple[str, int], str] = field(default_factory=dict)
    _fails: dict[tuple[str, int], bool] = field(default_factory=dict)

    def cfg(self, fqn: str) -> CFG:
        """The control-flow graph of a subject function (built once)."""
        if fqn not in self._cfgs:
            fn = self.functions[fqn]
            self._cfgs[fqn] = build_cfg(fn.fact.body, lambda s: self.effects.may_raise(fn, s))
        return self._cfgs[fqn]

    def runs_inherited(self, fqn: str, cls: str) -> bool:
        """vLLM's method ``fqn`` runs on an object of subject class ``cls``
        (``inherited``); a class with no methods of its own runs what its
        bases run."""
        runners = self.inherited.get(fqn, frozenset())
        if cls in runners:
            return True
        if self._own_classes is None:
            self._own_classes = frozenset(fn.self_cls for fn in self.functions.values()
                                          if fn.self_cls)
        return cls not in self._own_classes and any(k in runners for k in self.classes.mro(cls))

    def drops(self, fqn: str) -> list[Drop]:
        """The paths of ``fqn`` that drop an id it received or iterates.

        On the scheduler side a hook decides per request whether the connector
        takes part, so an early ``return`` there is a decision; only ids lost
        to a swallowed exception or removed and forgotten count. The probe
        carries no id anywhere (it is asked again), so it has no drops."""
        if fqn not in self._drops:
            fn = self.functions[fqn]
            hows: tuple[str, ...] = ("except", "removed")
            # Worker code, and the commit hook (a request the probe parked
            # for an async load must be recorded there), may not leave early,
            # nor between two of the places it hands an id to.
            strict = self.sides.get(fqn) == frozenset({"worker"}) or fn.name == self.spec.commit
            if strict:
                hows += ("early-exit", "abandoned")
            # the commit hook owes every record; worker code may not leave early
            # between two (a caught failure there is often a designed path)
            each = hows if fn.name == self.spec.commit else \
                ("early-exit", "abandoned") if strict else ()
            # code only a background thread or task runs: an exception it
            # raises reaches no hook, so the ids it carries are lost with it
            if "hooks" not in self._roots().get(fqn, frozenset({"hooks"})):
                hows += ("raised",)
                # and an exception from any call, where no caller sees it at
                # all (a discarded future, a loop whose ``except`` only logs)
                if self.unseen_raise(fqn):
                    hows += ("escaped",)
            if fn.name == self.spec.probe:
                hows = ()
            found = drops(fn, self.effects, self.cfg(fqn), hows, self.owed,
                          self._cleanup(fn), each_handover=each,
                          raising=lambda s: self._likely_failure(fn, s)) if hows else []
            found = [d for d in found if d.how != "raised" or not self._caller_handles(fqn)]
            # one escaping exception per function says it: the first
            escaped = sorted((d for d in found if d.how == "escaped"), key=lambda d: d.branch_line)
            self._drops[fqn] = [d for d in found if d.how != "escaped"] + escaped[:1]
        return self._drops[fqn]

    def _caller_handles(self, fqn: str, depth: int = 3) -> bool:
        """A caller of ``fqn`` catches what it raises and hands ids on in the
        handler (``except Exception: self._mark_request_done(tid)``), or lets
        it pass to a caller of its own that does (``depth`` levels up)."""
        for f, fn, h in self._exception_exits(fqn):
            if h is None:
                if depth > 1 and self._caller_handles(f, depth - 1):
                    return True
            elif h.kind == "except" and _handler_works(fn, h):
                return True
        return False

    def _exception_exits(self, fqn: str) -> Iterator[tuple[str, FnView, Stmt | None]]:
        """Per call of ``fqn`` in the subject (by name, in a function that runs
        it), where an exception it raises goes: ``(caller, its view, the
        statement reached)``, that statement None when the exception leaves
        the caller too."""
        name = fqn.rpartition(".")[2]
        for f, gs in sorted(self._runs.items()):
            if fqn not in gs or f not in self.functions:
                continue
            fn, cfg = self.functions[f], self.cfg(f)
            for n in cfg.nodes:
                if n.stmt is None or n.kind != "stmt" or not any(
                        (c.callee or "").rpartition(".")[2] == name for c in fn.calls(n.stmt)):
                    continue
                for d, lab in cfg.successors(n.id):
                    if lab == "exception":
                        yield f, fn, None if d == cfg.raise_exit else cfg.nodes[d].stmt

    def unseen_raise(self, fqn: str, depth: int = 3) -> bool:
        """No code sees an exception leaving ``fqn``: it is a thread's target
        or ``run``, or a task whose future is thrown away
        (``pool.submit(self._handle, ...)`` as a bare statement), or every
        caller catches it in an ``except`` that only logs and carries on, or
        lets it pass to a caller of its own of which this holds (``depth``
        levels up). Such an exception ends the work item with nobody left to
        report it."""
        return bool(self.unseen_why(fqn, depth))

    def unseen_why(self, fqn: str, depth: int = 3) -> str:
        """How an exception leaving ``fqn`` goes unseen (``unseen_raise``), in
        words, by the first way found (a thread, a thrown-away future, a
        caller's ``except`` that only logs); "" when some code sees it."""
        key = (fqn, depth)
        if key not in self._unseen:
            self._unseen[key] = ""  # cycle guard: a recursion sees nothing new
            self._unseen[key] = self._unseen_by(fqn, depth)
        return self._unseen[key]

    def _unseen_by(self, fqn: str, depth: int) -> str:
        short = lambda f: ".".join(f.split(".")[-2:])  # noqa: E731
        starts = [sp for sp in (*self.spawned, *self.constructed_threads) if sp.target == fqn]
        if starts:
            if not all(self._discarded(sp) for sp in starts):
                return ""
            sp = starts[0]
            if self._threaded(sp):
                return f"it runs on a thread that {short(sp.spawner)} starts (line {sp.line})"
            return f"it runs as a task whose future {short(sp.spawner)} throws away (line {sp.line})"
        name = fqn.rpartition(".")[2]
        # an override runs where its base method is called (dispatch)
        bases = [f for f, gs in sorted(self._runs.items())
                 if fqn in gs and f != fqn and f.rpartition(".")[2] == name]
        whys = [self.unseen_why(f, depth) for f in bases]
        if not all(whys):
            return ""
        for f, fn, h in self._exception_exits(fqn):
            if f in bases:
                continue
            if h is None:
                why = self.unseen_why(f, depth - 1) if depth > 1 else ""
                if not why:
                    return ""
                whys.append(f"{short(f)} lets it through, and {why}")
            elif h.kind != "except" or _handler_works(fn, h) or \
                    any(x.kind == "raise" for x in walk(h.body)):
                return ""
            else:
                whys.append(f"{short(f)} catches it and only logs (line {h.line})")
        return whys[0] if whys else ""

    def _likely_failure(self, fn: FnView, s: Stmt) -> bool:
        """``s`` is where a task's own work can fail, for escaping exceptions:
        a call to an analysed function that says it can fail
        (``_states_failure``), or to a method outside the analysis of an
        object the code holds (``self.engine.transfer(...)``); not queue and
        event bookkeeping, ``d.get(k)``, logging, container updates, nor a
        statement in an ``except`` (a failure while handling one is not
        chased)."""
        if not self.effects.may_raise(fn, s) or id(s) in fn.in_handlers:
            return False
        for c in fn.calls(s):
            callee = c.callee or ""
            base, _, meth = callee.rpartition(".")
            if meth in _BOOKKEEPING or is_logging(callee):
                continue
            targets = [t.fqn for t in self._calls.resolve(fn.ctx, c) if t.fqn in self.functions]
            if any(self._states_failure(t) for t in targets) or \
                    (not targets and base.startswith("self.")):
                return True
        return False

    def _states_failure(self, fqn: str, depth: int = 3) -> bool:
        """``fqn`` or an analysed function it calls (``depth`` levels down)
        has a ``raise`` or ``assert`` of its own: the code says it can fail."""
        key = (fqn, depth)
        if key not in self._fails:
            self._fails[key] = False  # cycle guard
            fn = self.functions.get(fqn)
            found = fn is not None and (
                any(x.kind in ("raise", "assert") for x in fn.stmts) or depth > 1 and any(
                    self._states_failure(t.fqn, depth - 1) for c in fn.all_calls
                    for t in self._calls.resolve(fn.ctx, c) if t.fqn in self.functions))
            self._fails[key] = found
        return self._fails[key]

    def _threaded(self, sp: Spawn) -> bool:
        """The spawn starts a thread (or process): its exception ends it."""
        return sp in self.constructed_threads or sp.call.rpartition(".")[2] in ("Thread",
                                                                               "Process")

    def _discarded(self, sp: Spawn) -> bool:
        """A spawn whose failure nobody can see: a thread (its exception ends
        it), or a task or future started by a bare statement (nothing keeps
        the future to ask it)."""
        if self._threaded(sp):
            return True
        fn = self.functions.get(sp.spawner)
        if fn is None:
            return False
        at = [s for s in fn.stmts if s.line == sp.line and s.kind == "simple"]
        return bool(at) and all(not fn.assigns(s) and not fn.returns(s) and
                                "await" not in (s.text or "") and len(fn.calls(s)) == 1 for s in at)

    def raises(self, fqn: str, calls, _seen: frozenset[str] = frozenset()) -> bool:
        """Summary: an exception can leave ``fqn`` (its CFG's raising exit is
        reachable). Calls outside the analysis may raise; analysed callees
        are asked in turn (a helper that catches everything does not)."""
        if fqn in self._raises:
            return self._raises[fqn]
        if fqn not in self.functions or fqn in _seen:
            return True
        fn = self.functions[fqn]
        seen = _seen | {fqn}
        cfg = build_cfg(fn.fact.body, lambda s: self.stmt_raises(fn, s, calls, seen))
        found = any(d == cfg.raise_exit for _, d, _ in cfg.edges())
        self._raises[fqn] = found
        return found

    def stmt_raises(self, fn: FnView, s, calls, seen: frozenset[str] = frozenset()) -> bool:
        """``s`` may raise: a call that is not logging/container/queue work and
        is outside the analysis or reaches an analysed function that raises."""
        if not self.effects.may_raise(fn, s):
            return False
        for c in fn.calls(s):
            targets = [t.fqn for t in calls.resolve(fn.ctx, c) if t.fqn in self.functions]
            if not targets or any(self.raises(t, calls, seen) for t in targets):
                return True
        return False

    def unbalanced(self) -> list[Unbalanced]:
        """Containers of leaf classes whose ids cannot leave, or that nothing
        fills although ids are taken out or reported from them (``balance``)."""
        if self._unbalanced is None:
            removals = {(s.fqn, c.attr): s.line for c, info in self.containers.items()
                        for s in info.sites if s.kind == "remove"}
            self._unbalanced = unbalanced(self.functions, self.classes, self.leaf_uses(),
                                          self.state.keyed_attrs,
                                          {c.attr for c in self.owed}, removals, self._runs_at_all,
                                          self.sides)
        return self._unbalanced

    def leaf_uses(self) -> dict[str, LeafUses]:
        """Per leaf class, its members and their uses of each ``self``
        attribute (``balance.leaf_uses``), built once for the balance checks."""
        if self._leaf_uses is None:
            self._leaf_uses = leaf_uses(self.functions, self.classes, self.spec.metadata_builder)
        return self._leaf_uses

    def _runs_at_all(self, fqn: str) -> bool:
        """``fqn`` can run: it is connected, or some subject code calls or
        passes a function of its name (a call the resolver missed still
        counts: only code nothing names is taken for dead)."""
        if self.connected(fqn):
            return True
        if self._named is None:
            named = set()
            for fn in self.functions.values():
                for c in fn.all_calls:
                    named.add((c.callee or "").rpartition(".")[2])
                    named.update((a or "").rpartition(".")[2]
                                 for a in (*c.args, *(v for _, v in c.kwargs)))
            self._named = frozenset(named)
        return self.functions[fqn].name in self._named if fqn in self.functions else True

    def connected(self, fqn: str) -> bool:
        """``fqn`` runs for the connector: reached from a protocol hook or the
        constructor of a class with one, through calls, spawned threads,
        executor tasks and callbacks, or defined inside such a function. Code
        of the same package that no hook reaches (a cache server, a CLI) is
        not the connector's."""
        return fqn in self._connected

    def ignored(self, fqn: str) -> list[str]:
        """Id parameters of ``fqn`` that no statement of it (or of a def nested
        in it) uses: a caller hands the id over (that is how it became an id)
        and it goes nowhere. Only for functions kept for what they do (they
        return nothing); hooks (vLLM passes what it passes), stubs, and methods
        with an override or overriding one (a no-op variant) are left out."""
        fn = self.functions[fqn]
        if fn.name in self.spec.hooks or is_stub(fn) or not fn.cls:
            return []
        if any((r.value or "None") != "None" for r in fn.all_returns):
            return []  # it computes an answer: the id may just not matter to it
        ids = self.state.of(fqn).ids
        params = [p for p in fn.param_names if p in ids]
        if not params or self.classes.overrides(fqn) or any(
                self.classes.find_member(base, fn.name) for base in self.classes.mro(fn.cls)[1:]):
            return []
        used = {n.partition(".")[0] for f, v in self.functions.items()
                if f == fqn or f.startswith(fqn + ".") for st in v.stmts for n in st.names}
        return [p for p in params if p not in used]

    def uncompleted(self, fqn: str, completers: tuple[str, ...]) -> list[Uncompleted]:
        """Futures ``fqn`` is handed and completes on one path but not on
        another (``completions``); ``completers``: the completing methods."""
        comp = self._completions.get(completers)
        if comp is None:
            comp = self._completions[completers] = Completions(self.functions, self._analysed,
                                                               completers)
        fn = self.functions[fqn]
        unseen = "hooks" not in self._roots().get(fqn, frozenset({"hooks"})) and \
            self.unseen_raise(fqn)
        return uncompleted(fn, self.cfg(fqn), comp,
                           (lambda s: self._likely_failure(fn, s)) if unseen else None)

    def handed_items(self) -> dict[str, tuple[str, ...]]:
        """Per function served with a work item (spawned with arguments, or
        called with what a background loop took off a queue), the parameters
        holding it (``retirements.handed_items``)."""
        if self._handed_items is None:
            self._handed_items = handed_items(
                self.functions, [(sp.spawner, sp.target, sp.line) for sp in self.spawned],
                self.background_code(), self.subject_callees, self.classes.overrides)
        return self._handed_items

    def unretired(self, fqn: str) -> list[Unretired]:
        """Work items ``fqn`` retires from ``self`` state on one way out but
        not on another (``retirements``)."""
        items = self.handed_items().get(fqn)
        if not items:
            return []
        if self._retirements is None:
            self._retirements = Retirements(self.functions, self.subject_callees)
        fn = self.functions[fqn]
        unseen = "hooks" not in self._roots().get(fqn, frozenset({"hooks"})) and \
            self.unseen_raise(fqn)
        spawners = self.spec.spawners
        if self._taken_queues is None:
            self._taken_queues = taken_queues(self.functions)
        queues = self._taken_queues
        return unretired(fn, self.cfg(fqn), items, self._retirements, self._method,
                         lambda f, s, names: retire_hands_on(
                             f, s, names, lambda c: spawn_target(c, spawners) is not None,
                             queues),
                         (lambda s: self._likely_failure(fn, s)) if unseen else None)

    def unmoved_counts(self, fqn: str) -> list[Unmoved]:
        """Counts ``fqn`` reads for an id and moves on one way on but not on
        another (``counts_moved``)."""
        if self._count_containers is None:
            self._count_containers = count_containers(self.functions.values())
        return unmoved(self.functions[fqn], self.cfg(fqn), self._count_containers,
                       self._method)

    def _method(self, fn: FnView, name: str) -> FnView | None:
        """The subject method ``self.name`` means in ``fn``."""
        cls = fn.self_cls
        found = self.classes.find_member(cls, name) if cls else None
        return self.functions.get(found) if found else None

    def set_pending(self, per_step: tuple[str, ...]) -> list[SetPending]:
        """Sets a request enters each time functions the ``per_step`` hooks
        reach queue its work, and one completion leaves (``counts``)."""
        keyed = {c: [(s.fqn, s.line) for s in info.of_kind("remove")]
                 for c, info in self.containers.items()}
        starts = [f for f, v in self.functions.items() if v.name in per_step]
        out: list[SetPending] = []
        for fqn in sorted(_reach(self._runs, starts)):
            fn = self.functions.get(fqn)
            if fn is None or not self.connected(fqn):
                continue
            lines = {sp.line for sp in self.spawned if sp.spawner == fqn}
            out += set_pending(fn, self.effects.values, keyed, self.state.is_id, lines)
        return out

    def callees(self, fqn: str) -> list[str]:
        """The subject functions that run because ``fqn`` runs, one step
        (calls, constructors, spawned work, nested defs)."""
        return list(self._runs.get(fqn, ()))

    def runs_from(self, starts: list[str], avoid: frozenset[str] = frozenset()) -> set[str]:
        """``starts`` and every subject function they make run (calls,
        constructors, spawned threads, executor tasks, callbacks, the loops
        that take what they put on a queue), not going through ``avoid``."""
        if self._handed is None:
            handed = queue_handoffs(self.functions)
            self._handed = {f: [*gs, *handed.get(f, ())] for f, gs in self._runs.items()}
        return _reach(self._handed, starts, avoid)

    def save_state(self, fn: FnView, chain: str) -> bool:
        """``chain`` in ``fn`` names a request-keyed container every add of
        which is in code only the save hooks reach (``self.store_futures``):
        walking or testing it is about saves, which owe vLLM no failed blocks."""
        if self._save_only_containers is None:
            self._save_only_containers = frozenset(
                c for c, info in self.containers.items()
                if (adds := info.of_kind("add")) and
                all(site.fqn in self.save_only for site in adds))
        c = container_of(chain, fn, self.effects.values) if chain else None
        return c is not None and c in self._save_only_containers

    def background_code(self) -> set[str]:
        """What the functions the subject runs in the background make run
        (``runs_from`` the ``background`` starts)."""
        if self._background_code is None:
            self._background_code = frozenset(self.runs_from(sorted(self.background())))
        return set(self._background_code)

    def background(self) -> frozenset[str]:
        """Functions run by a thread, executor, task or callback the subject
        starts: no caller of theirs is left to clean up after an exception."""
        return frozenset(sp.target for sp in [*self.spawned, *self.thread_starts()])

    def thread_starts(self) -> list[Spawn]:
        """Constructions of a ``threading.Thread`` subclass in connected code:
        each starts the class's ``run`` (once ``start()`` is called on it)."""
        return [s for s in self.constructed_threads if s.spawner in self._connected]

    def swallowed(self, fqn: str) -> list[Swallowed]:
        """Handlers of ``fqn`` that only log, after which its id is handed on
        as if the work had succeeded (``swallowed``)."""
        ids = self.state.of(fqn)
        names = ids.ids | ids.requests
        if not names or self.sends_only(self.functions[fqn].cls):
            return []
        return swallowed(self.functions[fqn], self.effects, names, ids.request_names())

    def sends_only(self, cls: str | None) -> bool:
        """Objects of ``cls`` feed report channels, and only ones that report
        a send done (``LifecycleSpec.send_reports``): a sending thread whose
        finished set a report hook drains into ``finished_sending``."""
        if not cls:
            return False
        fed = {ch for ch, feeders in self.state.channel_classes.items()
               if any(self.classes.related(cls, f) for f in feeders)}
        return bool(fed) and fed <= set(self.spec.send_reports)

    def forgotten(self, fqn: str) -> list[Swallowed]:
        """Handlers of ``fqn``, code only a background thread or task runs,
        that only log a failed piece of the request's work, after which no
        id is handed on (``forgotten``)."""
        if "hooks" in self._roots().get(fqn, frozenset({"hooks"})):
            return []
        ids = self.state.of(fqn)
        names = ids.ids | ids.requests
        return forgotten(self.functions[fqn], self.effects, names,
                         ids.request_names()) if names else []

    def unchecked(self, fqn: str) -> list[Unchecked]:
        """``fqn`` as a done-callback of the subject that hands the request on
        without looking at its future (``lifecycle.callbacks``)."""
        out = []
        for sp in self.spawned:
            if sp.target == fqn and sp.call.endswith("add_done_callback"):
                ids = self.state.of(fqn)
                u = unchecked(self.functions[fqn], ids.request_names(), sp.spawner, sp.line)
                if u is not None:
                    out.append(u)
        return out[:1]

    def lost(self, fqn: str) -> list[Taken]:
        """Locals of ``fqn`` that take ids out of owed state (directly or
        through a helper returning what it takes) and drop them."""
        if self._takers is None:
            by_cls: dict[str, set[str]] = {}
            for c in self.owed:
                by_cls.setdefault(c.owner, set()).add(c.attr)
            self._takers = takers(self.functions, self.effects, by_cls)
        fn = self.functions[fqn]
        attrs = {c.attr for c in self.owed if c.owner == fn.cls}
        return lost_locals(fn, self.effects, attrs, self._takers)

    def unreported(self) -> list[Unreported]:
        """Removals in report functions that report nothing where other
        removals of the same container do (``lifecycle.unreported``)."""
        return unreported(self.functions, self.effects, list(self.reporters), self.containers,
                          self.owed, self.spec.hooks)

    def unlocked(self, teardown: tuple[str, ...] = ()) -> list[Unlocked]:
        """Changes of request-keyed containers, in connected code, made
        without the lock other changes of the same container hold, racing
        with another thread (``locks``). Methods named like a ``teardown``
        glob are left out on both sides (they run when the threads stop)."""
        return unlocked(self.functions, self.effects, self.containers, self._judged(teardown),
                        self.thread_roots(), self._held_by_callers())

    def copy_clears(self, teardown: tuple[str, ...] = ()) -> list[CopyClear]:
        """Containers with no lock that connected code reads whole and then
        clears while another thread adds to them (``locks.copy_then_clear``)."""
        return copy_then_clear(self.functions, self.effects, self.containers,
                               self._judged(teardown), self.thread_roots(),
                               self._held_by_callers())

    def _held_by_callers(self) -> dict[str, Locks]:
        """``locks.held_by_callers``, once for both lock checks."""
        if self._held is None:
            self._held = held_by_callers(self.functions, self.effects, self.classes.overrides)
        return self._held

    def asserted(self, teardown: tuple[str, ...] = ()) -> list[Asserted]:
        """Asserts in connected code that a request's entry is still in a
        container another function removes entries from (``asserted``)."""
        ends = {self.spec.delay_free, *self.spec.delay_free_instead}
        ending = self.runs_from(sorted(f for f, fn in self.functions.items()
                                       if fn.name in ends))
        return asserted_entries(self.functions, self.effects, self.containers,
                                self._judged(teardown), ending, self.spec.finished_params,
                                self.classes)

    def unannounced(self) -> list[Unannounced]:
        """Returns of the delay-free hook that end a request the commit hook
        announced to the workers without telling them (``announced``)."""
        sp = self.spec
        return unannounced(self.functions, self.classes, self.effects, sp.commit, sp.delay_free,
                           sp.metadata_builder, sp.delay_element)

    def unseen(self) -> list[Unseen]:
        """Returns of the delay-free hook for a request the commit hook never
        saw (its cleared flag still set) that announce nothing (``announced``)."""
        sp = self.spec
        return unseen(self.functions, self.classes, self.effects, sp.commit, sp.delay_free,
                      sp.metadata_builder, sp.delay_element, lambda f: _reach(self._runs, [f]))

    def intakes(self, found: list[Unannounced]) -> list[Intake]:
        """Worker code that takes the id of an unannounced request (``found``,
        from ``unannounced``) from the metadata into a container of its own
        (``intakes``)."""
        return [i for u in found for i in intakes(self.functions, self.effects, u, self.sides)]

    def skipped_releases(self, fqn: str) -> list[SkippedRelease]:
        """Early returns of ``fqn`` before every loop that releases something
        per request of the step (``step_releases``)."""
        return skipped_releases(fqn, self.functions[fqn], self.cfg(fqn), self.state,
                                self.spec.releases)

    def unacted(self, fqn: str) -> list[Unacted]:
        """Paths of ``fqn`` that see a polled transfer done and then neither
        report, remove nor hand on its request (``polled``)."""
        keyed = {c.attr for c in self.containers}
        return unacted(self.functions[fqn], self.effects, keyed, self.spec.done_tests)

    def unreplied(self, fqn: str) -> list[Unreplied]:
        """Paths of ``fqn``'s serving loops that receive on a REP socket and
        go back without replying (``replies``)."""
        if self._reps is None:
            self._reps = rep_sockets(self.functions)
        return unreplied(self.functions[fqn], self._reps)

    def unclosed(self, base: str) -> list[Unclosed]:
        """Per connector class deriving from ``base`` that overrides the
        shutdown hook: what its objects hold that the code closes somewhere
        and the hook never closes (``shutdown``)."""
        calls = self.effects.calls

        def resolve(fn: FnView, c) -> list[str]:
            return [t.fqn for t in calls.resolve(fn.ctx, c)]

        return unclosed(self.functions, self.classes, base, self.spec.shutdown,
                        self.spec.closes, resolve, lambda starts: self.runs_from(starts),
                        self.spec.closeables)

    def resumed_appends(self) -> list[ResumedAppend]:
        """Functions appending the running requests' new blocks to per-request
        state with no test for a request resumed after preemption (``resumed``)."""
        spec = self.spec
        return resumed_appends(self.functions, self._analysed, spec.running_carrier,
                               spec.running_blocks, spec.resumed, spec.preempted)

    def partial_resets(self) -> list[PartialReset]:
        """Arms for a resumed request that reset some of the request's state
        and keep the rest that is set up with it (``resumed``)."""
        return partial_resets(self.functions, self.spec.resumed)

    def probe_leftovers(self) -> list[ProbeLeft]:
        """Request-keyed containers the probe fills that only the commit hook
        empties: a request that ends before allocation leaves its entry
        (``probe_left``)."""
        spec = self.spec
        ending = frozenset({spec.delay_free, *spec.delay_free_instead})

        def run(names: set[str] | frozenset[str]) -> set[str]:
            return self.runs_from(sorted(f for f, v in self.functions.items() if v.name in names))
        found = probe_leftovers(self.leaf_uses(), self.state.keyed_attrs, run({spec.probe}),
                                run({spec.commit}), run(ending), ending)
        return [p if p.end else replace(p, end=self._ending_of_prober(p.add.fqn)) for p in found]

    def _ending_of_prober(self, fqn: str) -> str | None:
        """The ending hook of the connector whose probe makes ``fqn`` run,
        when a helper object (a lookup client) holds the probe's state: where
        the missing removal belongs."""
        for h in sorted(f for f, v in self.functions.items() if v.name == self.spec.probe):
            cls = self.functions[h].cls
            # a base's probe runs its subclasses' overrides too: not one connector's
            if cls and not self.classes.overrides(h) and fqn in self.runs_from([h]):
                # the class that answers the probe ends the request too (not a
                # base class's default it inherits)
                end = self.classes.find_member(cls, self.spec.delay_free)
                if end in self.functions and end.rpartition(".")[0] == h.rpartition(".")[0]:
                    return end
        return None

    def peer_ids(self) -> list[PeerId]:
        """Ids read off a peer's message and put, unchecked, where a report
        hook collects them (``peer_ids``)."""
        names = {m for c in self.spec.channels for m in c.methods}
        hooks = tuple(f for f in self.reporters if self.functions[f].name in names)
        return peer_ids(self.functions, self.state.report_fed, frozenset(self.spec.peer_calls),
                        self._analysed, self.effects.values.call_sites, self._judged(()), hooks,
                        self.state.report_locals)

    def subject_callees(self, fn: FnView, c: CallFact) -> list[str]:
        """The subject functions (``functions``) call ``c`` of ``fn`` may run."""
        return [t.fqn for t in self.effects.calls.resolve(fn.ctx, c) if t.fqn in self.functions]

    def _analysed(self, fn: FnView, c: CallFact) -> list[str]:
        """The analysed functions call ``c`` of ``fn`` may run."""
        return [t.fqn for t in self.effects.calls.resolve(fn.ctx, c) if not t.external]

    def reported_twice(self) -> list[ReportedTwice]:
        """Reports of an id made whether or not it is still pending, while
        another function reports the pending ones (``reported_twice``)."""
        return reported_twice(self.functions, self.effects, self.owed, self._judged(()))

    def _judged(self, teardown: tuple[str, ...]) -> list[str]:
        return [f for f in self.functions if f in self._connected and not any(
            fnmatch.fnmatch(self.functions[f].name, p) for p in teardown)]

    def partial_removals(self) -> list[Partial]:
        """Places in connected code that take an id out of part of the
        containers another place removes it from together (``together``)."""
        fills: dict[Container, set[str]] = {}
        removes: dict[str, set[Container]] = {}
        for c, info in self.containers.items():
            for s in info.sites:
                if s.kind == "add":
                    fills.setdefault(c, set()).add(s.fqn)
                elif s.kind == "remove":
                    removes.setdefault(s.fqn, set()).add(c)
        calls, values = self.effects.calls, self.effects.values

        def own(fn: FnView, s) -> dict[Container, int]:
            # a key taken out of a container ids enter, whatever the key's
            # name (ids decoded from a peer's message are ids too)
            out: dict[Container, int] = {}
            for op in fn.containers(s):
                if op.op in REMOVE_OPS and op.key and IDENT.match(op.key):
                    c = container_of(op.container, fn, values)
                    if c is not None and c in fills:
                        out.setdefault(c, op.line)
            return out

        def helpers(fn: FnView, s) -> tuple[set[Container], list[str]]:
            names = [t.fqn for c in fn.calls(s)
                     if any(self.state.is_id(fn, a) for a in (*c.args, *(v for _, v in c.kwargs))
                            if a)
                     for t in calls.resolve(fn.ctx, c) if t.fqn in self.functions]
            # the helper's removals, and its own helpers' (two calls deep)
            found = {c for t in names for g in (t, *self._runs.get(t, ()))
                     for c in removes.get(g, ())}
            return found, names

        judged = [f for f in self.functions if f in self._connected]
        endings = Endings(self.spec.finished_params, self.spec.delay_free, self.owed,
                          frozenset(self.reporters))
        # cleared or replaced on every call of a method after the constructor
        # (at its top level; a reset in a failure branch is not): a per-step
        # buffer (any replacement drops the old entries, a comprehension too)
        emptied = frozenset(Container(fn.cls, attr) for fn in self.functions.values()
                            if fn.cls and not is_init(fn.name) for st in fn.fact.body
                            for attr in [*(a for a, _ in resets(fn, st)),
                                         *(a.target[5:] for a in fn.assigns(st) if not a.aug
                                           and a.target == f"self.{self_attr(a.target)}")])
        return partial_removals(self.functions, judged, self.effects, fills, own, helpers,
                                endings, emptied)

    def _roots(self) -> dict[str, frozenset[str]]:
        if self._thread_roots is None:
            self._thread_roots = self.thread_roots()
        return self._thread_roots

    def thread_roots(self) -> dict[str, frozenset[str]]:
        """Per connected function, the threads it can run on: ``"hooks"``
        (vLLM's calls into the connector) and each spawned target or thread
        ``run`` (by its FQN), following calls but not spawns."""
        spawns = {(sp.spawner, sp.target) for sp in (*self.spawned, *self.constructed_threads)}
        runs = {f: [g for g in gs if (f, g) not in spawns] for f, gs in self._runs.items()}
        out: dict[str, set[str]] = {}
        for root, starts in (("hooks", list(self._starts)),
                             *((t, [t]) for t in sorted({t for _, t in spawns}))):
            for f in _reach(runs, starts):
                out.setdefault(f, set()).add(root)
        return {f: frozenset(r) for f, r in out.items()}

    def _cleanup(self, fn: FnView) -> tuple[str, ...]:
        """Parameters holding ids of finished requests, for this hook."""
        return tuple(p for p in self.spec.finished_params if p in fn.param_names)

    def effects_of(self, fqn: str) -> list[Effect]:
        """Every effect of every statement of ``fqn``, in source order."""
        fn = self.functions[fqn]
        return [e for s in fn.stmts for e in self.effects.of(fn, s)]

    def holds_ids(self, fqn: str) -> bool:
        ids = self.state.of(fqn)
        return bool(ids.ids or ids.colls or ids.requests)


def build_lifecycle(linker) -> Lifecycle:
    """The lifecycle model of a linked analysis (``linker``: graph.build.Linker)."""
    model, values, calls = linker.model, linker.values, linker.calls
    spec = lifecycle_spec(linker.protocol)
    fns = {fqn: v for fqn in sorted(model.defs)
           if _is_subject(model, fqn) and (v := view(model, fqn)) is not None
           and not values.body_replaced(fqn)}  # a def its decorator replaces never runs
    state = IdState(spec)
    # vLLM's own methods that run on the subject's objects (a connector that
    # subclasses vLLM's NIXL worker inherits the ``start_load_kv`` that hands
    # ids to its ``_read_blocks_for_req``): ids flow through them, and rules
    # judge the subject's functions only
    hooks = {*spec.hooks, *spec.delay_free_instead, *_base_members(linker)}
    inherited, runs_on = reached(*inherited_methods(model, linker.classes, fns, values), fns,
                                 linker.classes, hooks)
    overrides = override_calls(inherited, fns, linker.classes)
    flowing = {**inherited, **fns}
    # declared id fields first: ``seed`` reads them (``pull_meta.d_req_id``)
    seed_class_fields(state, (c for m in _subject_modules(model) + packages_of(model, inherited)
                              for c in model.facts[m].classes))
    for fn in flowing.values():
        seed_annotated(state, fn)
    for fn in flowing.values():
        seed(state, fn)
    # backwards from what the report hooks hand back (``report_sources``)
    seed_report_sources(state, fns, calls)
    state.id_returners = {fn.name for fn in fns.values() if returns_id(state, fn)}
    spawned = tuple(spawns(fns, spec.spawners, calls))
    handed = _spawned_calls(fns, spawned, spec.spawners)
    for _ in range(MAX_ROUNDS):
        changed = False
        returners = coll_returner_names(state, fns.values())
        if returners != state.coll_returners:
            state.coll_returners = returners
            changed = True
        groupers = coll_returner_names(state, fns.values(), returns_group)
        if groupers != state.group_returners:
            state.group_returners = groupers
            changed = True
        for fn in flowing.values():
            changed |= flow_locals(state, fn)
            changed |= _bind_calls(state, fn, flowing, calls, linker.classes)
            for call, target in handed.get(fn.fqn, ()):
                changed |= bind_call(state, fn, call, fns[target])
            for call, target in overrides.get(fn.fqn, ()):
                changed |= bind_call(state, fn, call, fns[target])
            changed |= _keyed_attrs(state, fn, values)
            outer = flowing.get(fn.fqn.rpartition(".")[0])
            if outer is not None:
                changed |= bind_defaults(state, fn, outer)
        if not changed:
            break
    spawn_patterns = tuple(s.call for s in spec.spawners)
    eff = Effects(state, values, calls, spawn_patterns)
    containers = _containers(fns, eff)
    owed = owed_containers(linker.graph, fns, spec, containers)
    runs, threads = _run_edges(linker, fns, list(spawned))
    starts = _entries(linker, fns, spec) + inherited_starts(inherited, runs_on, fns,
                                                            linker.classes, hooks)
    side_starts = {side: inherited_starts(inherited, runs_on, fns, linker.classes, set(names))
                   for side, names in _side_hooks(spec)}
    lc = Lifecycle(spec, state, eff, fns, containers, linker.classes,
                   _sides(fns, spec, runs, side_starts), owed, spawned, tuple(threads),
                   tuple(report_functions(linker.graph, fns, spec)),
                   _save_only(fns, spec, runs),
                   frozenset(_reach(runs, starts)), runs, tuple(starts))
    state.runtime_attrs = runtime_attrs(fns, lc.background_code())
    lc._calls = calls
    lc.inherited, lc.inherited_fns = runs_on, inherited
    return lc


def _save_only(fns: dict[str, FnView], spec: LifecycleSpec,
               runs: dict[str, list[str]]) -> frozenset[str]:
    """What the save hooks reach and the load hooks do not, following what
    runs (``_run_edges``) and queue hand-offs (``handoffs``)."""
    handed = queue_handoffs(fns)
    edges = {f: runs.get(f, []) + handed.get(f, []) for f in fns}

    def reach(names: tuple[str, ...]) -> set[str]:
        return _reach(edges, [f for f, v in fns.items() if v.name in names])
    return frozenset(reach(spec.save_hooks) - reach(spec.load_hooks))


def _entries(linker, fns: dict[str, FnView], spec: LifecycleSpec) -> list[str]:
    """Where vLLM enters the subject: its hooks, and the constructors of
    classes with one (see ``Lifecycle.connected``)."""
    # and the hooks vLLM calls instead of the delay-free one (a mixin's, such
    # as SupportsHMA.request_finished_all_groups, not the base class's)
    hooks = {*spec.hooks, *spec.delay_free_instead}
    # every method of the analysed connector base class is called by vLLM
    # (``set_xfer_handshake_metadata`` starts NIXL's listener), listed or not;
    # but names as common as ``shutdown`` make no class a connector: they
    # count on classes that derive from the base or have a listed hook
    base = linker.protocol.base_class
    members = _base_members(linker)
    hooked = {v.cls for v in fns.values() if v.cls and (
        v.name in hooks or base in linker.classes.mro(v.cls))}
    return [f for f, v in fns.items() if v.name in hooks or (
        v.cls in hooked and (v.name in members or v.name == "__init__"))]


def _base_members(linker) -> set[str]:
    """The public methods of the analysed connector base class."""
    base = linker.protocol.base_class
    return {d.rpartition(".")[2] for d in linker.model.defs
            if d.rpartition(".")[0] == base and not d.rpartition(".")[2].startswith("_")}


def _run_edges(linker, fns: dict[str, FnView], spawned: list[Spawn]
               ) -> tuple[dict[str, list[str]], list[Spawn]]:
    """Per subject function, the subject functions that run because it runs:
    its callees, constructors (and the ``run`` of a thread class), spawned
    threads, executor tasks and callbacks, and defs nested in it; and, as
    spawns, the constructions of thread classes."""
    out: dict[str, list[str]] = {f: [] for f in fns}
    threads: list[Spawn] = []
    for sp in spawned:
        out[sp.spawner].append(sp.target)
    for f in fns:
        parent = f.rpartition(".")[0]
        if parent in out:
            out[parent].append(f)
    graph = linker.graph
    for f in fns:
        if f not in graph:
            continue
        for _, callee, data in graph.out_edges(f, data=True):
            if data.get("kind") in ("call", "dispatch"):
                out[f].append(callee)
                out[f].append(f"{callee}.__init__")  # ``Cls(...)``: its constructor runs
                cls = callee.removesuffix(".__init__")
                for run in thread_body(linker.classes, cls):
                    out[f].append(run)
                    threads.append(Spawn(f, run, data.get("line", 0),
                                         f"{cls.rpartition('.')[2]}(...).start"))
    runs = {f: [g for g in dict.fromkeys(gs) if g in fns] for f, gs in out.items()}
    return runs, sorted(set(threads), key=lambda s: (s.spawner, s.line, s.target))


def _reach(runs: dict[str, list[str]], starts: list[str],
           avoid: frozenset[str] = frozenset()) -> set[str]:
    """``starts`` and every function they make run (``_run_edges``), not
    going through ``avoid``."""
    frontier = list(starts)
    seen = set(frontier)
    while frontier:
        for g in runs.get(frontier.pop(), ()):
            if g not in seen and g not in avoid:
                seen.add(g)
                frontier.append(g)
    return seen


def _side_hooks(spec: LifecycleSpec) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return (("scheduler", tuple(spec.scheduler_hooks)), ("worker", tuple(spec.worker_hooks)))


def _sides(fns: dict[str, FnView], spec: LifecycleSpec, runs: dict[str, list[str]],
           more_starts: dict[str, list[str]] | None = None) -> dict[str, frozenset[str]]:
    """Each subject function's sides: the hooks of each side by name (and
    ``more_starts[side]``: the subject functions an inherited hook of that
    side runs), then what they make run (``_reach``)."""
    out: dict[str, set[str]] = {}
    for side, names in _side_hooks(spec):
        more = (more_starts or {}).get(side, [])
        for f in _reach(runs, [f for f, v in fns.items() if v.name in names] + more):
            out.setdefault(f, set()).add(side)
    return {f: frozenset(s) for f, s in sorted(out.items())}


def _subject_modules(model) -> list[str]:
    """The analysed subject modules, sorted (with the metadata modules that
    declare fields and no functions)."""
    return [m for m in sorted(model.facts) if (sf := model.source(m)) and sf.subject]


def _is_subject(model, fqn: str) -> bool:
    sf = model.source(model.defs[fqn].module)
    return bool(sf and sf.subject)


def _bind_calls(state: IdState, fn: FnView, fns: dict[str, FnView], calls, classes) -> bool:
    changed = False
    for c in fn.all_calls:
        if not (c.args or c.kwargs):
            continue
        for t in calls.resolve(fn.ctx, c):
            if t.external:
                continue
            callee = fns.get(t.fqn)
            if callee is not None:
                changed |= bind_call(state, fn, c, callee)
            elif classes.is_class(t.fqn):
                # ``Meta(load_intents=intents)``: the arguments reach ``__init__``
                init = fns.get(classes.find_member(t.fqn, "__init__") or "")
                if init is not None:
                    changed |= bind_call(state, fn, c, init, constructor=True)
                else:
                    # ``SaveTask(request_ids=ids)`` of a dataclass: the field
                    # holds the ids, so ``task.request_ids`` walks them
                    changed |= _keyword_fields(state, fn, c)
    return changed


def _spawned_calls(fns: dict[str, FnView], spawned: tuple[Spawn, ...],
                   spawners: tuple[Spawner, ...]) -> dict[str, list[tuple[CallFact, str]]]:
    """Per spawning function, the call each of its spawns amounts to:
    ``executor.submit(self._pull, rid, meta)`` calls ``self._pull(rid,
    meta)`` (the positional arguments after the callable), so the ids it is
    given are the target's parameters' ids."""
    out: dict[str, list[tuple[CallFact, str]]] = {}
    for sp in spawned:
        fn = fns[sp.spawner]
        for c in fn.all_calls:
            if c.line != sp.line or c.callee != sp.call:
                continue
            for s in spawners:
                if s.arg is None or s.called or s.arg >= len(c.args) or \
                        not fnmatch.fnmatch(c.callee or "", s.call):
                    continue
                target = c.args[s.arg] or ""
                out.setdefault(sp.spawner, []).append(
                    (c._replace(callee=target, args=c.args[s.arg + 1:], kwargs=()), sp.target))
                break
    return out


def _keyword_fields(state: IdState, fn: FnView, call) -> bool:
    """Keywords of a constructor with no analysed ``__init__`` given an id
    collection become request-keyed attribute names."""
    changed = False
    for k, v in call.kwargs:
        if v and k not in state.keyed_attrs and state.is_coll(fn, v):
            state.keyed_attrs.add(k)
            changed = True
    return changed


def _keyed_attrs(state: IdState, fn: FnView, values) -> bool:
    """Attributes that receive ids by key or element become request-keyed."""
    before = len(state.keyed_attrs) + len(state.coll_valued) + len(state.id_valued)
    # ``meta.lookup_ids = self._lookups``: the field holds the same ids
    for a in fn.all_assigns:
        if "." in a.target and a.value and "(" not in a.value and \
                a.value.rpartition(".")[2] in state.keyed_attrs:
            state.keyed_attrs.add(a.target.rpartition(".")[2])
    for s in fn.stmts:
        for op in fn.containers(s):
            # ``self._load_jobs[job_id] = request.request_id``: values that are ids
            if op.op == "setitem" and op.container.startswith("self.") and \
                    op.container.count(".") == 1 and not state.is_id(fn, op.key) and \
                    _stores_an_id(state, fn, s, op):
                state.id_valued.add(op.container.rpartition(".")[2])
            # ``self._by_shm[shm] = set(req_ids)``: values that are id collections
            elif op.op == "setitem" and "." in op.container and not state.is_id(fn, op.key) and \
                    any(state.is_coll(fn, n) for n in s.names
                        if n not in (op.container, op.key)):
                state.coll_valued.add(op.container.rpartition(".")[2])
        mentioned = state.id_names_in(fn, s.names)
        if not mentioned and not any(state.is_id(fn, op.key) for op in fn.containers(s)):
            continue  # (``self._f[request_ids[0]] = ...`` names no id but keys by one)
        for op in fn.containers(s):
            if op.op in ADD_OPS and (state.is_id(fn, op.key) or "[]" in op.container):
                state.keyed_attrs.add(op.container.replace("[]", "").rpartition(".")[2])
        for c in fn.calls(s):
            base, _, meth = (c.callee or "").rpartition(".")
            if meth in QUEUE_PUTS and base and container_of(base, fn, values):
                state.keyed_attrs.add(base.rpartition(".")[2])
    return len(state.keyed_attrs) + len(state.coll_valued) + len(state.id_valued) != before


def _stores_an_id(state: IdState, fn: FnView, s, op) -> bool:
    """``self._load_jobs[job_id] = request.request_id``: the statement is that
    one store, makes no call, and every other name it reads is an id (the
    facts keep no value of a subscript store, so it is read off the names)."""
    if s.kind != "simple" or fn.calls(s) or len(fn.containers(s)) != 1 or not op.key:
        return False
    key_names = set(IDENT.findall(op.key))
    # the chains themselves, not their heads (``request`` of ``request.request_id``)
    chains = [n for n in s.names if not any(m.startswith(n + ".") for m in s.names)]
    rest = [n for n in chains if n != op.container and n not in key_names]
    return bool(rest) and all(state.is_id(fn, n) for n in rest)


def inherited_containers(lc: Lifecycle) -> dict[Container, ContainerInfo]:
    """What the inherited methods (``Lifecycle.inherited``: vLLM's own, run
    on the subject's objects) add to, remove from and reset, by the
    container of the vLLM class that defines them."""
    return _containers(dict(sorted(lc.inherited_fns.items())), lc.effects)


def _containers(fns: dict[str, FnView], eff: Effects) -> dict[Container, ContainerInfo]:
    out: dict[Container, ContainerInfo] = {}
    # (function, parameter) -> (line, kind) of what it does to a container it was handed
    handed: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for fqn, fn in fns.items():
        params = set(fn.param_names) - {"self", "cls"}
        for s in fn.stmts:
            for e in eff.of(fn, s):
                if e.kind not in ("add", "remove", "reset"):
                    continue
                if e.container is None:
                    if e.kind == "remove" and e.target in params:
                        handed.setdefault((fqn, e.target), []).append((e.line, e.kind))
                    continue
                if e.kind == "reset" and e.container.attr.rpartition(".")[2] not in \
                        eff.state.keyed_attrs:
                    continue
                info = out.setdefault(e.container, ContainerInfo(e.container))
                info.sites.append(Site(fqn, e.line, e.kind))
    for c, fqn, line, kind in _handed_removals(fns, eff, handed):
        if c in out:  # a container ids enter elsewhere: its removals are its own
            out[c].sites.append(Site(fqn, line, kind))
    return dict(sorted(out.items()))


def _handed_removals(fns: dict[str, FnView], eff: Effects,
                     handed: dict[tuple[str, str], list[tuple[int, str]]]
                     ) -> Iterator[tuple[Container, str, int, str]]:
    """``(container, helper, line, kind)`` for a helper that takes ids out
    of a container it was handed (``del transfers[req_id]`` in NIXL's
    ``_pop_done_transfers``), called with ``self.<attr>`` (``self.
    _pop_done_transfers(self._recving_transfers)``): the removal is of the
    caller's container."""
    if not handed:
        return
    for fn in fns.values():
        for call in fn.all_calls:
            for t in eff.calls.resolve(fn.ctx, call):
                callee = fns.get(t.fqn)
                if callee is None:
                    continue
                for arg, param in bound_args(callee.fact, call):
                    sites = handed.get((t.fqn, param))
                    if not sites or not arg or not arg.startswith("self."):
                        continue
                    c = container_of(arg, fn, eff.values)
                    if c is not None:
                        yield from ((c, t.fqn, line, kind) for line, kind in sites)


# queue and event bookkeeping and lookups: not where a task's work fails
_BOOKKEEPING = frozenset({"get", "get_nowait", "put", "put_nowait", "task_done", "set",
                          "is_set", "wait", "clear", "qsize", "empty", "full", "items",
                          "keys", "values", "copy", "join", "start", "done"})


def _handler_works(fn: FnView, handler: Stmt) -> bool:
    """The ``except`` does more than log and move on: it calls something
    other than logging or a builtin, or changes state
    (``self._mark_request_done(tid)``; a local it names in the log is not),
    where the caught failure can be reported; the ids need not be named
    there (the task that failed is known by the handler's own locals)."""
    return any(s.kind == "simple" and (
        any("." in a.target or "[" in a.target for a in fn.assigns(s)) or fn.containers(s) or
        any(not is_logging(c.callee or "") and (c.callee or "") not in PURE
            for c in fn.calls(s))) for s in walk(handler.body))
