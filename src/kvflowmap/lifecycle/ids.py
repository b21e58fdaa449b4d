"""Which names hold request ids, found by data flow, never by their spelling.

Seeds come from the protocol (``LifecycleSpec``): hook parameters that are id
collections (``finished_req_ids``), hook parameters that are a ``Request``
(``request.request_id``), and the id fields of vLLM's objects
(``x.request_id``, ``meta.req_id``). From there ids flow through local
assignments, through loops over id collections and over the keys of
request-keyed containers, and into the parameters of analysed functions they
are passed to. A container is request-keyed when an id is its key or element
(``self._recving[req_id] = ...``, ``self._done.add(rid)``,
``self._q.put((rid, meta))``); its keys are ids in turn, which is why the two
are computed together, to a fixpoint. Ids also flow back through returns (a
function whose every return is an id collection), into the fields of a task
object built with them (``SaveTask(request_ids=ids)``), through copies, set
operators and comprehensions that keep their elements, out of a swap (``done,
self._done = self._done, set()``), and through containers whose values are id
collections (``self._by_shm[shm] = set(ids)``). An entry read by an id
(``self._d.get(rid)``) is the request's record, not an id; a local the
function computes itself and then looks a request-keyed container up by
(``req_id, tp = msg.rsplit(":", 1)``, then ``self._recving.get(req_id)``) is
an id.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property

from kvflowmap.facts import CallFact, Stmt
from kvflowmap.index.text import split_commas
from kvflowmap.lifecycle.containers import PURE, READ_METHODS
from kvflowmap.lifecycle.spec import LifecycleSpec
from kvflowmap.lifecycle.view import FnView, bound_args
from kvflowmap.lifecycle.view import walk as walk_stmts

IDENT = re.compile(r"[A-Za-z_][\w.]*")
# Wrappers that keep the elements of what they wrap: ``sorted(self._x)``.
KEEP = ("list", "sorted", "set", "tuple", "frozenset", "iter", "reversed", "enumerate")
_VIEW_METHODS = (".items()", ".keys()", ".copy()", ".values()")
QUEUE_PUTS = frozenset({"put", "put_nowait", "append", "appendleft"})
COLLECT = frozenset({"add", "append", "appendleft", "setitem", "extend", "update", "insert"})


@dataclass
class FnIds:
    """The names of one function that hold ids, id collections, or requests."""

    ids: set[str] = field(default_factory=set)
    colls: set[str] = field(default_factory=set)
    requests: set[str] = field(default_factory=set)
    # per-request values: ``meta`` in ``for rid, meta in self._reqs.items()``
    records: set[str] = field(default_factory=set)
    # results of operations (``future = self._client.submit(...)``, ``ok =
    # self._send(rid)``): a test on one asks whether the work succeeded
    outcomes: set[str] = field(default_factory=set)
    # parameters that are records because a caller passed one (``plans`` of
    # ``self._submit(plans, rid)``): the request's data, not its id
    passed: set[str] = field(default_factory=set)
    # locals whose values are id collections under keys that are not ids
    # (``pulls[path].append((req_id, ...))``: the requests grouped by peer)
    groups: set[str] = field(default_factory=set)

    def size(self) -> int:
        return len(self.ids) + len(self.colls) + len(self.requests) + len(self.records) + \
            len(self.outcomes) + len(self.groups)

    def request_names(self) -> set[str]:
        """The names that hold a request's id or data."""
        return self.ids | self.colls | self.requests | self.records

    def own_request_names(self) -> set[str]:
        """``request_names``, or none when the function holds no id and knows
        the request only by data a caller passed in (and what it made of it)."""
        if self.passed and not (self.ids or self.colls or self.requests):
            return set()
        return self.request_names()


@dataclass
class IdState:
    """Ids per function and the request-keyed containers found so far.

    ``keyed_attrs`` are attribute names of request-keyed containers (``_recving``):
    iterating ``anything._recving`` yields ids, so a worker's loop over the
    metadata's ``reqs_to_recv`` is seen once the metadata class fills it by id."""

    spec: LifecycleSpec
    fns: dict[str, FnIds] = field(default_factory=dict)
    keyed_attrs: set[str] = field(default_factory=set)
    # names of analysed functions that return a request id taken from what
    # they are given (``def _request_id(request): return str(request.request_id)``)
    id_returners: set[str] = field(default_factory=set)
    # names of analysed functions every return of which hands back an id
    # collection (``return filtered`` after ``filtered[req_id] = ...``): ids
    # flow back to the caller through the return
    coll_returners: set[str] = field(default_factory=set)
    # names of analysed functions every return of which hands back a local of
    # id collections grouped under other keys (``return kv_pulls``)
    group_returners: set[str] = field(default_factory=set)
    # attribute names of containers whose values are id collections, under
    # keys that are not ids (``self._pending_load_reqs[shm] = set(req_ids)``)
    coll_valued: set[str] = field(default_factory=set)
    # attribute names of containers whose values are single request ids, under
    # keys that are not ids (``self._load_jobs[job_id] = request.request_id``)
    id_valued: set[str] = field(default_factory=set)
    # attribute and key names that hold one request id: the protocol's
    # ``id_fields`` and fields declared with an id type (``d_req_id: ReqId``)
    id_attrs: set[str] = field(default_factory=set)
    # names of the analysed classes that declare a field holding one request id
    # (``class WriteTask: request_id: ReqId``): a value of one is a request's record
    record_types: set[str] = field(default_factory=set)
    # attribute names of the ``self`` containers a report hook hands back
    # (``report_sources``): what is put in them is reported
    report_fed: set[str] = field(default_factory=set)
    # (function, local) pairs whose ids a report hook hands back: its own
    # returned local, and those of the helpers it takes them from
    report_locals: set[tuple[str, str]] = field(default_factory=set)
    # per report channel, the classes whose objects' containers a report hook
    # hands back (the hook's own class, or the class of the object it asks:
    # ``self.send_thread.get_done()``): who feeds which channel
    channel_classes: dict[str, set[str]] = field(default_factory=dict)
    # names of ``self`` attributes background work changes (``runtime``):
    # a test of one is an outcome, not configuration
    runtime_attrs: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        self.id_attrs |= set(self.spec.id_fields)

    @cached_property
    def report_methods(self) -> frozenset[str]:
        """Names of the protocol's report-channel methods (``get_finished``)
        that hand back request ids (asked for every assignment: built once)."""
        return frozenset(m for c in self.spec.channels for m in c.methods
                         if c.element is not None or c.keyword)  # not the blocks channel

    def of(self, fqn: str) -> FnIds:
        return self.fns.setdefault(fqn, FnIds())

    # -- questions about one text in one function --------------------------
    def is_id(self, fn: FnView, text: str | None) -> bool:
        """``text`` (a chain or an expression) holds or contains an id."""
        if not text:
            return False
        mine = self.of(fn.fqn)
        for tok in IDENT.findall(text):
            if tok in mine.ids:
                return True
            head, _, last = tok.rpartition(".")
            if head and last in self.id_attrs:
                return True
        # an element picked from a collection of ids: ``request_ids[0]``
        return any(m in mine.colls for m in _INDEXED.findall(text))

    def id_names_in(self, fn: FnView, names: tuple[str, ...]) -> set[str]:
        """The names of a statement that hold an id or a request."""
        mine = self.of(fn.fqn)
        out = set()
        for n in names:
            head, _, last = n.rpartition(".")
            if n in mine.ids or n in mine.requests or (head and last in self.id_attrs):
                out.add(n)
        return out

    def is_coll(self, fn: FnView, text: str | None) -> bool:
        """``text`` evaluates to a collection of ids (or a dict keyed by them)."""
        base = unwrap(text or "")
        if not base:
            return False
        if base in self.of(fn.fqn).colls:
            return True
        last = base.rpartition(".")[2]
        return "." in base and (last in self.keyed_attrs or last in self.id_attrs
                                or last in self.spec.id_collections)


_INDEXED = re.compile(r"([A-Za-z_][\w.]*)\[\s*-?\d+\s*\]")
DEQUEUE = (".get()", ".get_nowait()", ".popleft()", ".pop()")


def read_from(value: str | None, suffixes: tuple[str, ...]) -> str | None:
    """The attribute ``X`` that ``value`` reads with one of ``suffixes``
    (``self._q.get()`` -> ``_q`` for ``.get()``), or None."""
    v = value or ""
    for m in suffixes:
        if v.endswith(m) and "." in v[: -len(m)]:
            return v[: -len(m)].rpartition(".")[2]
    return None


def _dequeues(state: IdState, fn: FnView, s, value: str | None) -> bool:
    """``rid = self._q.get()``: an element taken off a request-keyed queue or
    list; ``self._d.get(rid)`` and ``self._d.pop(rid)`` read a value by key."""
    attr = read_from(value, DEQUEUE)
    return attr in state.keyed_attrs and \
        not any(c.args for c in fn.calls(s) if f"{c.callee}()" == value)


def unwrap(text: str) -> str:
    """The container a loop or wrapper walks: ``sorted(self._x.items())`` -> ``self._x``."""
    t = text.strip()
    changed = True
    while changed:
        changed = False
        for w in KEEP:
            if t.startswith(w + "(") and t.endswith(")"):
                t = t[len(w) + 1:-1].split(",")[0].strip()
                changed = True
        for m in _VIEW_METHODS:
            if t.endswith(m):
                t = t[: -len(m)]
                changed = True
        m2 = _OR_EMPTY.fullmatch(t)
        if m2:  # ``sending or ()``: the collection, or nothing
            t = m2.group(1).strip()
            changed = True
    return t if IDENT.fullmatch(t) else ""


_OR_EMPTY = re.compile(r"(.+?)\s+or\s+(?:\(\)|\[\]|\{\}|set\(\)|dict\(\)|list\(\))")


def _zip_args(iterable: str) -> list[str]:
    """The arguments of ``zip(a, b, strict=True)`` (keywords left out), or []."""
    if not (iterable.startswith("zip(") and iterable.endswith(")")):
        return []
    return [a for a in split_commas(iterable[4:-1]) if a and "=" not in a]


def loop_targets(text: str | None) -> tuple[list[str], str]:
    """(target names, iterable text) of a ``for`` statement's header text."""
    if not text or " in " not in text:
        return [], ""
    targets, _, iterable = text.partition(" in ")
    names = [t.strip(" ()[]") for t in targets.split(",")]
    return [n for n in names if n.isidentifier()], iterable.strip()


def seed(state: IdState, fn: FnView) -> None:
    """Ids a hook receives from vLLM, by the protocol's parameter names, and
    parameters that carry one in an id field (``task.req_id``)."""
    mine = state.of(fn.fqn)
    params = set(fn.param_names)
    mine.colls |= params & set(state.spec.id_params.get(fn.name, ()))
    mine.requests |= params & set(state.spec.request_params.get(fn.name, ()))
    fields = state.id_attrs
    for s in fn.stmts:
        for n in s.names:
            head, _, last = n.partition(".")
            if head in params and head not in ("self", "cls") and last in fields:
                mine.requests.add(head)


_ID_RETURN = re.compile(r"(?:str\()?(\w+)\.(\w+)\)?")


def returns_id(state: IdState, fn: FnView) -> bool:
    """Every return of ``fn`` hands back the id field of one of its
    parameters (``return str(request.request_id)``, ``return req.req_id``),
    or nothing."""
    values = [r.value or "" for r in fn.all_returns if r.value not in (None, "None")]
    if not values or fn.fact.is_async:
        return False
    params = set(fn.param_names) - {"self", "cls"}
    for v in values:
        m = _ID_RETURN.fullmatch(v.replace(" ", ""))
        if m is None or m.group(1) not in params or m.group(2) not in state.id_attrs:
            return False
    return True


def bind_defaults(state: IdState, fn: FnView, outer: FnView) -> bool:
    """A nested def's parameter defaulting to an id of the enclosing function
    (``def _on_done(f, rid=req_id)``, the usual way to pin a loop's id in a
    callback) holds that id, and so do the enclosing ids it reads freely."""
    mine = state.of(fn.fqn)
    before = mine.size()
    theirs = state.of(outer.fqn)
    local = {a.target for a in fn.all_assigns} | set(fn.param_names)
    for s in fn.stmts:  # free variables: the closure reads the enclosing ids
        mine.ids.update(n for n in s.names if n in theirs.ids and n not in local)
        mine.requests.update(n for n in s.names if n in theirs.requests and n not in local)
    for p in fn.fact.params:
        if p.default and state.is_id(outer, p.default):
            mine.ids.add(p.name)
        elif p.default and state.is_coll(outer, p.default):
            mine.colls.add(p.name)
    return mine.size() != before


# Calls that look something up rather than do work (``self._get_spec(req)``).
_LOOKUP_PREFIXES = ("get", "_get", "find", "_find", "lookup", "_lookup", "is_", "_is_", "has_",
                    "_has_", "make_", "_make_", "build", "_build", "compute", "_compute")


def is_outcome(value: str | None) -> bool:
    """``value`` (an assignment's dotted value) is the result of a method call
    that does work: not a read (``d.get()``), a builtin, a constructor
    (``Meta()``) or a lookup helper (``self._get_spec()``)."""
    if not value or not value.endswith("()") or "." not in value:
        return False
    name = value[:-2].rpartition(".")[2]
    return bool(name) and not name[:1].isupper() and name not in READ_METHODS and \
        name not in PURE and not name.startswith(_LOOKUP_PREFIXES)


def flow_locals(state: IdState, fn: FnView) -> bool:
    """One pass of intraprocedural flow; True when something new was found."""
    mine = state.of(fn.fqn)
    before = mine.size()
    carriers = mine.ids | mine.records | mine.requests
    for s in fn.stmts:
        for a in fn.assigns(s):
            if "." in a.target and a.target.startswith("self.") and not a.aug and \
                    _holds_coll(state, fn, s, a):
                # ``self.load_intents = load_intents or {}``: an attribute
                # given a request-keyed collection is one in turn
                state.keyed_attrs.add(a.target.rpartition(".")[2])
            if "." in a.target or "[" in a.target or a.aug:
                continue
            if a.key is not None and a.key not in state.id_attrs and \
                    (a.value or "").endswith("[]"):
                # ``remote_host = req_meta["remote_host"]``: a named field of a
                # request's record (even one taken off a request queue) is its data
                if a.target not in carriers:
                    mine.records.add(a.target)
            elif state.is_id(fn, a.value) and not (a.value or "").endswith("()"):
                mine.ids.add(a.target)
            elif (a.value or "").endswith("()") and \
                    (a.value or "")[:-2].rpartition(".")[2] in state.id_returners:
                mine.ids.add(a.target)  # ``req_id = _request_id(request)``
            elif a.key in state.id_attrs:
                mine.ids.add(a.target)  # ``request_id = req_meta["request_id"]``
            elif _dequeues(state, fn, s, a.value):
                mine.ids.add(a.target)  # ``rid = self._q.get()`` on a request-keyed queue
            elif a.position is not None and not a.value and _swaps_out(state, fn, s, a):
                # ``done, self._done = self._done, set()``: the container, swapped out
                mine.colls.add(a.target)
            elif a.position is not None and a.origin in mine.ids and a.target not in carriers:
                # ``req_id, submitted = item`` for an ``item`` taken off a
                # request-keyed queue: its parts are the request's data
                mine.records.add(a.target)
            elif a is fn.assigns(s)[0] and not state.id_names_in(fn, s.names) and any(
                    n.startswith("self.") and n.rpartition(".")[2] in state.keyed_attrs
                    for n in s.names) and s.kind == "simple" and not a.value and \
                    not state.is_coll(fn, a.origin):
                # ``rid, exp = next(iter(self._reqs.items()))``, ``rid, store =
                # self._jobs.pop(job)``: the first target is an id taken out
                mine.ids.add(a.target)
            elif _returns_group(state, a.value):
                mine.groups.add(a.target)  # ``kv_pulls = self._group_kv_pull(meta)``
            elif a.position is not None and _transposes(state, fn, s):
                # ``rids, blocks = map(list, zip(*req_blocks))`` over rows that
                # start with the id: the first target holds the ids, the rest data
                (mine.colls if a.position == 0 else mine.records).add(a.target)
            elif state.is_coll(fn, a.value) or state.is_coll(fn, a.origin) or \
                    _returns_coll(state, a.value):
                # ``origin`` sees through copies, set operators and comprehensions
                # that keep their elements (``ids = [r for t in batch for r in t.ids]``)
                mine.colls.add(a.target)
            elif a.origin and a.origin.endswith("()") and \
                    a.origin[:-2].rpartition(".")[2] in state.report_methods:
                # ``sending, recving = c.get_finished(ids)``: what a report
                # method hands back are ids (a sub-connector's, a worker's)
                mine.colls.add(a.target)
            elif a.value == "next()" and _first_of(state, fn, s):
                mine.ids.add(a.target)  # ``rid = next(iter(req_ids))``
            elif _reads_coll_value(state, a.value):
                mine.colls.add(a.target)  # ``req_ids = self._by_shm.get(shm)``
            elif read_from(a.value, _BY_KEY) in state.id_valued and a.position is None:
                mine.ids.add(a.target)  # ``req_id = self._load_jobs.pop(job_id)``
            elif a.target not in mine.ids and _read_by_id(state, fn, s, a.value):
                # ``gen = self._submitted.pop(req_id, None)``: the request's entry
                # (an outcome in an earlier round, before the container was keyed)
                mine.records.add(a.target)
                mine.outcomes.discard(a.target)
            elif is_outcome(a.value):
                # what an operation answered is not the request's data
                mine.outcomes.add(a.target)
            elif a.target not in carriers and a.target not in mine.outcomes and any(
                    (n.partition(".")[0] in carriers and "." in n) or n in mine.records
                    for n in s.names):
                mine.records.add(a.target)  # ``spec = request.load_spec``: per-request data
    _lookup_keys(state, fn, mine)
    _envelopes(state, fn, mine)
    for s in fn.stmts:
        for op in fn.containers(s):
            # ``request_ids.append(req_id)``: a local collection of ids
            if "." not in op.container and "[" not in op.container and \
                    op.op in COLLECT and state.is_id(fn, op.key):
                mine.colls.add(op.container)
            elif op.container.endswith("[]") and op.container[:-2].isidentifier() and \
                    op.op in COLLECT and op.op != "setitem" and state.is_id(fn, op.key):
                mine.groups.add(op.container[:-2])  # ``pulls[path].append((rid, ...))``
    for s in fn.stmts:
        if s.kind != "for":
            continue
        targets, iterable = loop_targets(s.text)
        if iterable.startswith("enumerate("):
            targets = targets[1:]
        zipped = _zip_args(iterable)
        if zipped and len(zipped) == len(targets):
            # ``for rid, op in zip(request_ids, ops)``: each target walks its own argument
            mine.ids.update(t for t, arg in zip(targets, zipped, strict=True)
                            if state.is_coll(fn, arg))
        elif targets and (state.is_coll(fn, iterable) or _returns_coll(state, _callee(iterable))):
            mine.ids.add(targets[0])
            mine.records.update(targets[1:2] if ".items()" in iterable else ())
        elif len(targets) == 2 and iterable.endswith(".items()") and (
                unwrap(iterable).rpartition(".")[2] in state.coll_valued or
                unwrap(iterable) in mine.groups):
            mine.colls.add(targets[1])  # ``for shm, req_ids in self._by_shm.items()``
        elif targets and iterable.endswith((".items()", ".values()")) and \
                "." in unwrap(iterable) and \
                unwrap(iterable).rpartition(".")[2] in state.id_valued:
            # ``for job_id, req_id in self._load_jobs.items()``: the values are ids
            mine.ids.add(targets[-1] if iterable.endswith(".items()") else targets[0])
        elif len(targets) == 1 and iterable.endswith(".values()") and \
                unwrap(iterable) in mine.groups:
            mine.colls.add(targets[0])
        elif targets and unwrap(iterable) in mine.requests:
            mine.requests.add(targets[0])
        elif len(targets) == 1 and _reads_id_field(state, s, targets[0]):
            # ``for request in metadata.requests: ... request.req_id``: the
            # loop walks requests, whatever the iterable is called
            mine.requests.add(targets[0])
    return mine.size() != before


_LOOKUPS = frozenset({"get", "pop", "setdefault", "__contains__"})


def _envelopes(state: IdState, fn: FnView, mine: FnIds) -> None:
    """``info = {"request_id": rid, "blocks": blocks}``: a display bound to a
    plain name with an id among its values carries the id, as the tuple
    ``(rid, blocks)`` does where it is put on a queue or handed on."""
    displays = {(e.line, e.group) for e in fn.facts.elements
                if e.scope == fn.fact.qualname and state.is_id(fn, e.value)}
    if not displays:
        return
    for s in fn.stmts:
        for a in fn.assigns(s):
            if a.value is None and not a.aug and a.target.isidentifier() and \
                    (a.line, a.target) in displays:
                mine.ids.add(a.target)


def _lookup_keys(state: IdState, fn: FnView, mine: FnIds) -> None:
    """A local that a request-keyed ``self`` container is looked up or
    entered by is a request id, wherever it came from (``req_id, tp =
    msg.rsplit(":", 1)`` parsed out of a peer's notification, then
    ``self._recving_metadata.get(req_id)``): the container's keys are ids."""
    taken = mine.ids | mine.colls | mine.records | mine.outcomes | mine.requests
    # only a local the function computes itself (parsed out of a message),
    # not a loop target nor a parameter: a loop over some other collection
    # already says what its elements are
    assigned = {a.target for a in fn.all_assigns if a.target.isidentifier() and not a.aug}
    params = set(fn.param_names) | {
        t for st in fn.stmts if st.kind == "for" for t in loop_targets(st.text)[0]}
    for c in fn.all_calls:
        head, _, meth = (c.callee or "").rpartition(".")
        if meth not in _LOOKUPS or not head.startswith("self.") or head.count(".") != 1:
            continue
        key = c.args[0] if c.args else None
        if key and key in assigned and key not in taken and key not in params and \
                head[5:] in state.keyed_attrs:
            mine.ids.add(key)
    for op in fn.all_containers:
        key = op.key
        if op.container.startswith("self.") and op.container.count(".") == 1 and key and \
                key in assigned and key not in taken and key not in params and \
                op.container[5:] in state.keyed_attrs and op.op in ("setitem", "setdefault",
                                                                    "delitem", "pop"):
            mine.ids.add(key)


def _reads_id_field(state: IdState, loop: Stmt, name: str) -> bool:
    """The loop body reads ``name.<id field>`` (``request.req_id``)."""
    return any(n.partition(".")[0] == name and n.partition(".")[2] in state.id_attrs
               for b in walk_stmts(loop.body) for n in b.names)


_CALL = re.compile(r"([A-Za-z_][\w.]*)\(.*\)", re.S)


def _callee(text: str) -> str | None:
    """``self._f()`` for the call text ``self._f(a, b)`` (None if not a call)."""
    m = _CALL.fullmatch(text.strip())
    return f"{m.group(1)}()" if m else None


_BY_KEY = (".get()", ".pop()", "[]")


def _swaps_out(state: IdState, fn: FnView, s, a) -> bool:
    """``a`` is the local of a swap ``local, self.X = self.X, <new>``, X request-keyed."""
    return any(b is not a and b.target.startswith("self.") and
               b.target.rpartition(".")[2] in state.keyed_attrs and b.target in s.names
               for b in fn.assigns(s))


def _first_of(state: IdState, fn: FnView, s) -> bool:
    """``next(iter(C))`` in ``s``, ``C`` an id collection."""
    return any(c.callee == "iter" and c.args and state.is_coll(fn, c.args[0])
               for c in fn.calls(s))


def _reads_coll_value(state: IdState, value: str | None) -> bool:
    """``value`` reads an entry of a container whose values are id collections."""
    return read_from(value, _BY_KEY) in state.coll_valued


def _read_by_id(state: IdState, fn: FnView, s, value: str | None) -> bool:
    """``value`` reads a request-keyed container's entry by an id of ``s``:
    an attribute (``self._d.pop(rid)``) or a local or parameter holding ids
    (``pull_metas.pop(req_id, None)``)."""
    if not state.id_names_in(fn, s.names):
        return False
    if read_from(value, _BY_KEY) in state.keyed_attrs:
        return True
    v = value or ""
    return any(v.endswith(m) and v[: -len(m)] in state.of(fn.fqn).colls for m in _BY_KEY)


def _returns_coll(state: IdState, value: str | None) -> bool:
    """``value`` is a call of a function that returns an id collection."""
    v = value or ""
    return v.endswith("()") and v[:-2].rpartition(".")[2] in state.coll_returners


def _returns_group(state: IdState, value: str | None) -> bool:
    """``value`` is a call of a function that returns grouped id collections."""
    v = value or ""
    return v.endswith("()") and v[:-2].rpartition(".")[2] in state.group_returners


def _transposes(state: IdState, fn: FnView, s) -> bool:
    """``s`` unpacks ``zip(*rows)`` (also under ``map(list, ...)``) of an id
    collection ``rows``: the star argument leaves the ``zip`` call with no
    positional argument of its own."""
    calls = fn.calls(s)
    if not any(c.callee == "zip" and not c.args for c in calls):
        return False
    if any(c.callee not in ("zip", "map", "list", "tuple") for c in calls):
        return False
    colls = state.of(fn.fqn).colls
    return sum(1 for n in s.names if n in colls) == 1


def returns_group(state: IdState, fn: FnView) -> bool:
    """Every return of ``fn`` hands back one of its grouped id collections."""
    values = [r.value for r in fn.all_returns]
    mine = state.of(fn.fqn)
    return bool(values) and not fn.fact.is_async and all(v in mine.groups for v in values)


def returns_coll(state: IdState, fn: FnView) -> bool:
    """Every return of ``fn`` hands back one of its id collections (or nothing)."""
    values = [r.value for r in fn.all_returns if r.value not in ("None",)]
    if not values or fn.fact.is_async or any(v is None for v in values):
        return False
    return all(state.is_coll(fn, v) for v in values)


def coll_returner_names(state: IdState, fns: Iterable[FnView],
                        returns: Callable[[IdState, FnView], bool] = returns_coll) -> set[str]:
    """Names every analysed function of which returns an id collection (or,
    with ``returns=returns_group``, grouped ones; a name two functions share
    counts only when both do)."""
    yes: set[str] = set()
    no: set[str] = set()
    for fn in fns:
        (yes if returns(state, fn) else no).add(fn.name)
    return yes - no


def _holds_coll(state: IdState, fn: FnView, s, a) -> bool:
    """The assignment ``a`` (the only one of ``s``) stores an id collection
    (``origin`` sees through a copy: ``set(metadata.save_intents.keys())``)."""
    if state.is_coll(fn, a.value) or state.is_coll(fn, a.origin):
        return True
    if a.value is not None or len(fn.assigns(s)) != 1:
        return False
    colls = state.of(fn.fqn).colls
    return any(n in colls for n in s.names)


def bind_call(state: IdState, fn: FnView, call: CallFact, callee: FnView,
              constructor: bool = False) -> bool:
    """Ids passed to an analysed function become its parameters' ids
    (``constructor``: ``C(...)`` calling ``C.__init__``, whose ``self`` the
    call does not pass)."""
    mine = state.of(callee.fqn)
    before = mine.size()
    caller = state.of(fn.fqn)
    for arg, pname in bound_args(callee.fact, call, constructor=constructor):
        if not arg:
            continue
        if state.is_id(fn, arg) and not arg.endswith("()"):
            mine.ids.add(pname)
        elif state.is_coll(fn, arg):
            mine.colls.add(pname)
        elif arg in caller.requests:
            mine.requests.add(pname)
        elif arg in caller.records and pname not in mine.request_names():
            mine.records.add(pname)  # ``self._submit(plans, rid)``: the request's data
            mine.passed.add(pname)
    return mine.size() != before
