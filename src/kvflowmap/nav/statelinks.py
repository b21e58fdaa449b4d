"""Data steps through request-keyed state, for ``path`` and ``where``.

A connector hands a request from one method to another through its own
state far more often than through a call: NIXL's ``_read_blocks`` puts the
transfer handle into ``self._recving_transfers``, and ``get_finished`` (on
another step, often another thread) takes the finished ids out of it and
returns them to vLLM. The call graph has no edge between the two, so
``path _read_blocks Scheduler._update_from_kv_xfer_finished`` found nothing.

The lifecycle model (``kvflowmap.lifecycle``) knows which containers are
request-keyed (their keys or elements come from request ids, never by
name) and where ids enter them. Here each such container becomes a
``field`` node per concrete class whose objects hold it (a class nothing
derives from): NIXL's Pull and Push workers inherit ``_recving_transfers``
from their base, and each object has its own. A node has a ``produces`` edge
from every function that puts an id in (the class's methods and those it
inherits; a helper that fills a set it was handed, ``failed_req_ids.add``,
fills the caller's ``self.<attr>``) and a ``consumes`` edge to every one
that reads it through ``self`` on such an object, so a path never crosses
from one sibling's object to another's. Queues count like containers
(``put`` in the producer thread, ``get`` in the consumer). The node is
defined where a constructor binds the attribute.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator

import networkx as nx

from kvflowmap.lifecycle.balance import is_init
from kvflowmap.lifecycle.containers import ADD_OPS, REMOVE_OPS, RESET_OPS, swaps_out
from kvflowmap.lifecycle.failures import block_channels, fill_sites
from kvflowmap.lifecycle.model import Lifecycle, build_lifecycle
from kvflowmap.facts import AUG_TAKES, AssignFact
from kvflowmap.lifecycle.ids import loop_targets
from kvflowmap.lifecycle.view import FnView, bound_args, view, walk

VIA = "state"  # the ``via`` of the edges added here (``where`` and ``path`` name it)
FAILED_BLOCKS = "failed_blocks"  # the protocol's report channel of failed load blocks


def with_state_links(linker) -> nx.MultiDiGraph:
    """A copy of the analysis graph with the request-keyed state steps added
    (``linker``: ``graph.build.Linker``); the analysis graph is unchanged."""
    lc = build_lifecycle(linker)
    g = linker.graph.copy()
    add_state_links(g, lc, linker.where)
    add_store_deps(g, linker.model)
    add_returned_ids(g, lc, linker.where)
    add_carrier_sets(g, linker.model, linker.where)
    call_literals(g, linker.model)
    return g


def add_carrier_sets(g: nx.MultiDiGraph, model, where) -> None:
    """A ``field`` node per ``self`` set that a function consuming a carrier
    field fills with the ids it walks in that field, and that other methods
    of the same class read: vLLM's scheduler keeps the ids of
    ``KVConnectorOutput.finished_recving`` in ``finished_recving_kv_req_ids``
    (``_update_from_kv_xfer_finished``), and ``_update_waiting_for_remote_kv``
    takes the waiting request out of ``WAITING_FOR_REMOTE_KVS`` by it. The
    lifecycle model follows the connector's own state only; this is the
    step after the carrier, in whatever class reads it."""
    fields = {u: u.rpartition(".")[2] for u, k in g.nodes(data="kind") if k == "field"}
    linked: set[str] = set()  # the set nodes whose readers are linked
    for field, fqn in sorted({(u, v) for u, v, d in g.edges(data=True)
                              if d.get("kind") == "consumes" and u in fields and
                              g.nodes[v].get("kind") == "function"}):
        fn = view(model, fqn)
        owner = fqn.rpartition(".")[0]
        if fn is None or fn.cls != owner:
            continue
        for loop in walk(fn.fact.body):
            targets, iterable = loop_targets(loop.text) if loop.kind == "for" else ([], "")
            if not targets or not re.search(rf"\.{re.escape(fields[field])}\b", iterable):
                continue
            for st in walk(loop.body):
                for op in fn.containers(st):
                    attr = op.container.partition("self.")[2]
                    if op.op not in ADD_OPS or not attr.isidentifier() or \
                            not op.container.startswith("self.") or \
                            not set(targets) & _names_in(op.key):
                        continue
                    readers = _class_readers(model, owner, attr, fqn)
                    if not readers:
                        continue
                    node = f"{owner}.{attr}"
                    fresh = node not in g
                    g.add_edge(fqn, node, kind="produces", line=op.line, via=VIA,
                               carrier=f"puts ids into {_short(node)}", deps=_deps(fn, op.line),
                               **where(fn.module))
                    if node in linked:
                        continue  # its readers are linked already
                    linked.add(node)
                    if fresh:
                        g.add_node(node, kind="field", line=op.line, flow=True,
                                   package=node.split(".")[0],
                                   subject=bool(g.nodes[fqn].get("subject")), **where(fn.module))
                    for reader, line in readers:
                        g.add_edge(node, reader, kind="consumes", line=line, via=VIA,
                                   carrier=f"reads ids from {_short(node)}",
                                   **where(model.defs[reader].module))


def _names_in(text: str | None) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", text or ""))


def _class_readers(model, owner: str, attr: str, writer: str) -> list[tuple[str, int]]:
    """(method, first line) of each method of ``owner`` other than ``writer``
    that reads ``self.<attr>``."""
    d = model.defs.get(owner)
    if d is None or not d.is_class:
        return []
    qual = owner[len(d.module) + 1:]
    first: dict[str, int] = {}
    for r in model.facts[d.module].reads:
        if r.base == "self" and r.attr == attr and r.scope.rpartition(".")[0] == qual:
            fqn = f"{d.module}.{r.scope}"
            if fqn != writer:
                first[fqn] = min(first.get(fqn, r.line), r.line)
    return sorted(first.items())


def _short(fqn: str) -> str:
    return ".".join(fqn.split(".")[-2:])


def add_returned_ids(g: nx.MultiDiGraph, lc: Lifecycle, where) -> None:
    """Ids a helper hands back to its caller, who keeps or reports them: a
    ``produces`` step from the helper into the caller's state node when the
    caller puts the collection the call returned into a ``self`` container
    (``done, failed = self._pop_done_transfers(...)`` then
    ``self._recv_failures.update(failed)``), and into the carrier field the
    caller returns when the helper fills the collection the caller hands it
    (``self._reap_expired_send_leases(done_sending)`` then ``return
    ...(finished_sending=done_sending)``). ``path`` then follows ids out of a
    helper the way they go."""
    for fqn in sorted(lc.functions):
        fn = lc.functions[fqn]
        node_of: dict[str, set[str]] = {}
        for _, v, d in g.out_edges(fqn, data=True):
            if d.get("kind") == "produces" and d.get("via") == VIA:
                node_of.setdefault(v.rpartition(".")[2], set()).add(v)
        returned = {v: set(d.get("deps") or ()) for _, v, d in g.out_edges(fqn, data=True)
                    if d.get("kind") == "produces" and d.get("via") == "return"
                    and g.nodes[v].get("kind") == "field"}
        for call in fn.all_calls:
            targets = [t.fqn for t in lc.effects.calls.resolve(fn.ctx, call)
                       if not t.external and t.fqn in lc.functions and t.fqn != fqn]
            if not targets:
                continue
            bound = {a.target for a in fn.all_assigns if a.line == call.line} | {
                b.target for b in fn.facts.binds
                if b.scope == fn.fact.qualname and b.line == call.line}
            for op in fn.all_containers:
                attr = op.container.partition(".")[2]
                if op.op in ("update", "extend") and op.key in bound and \
                        op.container.startswith("self.") and attr in node_of:
                    for t in targets:
                        ret = next((r.line for r in lc.functions[t].all_returns), None)
                        for node in sorted(node_of[attr]):
                            # only when this caller called it (its return goes back there)
                            _edge(g, lc, t, node, "produces", ret or 0, where,
                                  f"returns ids {_short(fqn)} puts into {_short(node)}",
                                  fillers=(fqn,))
            for t in targets:
                h = lc.functions[t]
                filled = {op.container: op.line for op in h.all_containers
                          if op.op in ADD_OPS and op.container in h.param_names}
                for arg, param in bound_args(h.fact, call):
                    if param not in filled or not arg or not arg.isidentifier():
                        continue
                    for field, deps in sorted(returned.items()):
                        if arg in deps:
                            # the caller's return value: its callers decide where it goes
                            _edge(g, lc, t, field, "produces", filled[param], where,
                                  f"puts ids into the {arg} {_short(fqn)} returns",
                                  fillers=(fqn,), via="return")


def add_store_deps(g: nx.MultiDiGraph, model) -> None:
    """Give the steps out of a function the names their statement depends on
    (``_deps``), so that a ``path`` entering the function reading one field
    leaves only where that field goes: each write of a protocol carrier field
    (``produces`` made by the graph), each value returned into one (the
    returned local or ``local.field``, ``_local_deps``), and the calls of
    every function with such a step, with the locals each call's result is
    bound to. vLLM's runner reads ``kv_connector_metadata`` only to bind it
    to the connector and fills ``finished_recving`` from ``get_finished()``;
    NIXL's ``get_transfer_results`` does not pass
    ``_replicated_pcp_done_sending`` to ``_pop_done_transfers``, whose result
    (``done_pushing, failed = ...`` in the push worker) feeds
    ``finished_sending`` only."""
    views: dict[str, FnView | None] = {}

    def fn_of(u: str) -> FnView | None:
        if u not in views:
            views[u] = view(model, u)
        return views[u]

    for u, v, d in g.edges(data=True):
        if d.get("deps"):
            continue
        if _carrier_write(g, u, v, d):
            deps = _deps(fn_of(u), int(d.get("line") or 0))
        elif d.get("kind") == "produces" and d.get("via") == "return" and d.get("value"):
            deps = _local_deps(fn_of(u), str(d["value"]))
        else:
            continue
        if deps:
            d["deps"] = deps
    # functions a path enters by a data step: writers, and readers of a field
    # (a request-keyed container, or a carrier: vLLM's ``update_from_output``
    # reads ``invalid_block_ids`` for ``_handle_invalid_blocks`` only, not for
    # the ``_update_from_kv_xfer_finished(kv_connector_output)`` it calls)
    writers = {u for u, _, d in g.edges(data=True) if d.get("kind") == "produces"
               and d.get("deps")}
    writers |= {v for u, v, d in g.edges(data=True) if d.get("kind") == "consumes"
                and (d.get("via") == VIA or g.nodes[u].get("kind") == "field")}
    for u in sorted(writers):
        fn = fn_of(u)
        if fn is None:
            continue
        for _, _, d in g.out_edges(u, data=True):
            if d.get("kind") in ("call", "sets_state") and not d.get("deps"):
                line = int(d.get("line") or 0)
                deps = _deps(fn, line)
                if deps:
                    d["deps"] = deps
                binds = tuple(sorted(a.target for a in fn.all_assigns
                                     if a.line == line and a.target.isidentifier()))
                if binds and d.get("kind") == "call":
                    d["binds"] = binds


def _carrier_write(g: nx.MultiDiGraph, u: str, v: str, d: dict) -> bool:
    """A graph-made ``produces`` of a protocol carrier field by a function."""
    return d.get("kind") == "produces" and not d.get("via") and \
        g.nodes[v].get("kind") == "field" and g.nodes[u].get("kind") == "function"


def add_state_links(g: nx.MultiDiGraph, lc: Lifecycle, where) -> None:
    """Add a ``field`` node per request-keyed container that some function
    fills, and its ``produces``/``consumes`` edges (see the module docstring).
    ``where(module)`` gives the ``file``/``root`` of a module.

    A container lives on an object, so it is one node per concrete (leaf)
    class whose instances hold it: ``NixlPullConnectorWorker._recving_transfers``
    gathers the writes and reads of the Pull worker's methods and of the
    base-class methods it inherits, and the Push worker's object gets a node
    of its own. The node is defined where a constructor of the class or a
    base first binds ``self.<attr>``."""
    made = _constructed(lc)
    writes: dict[tuple[str, str], dict[str, int]] = {}  # (leaf, attr) -> writer -> line
    # lines that write rather than read: (function, attr) -> lines
    written: dict[tuple[str, str], set[int]] = {}
    for c, info in lc.containers.items():
        if not lc.classes.is_class(c.owner):
            continue
        for site in sorted(info.of_kind("add"), key=lambda x: (x.fqn, x.line)):
            written.setdefault((site.fqn, c.attr), set()).add(site.line)
            for leaf in _leaves(lc, c.owner, made):
                writes.setdefault((leaf, c.attr), {}).setdefault(site.fqn, site.line)
    # (leaf, attr, helper) -> the callers that hand the helper ``self.<attr>``
    fillers: dict[tuple[str, str, str], set[str]] = {}
    for leaf, attr, fqn, line, caller, call_line in _param_fills(lc, made):
        writes.setdefault((leaf, attr), {}).setdefault(fqn, line)
        written.setdefault((caller, attr), set()).add(call_line)
        fillers.setdefault((leaf, attr, fqn), set()).add(caller)
    # (leaf, attr, writer) -> the writer's own attributes the field is a copy of
    copied: dict[tuple[str, str, str], set[str]] = {}
    for leaf, attr, fqn, line, src in _handed_over(lc, made):
        writes.setdefault((leaf, attr), {}).setdefault(fqn, line)
        copied.setdefault((leaf, attr, fqn), set()).add(src)
    blocks: set[tuple[str, str]] = set()  # (leaf, attr) holding blocks, not ids
    for leaf, attr, fqn, line in _failed_block_fills(lc, made):
        written.setdefault((fqn, attr), set()).add(line)
        writes.setdefault((leaf, attr), {}).setdefault(fqn, line)
        blocks.add((leaf, attr))
    defined = _definitions(lc)
    foreign = _foreign_uses(lc)
    for (leaf, attr), writers in sorted(writes.items()):
        readers = dict(_readers(lc, leaf, attr, written))
        for fqn, line in _foreign_readers(lc, leaf, foreign.get(attr, ())):
            if writers.get(fqn) != line:  # ``meta.f = self._x`` writes ``meta.f``
                readers.setdefault(fqn, line)
        if not readers:
            continue
        node = f"{leaf}.{attr}"
        label = f"{leaf.rpartition('.')[2]}.{attr}"
        if node not in g:
            at = next((defined[(k, attr)] for k in reversed(lc.classes.mro(leaf))
                       if (k, attr) in defined), None)
            first_fqn, first_line = at or min(writers.items(), key=lambda w: (w[1], w[0]))
            g.add_node(node, kind="field", line=first_line, flow=True,
                       package=node.split(".")[0], subject=True,
                       **where(lc.functions[first_fqn].module))
        what = "failed blocks" if (leaf, attr) in blocks else "ids"
        for fqn, line in sorted(writers.items()):
            _edge(g, lc, fqn, node, "produces", line, where, f"puts {what} into {label}",
                  sorted(copied.get((leaf, attr, fqn), ())), _deps(lc.functions.get(fqn), line),
                  tuple(sorted(fillers.get((leaf, attr, fqn), ()))),
                  gates(lc.functions.get(fqn), line))
        for fqn, line in sorted(readers.items()):
            _edge(g, lc, node, fqn, "consumes", line, where, f"reads {what} from {label}")


def _constructed(lc: Lifecycle) -> frozenset[str]:
    """The analysed classes the subject's code calls (``RecvThread()``)."""
    out: set[str] = set()
    for fn in lc.functions.values():
        for c in fn.all_calls:
            if c.callee and "(" not in c.callee:
                out.update(fqn for kind, fqn in lc.effects.values.eval(fn.ctx, c.callee)
                           if kind == "class")
    return frozenset(out)


def _leaves(lc: Lifecycle, cls: str, made: Collection[str] = ()) -> list[str]:
    """The analysed classes without subclasses whose instances run ``cls``'s
    methods: ``cls`` itself when nothing derives from it. Of those, the ones
    the analysed code constructs (``made``) when it constructs any: a
    subclass never made holds no state (``class SendThread(BaseThread):
    pass`` that nothing creates)."""
    subs = sorted(k for k in lc.classes.all_subclasses(cls) if not lc.classes.subclasses.get(k))
    built = [k for k in (*subs, cls) if k in made]
    return built or subs or [cls]


def _definitions(lc: Lifecycle) -> dict[tuple[str, str], tuple[str, int]]:
    """(class, attr) -> (constructor, line) where a constructor of the class
    binds ``self.<attr>`` first."""
    out: dict[tuple[str, str], tuple[str, int]] = {}
    for fqn, fn in sorted(lc.functions.items()):
        if fn.cls is None or not is_init(fn.name):
            continue
        for a in sorted(fn.all_assigns, key=lambda a: a.line):
            if a.target.startswith("self.") and a.target.count(".") == 1 and not a.aug:
                key = (fn.cls, a.target[5:])
                if key not in out or a.line < out[key][1]:
                    out[key] = (fqn, a.line)
    return out


def _param_fills(lc: Lifecycle, made: Collection[str]) -> Iterable[tuple[str, str, str, int, str, int]]:
    """``(leaf, attr, function, line, caller, call line)`` for a function
    that adds ids to a container it was handed as a parameter, called with
    ``self.<attr>`` (``self._handle_failed_transfer(req_id, self._recv_failures)``
    then ``failed_req_ids.add(req_id)``): the add goes into the caller's
    state, and the call writes it, it does not read it. A helper that also
    removes from the container it is handed drains it: the caller reads."""
    fills: dict[str, dict[str, int]] = {}  # function -> parameter -> first add line
    for fqn, fn in lc.functions.items():
        params = set(fn.param_names) - {"self", "cls"}
        drained = {op.container for op in fn.all_containers if op.op in REMOVE_OPS}
        for op in fn.all_containers:
            head = op.container.partition(".")[0].partition("[")[0]
            # a helper that also takes entries out (``_pop_done_transfers``
            # puts back the unfinished ones) drains the caller's state
            if head in params and op.op in ADD_OPS and op.container == head \
                    and head not in drained:
                fills.setdefault(fqn, {}).setdefault(head, op.line)
    if not fills:
        return
    for fqn, fn in lc.functions.items():
        if fn.self_cls is None:
            continue
        for call in fn.all_calls:
            for t in lc.effects.calls.resolve(fn.ctx, call):
                filled = fills.get(t.fqn)
                if not filled:
                    continue
                names = [n for n in lc.functions[t.fqn].param_names if n not in ("self", "cls")]
                given = dict(zip(names, call.args, strict=False)) | dict(call.kwargs)
                for param, line in filled.items():
                    arg = given.get(param) or ""
                    if arg.startswith("self.") and arg.count(".") == 1:
                        for leaf in _leaves(lc, fn.self_cls, made):
                            yield leaf, arg[5:], t.fqn, line, fqn, call.line


def _failed_block_fills(lc: Lifecycle, made: Collection[str]) -> Iterable[tuple[str, str, str, int]]:
    """``(leaf, attr, function, line)`` for each statement that puts blocks
    into a container the failed-blocks hook drains (the protocol's
    ``failed_blocks`` channel): a failed transfer's blocks reach vLLM
    through that state (``_handle_failed_transfer`` fills
    ``self._invalid_block_ids``, ``get_block_ids_with_load_errors`` swaps it
    out). Blocks are not request ids, so the lifecycle's request-keyed
    containers leave them out."""
    chan = lc.spec.channel(FAILED_BLOCKS)
    if chan is None or not chan.methods:
        return
    calls = lc.effects.calls

    def resolve(fn: FnView, call) -> list[str]:
        return [t.fqn for t in calls.resolve(fn.ctx, call) if not t.external]

    sites = fill_sites(lc.functions)
    for ch in block_channels(lc.functions, chan.methods, resolve):
        for attr, drainer, _ in ch.drained:
            # the object whose state is drained: the hook's, or a helper's
            # (``self.kv_recv_thread.get_and_clear_invalid_block_ids()``)
            owner = lc.functions[drainer].self_cls or ""
            for f in sites.get(attr, ()):
                if f.cls and lc.classes.related(owner, f.cls):
                    for leaf in _leaves(lc, f.cls, made):
                        if owner in lc.classes.mro(leaf):
                            yield leaf, attr, f.fqn, f.line


def _handed_over(lc: Lifecycle, made: Collection[str]) -> Iterable[tuple[str, str, str, int, str]]:
    """``(leaf, attr, function, line)`` for ``obj.attr = self.X`` (or a copy,
    ``dict(self.X)``) where
    ``self.X`` is request-keyed state and ``obj`` an analysed object
    (``meta.reqs_to_send = self._reqs_need_send`` in ``build_connector_meta``):
    the ids move into ``obj``'s field whole; the last item is ``X``."""
    keyed = {(c.owner, c.attr) for c in lc.containers}
    for fqn, fn in lc.functions.items():
        mine = fn.self_cls
        if mine is None:
            continue
        related = (*lc.classes.mro(mine), *lc.classes.all_subclasses(mine))
        for a in fn.all_assigns:
            base, _, attr = a.target.rpartition(".")
            if not base or base.split(".")[0] in ("self", "cls") or a.aug:
                continue
            # ``meta.f = self._x`` or a copy of it (``dict(self._x)``: ``origin``
            # sees through copies that keep the elements)
            src = a.value or ""
            if not (src.startswith("self.") and src.count(".") == 1):
                src = a.origin or ""
            if not (src.startswith("self.") and src.count(".") == 1):
                continue
            if not any((k, src[5:]) in keyed for k in related):
                continue
            for kind, t in lc.effects.values.eval(fn.ctx, base):
                if kind == "inst" and lc.classes.is_class(t):
                    for leaf in _leaves(lc, t, made):
                        yield leaf, attr, fqn, a.line, src[5:]
        # ``return MyMeta(reqs_to_load=self._reqs_need_load)``: a keyword of
        # an analysed class's constructor that names one of its fields
        for c in fn.all_calls:
            for kw, value in c.kwargs:
                if not (value and value.startswith("self.") and value.count(".") == 1):
                    continue
                if not any((k, value[5:]) in keyed for k in related):
                    continue
                for kind, t in lc.effects.values.eval(fn.ctx, c.callee or ""):
                    if kind == "class" and lc.classes.is_class(t) and _has_field(lc, t, kw):
                        for leaf in _leaves(lc, t, made):
                            yield leaf, kw, fqn, c.line, value[5:]


def _has_field(lc: Lifecycle, cls: str, name: str) -> bool:
    """``cls`` (or an analysed base) declares field ``name`` in its body or
    takes it as a parameter of its ``__init__``."""
    for k in lc.classes.mro(cls):
        fact = lc.classes.class_fact(k)
        if fact is not None and (name in fact.members or any(n == name
                                                              for n, _ in fact.attributes)):
            return True
    init = lc.functions.get(lc.classes.find_member(cls, "__init__") or "")
    return init is not None and name in init.param_names


def _readers(lc: Lifecycle, leaf: str, attr: str, written: dict[tuple[str, str], set[int]]
             ) -> Iterable[tuple[str, int]]:
    """(function, first line) of every subject function that reads ``self.<attr>``
    on an object of class ``leaf``: its own methods and those it inherits. A
    line that only writes it (``written``) is no read; a writer that also
    reads it elsewhere (takes the ids back out) is a reader."""
    chain = f"self.{attr}"
    mro = set(lc.classes.mro(leaf))
    for fqn, fn in lc.functions.items():
        if fn.self_cls is None or fn.self_cls not in mro:
            continue
        line = _first_use(fn, chain, written.get((fqn, attr), set()))
        if line is not None:
            yield fqn, line
    yield from _inherited_readers(lc, leaf, attr)


def _inherited_readers(lc: Lifecycle, leaf: str, attr: str) -> Iterable[tuple[str, int]]:
    """(method, first line) of each method of a context base of ``leaf`` (a
    class of the analysed vLLM the subject derives from) that ``leaf``'s
    objects run (``Lifecycle.inherited``) and that reads ``self.<attr>``: a
    connector that subclasses vLLM's NIXL worker fills ``_recving_transfers``
    in its own ``_read_blocks_for_req``, and the inherited
    ``get_transfer_results`` (reached by ``super()``) takes the ids out."""
    chain = f"self.{attr}"
    for fqn, fn in sorted(lc.inherited_fns.items()):
        if lc.runs_inherited(fqn, leaf) and (line := _first_use(fn, chain)) is not None:
            yield fqn, line


def _foreign_uses(lc: Lifecycle) -> dict[str, list[tuple[str, int, str]]]:
    """attr -> ``(function, line, object chain)`` for every read of
    ``<obj>.<attr>`` through an object other than ``self`` (first per
    function and chain)."""
    out: dict[str, list[tuple[str, int, str]]] = {}
    for fqn, fn in lc.functions.items():
        seen: set[str] = set()
        for st in fn.stmts:
            for n in st.names:
                base, _, attr = n.rpartition(".")
                if not base or base.split(".")[0] in ("self", "cls") or n in seen:
                    continue
                seen.add(n)
                out.setdefault(attr, []).append((fqn, st.line, base))
    return out


def _foreign_readers(lc: Lifecycle, leaf: str, uses: Iterable[tuple[str, int, str]]
                     ) -> Iterable[tuple[str, int]]:
    """The functions reading the field through another object whose type is
    ``leaf`` or one of its bases (``metadata.reqs_to_recv`` where ``metadata``
    is a ``NixlConnectorMetadata``)."""
    mro = set(lc.classes.mro(leaf))
    for fqn, line, base in uses:
        fn = lc.functions[fqn]
        if any(kind == "inst" and (t == leaf or t in mro)
               for kind, t in lc.effects.values.eval(fn.ctx, base)):
            yield fqn, line


def _first_use(fn: FnView, chain: str, skip: Collection[int] = ()) -> int | None:
    """The first line of ``fn`` whose statement reads ``chain`` (or a part of
    it); a statement that binds it (``self._x = set()`` in a constructor),
    adds to it or clears it, removes from it and drops what it removed, or
    only writes it otherwise (a line in ``skip``) is no read."""
    for s in fn.stmts:
        # ``done, self._x = self._x, set()``: the swap binds it and reads it out
        if not swaps_out(fn, s, chain) and (s.line in skip or any(
                k == "assign" and fn.facts.assigns[i].target == chain for k, i in s.events)):
            continue
        # ``self._x.setdefault(k, [])``, ``self._x.clear()``: writes, not reads
        if any(op.container == chain and op.op in ADD_OPS | RESET_OPS
               for op in fn.containers(s)):
            continue
        # ``self._x.pop(k, None)`` on its own: a removal whose value goes nowhere
        ops = [op for op in fn.containers(s) if op.container == chain]
        if s.kind == "simple" and ops and all(op.op in REMOVE_OPS for op in ops) and \
                not fn.assigns(s) and not fn.returns(s) and len(fn.calls(s)) <= len(ops):
            continue
        if any(n == chain or n.startswith(chain + ".") or n.startswith(chain + "[")
               for n in s.names):
            return s.line
    return None


def _deps(fn: FnView | None, line: int) -> tuple[str, ...]:
    """The attribute and local names the statement of ``fn`` at ``line``
    depends on: what it reads, the headers of the loops and tests around it,
    and, through the function's local assignments, what those locals were
    made of (``for rid, reg in metadata.push_registrations.items():
    self._inbox.put((rid, reg))`` depends on ``push_registrations``). A
    ``path`` through ``fn`` leaves into the field written there only from a
    field among these."""
    if fn is None:
        return ()
    names: set[str] = set()
    found = False
    before = None  # the statement a line inside a multi-line one belongs to
    for st, around in _with_headers(fn.fact.body, ()):
        if st.line == line:
            found = True
            for x in (st, *around):
                names.update(_read_names(fn, x))
        elif st.line < line:
            before = (st, around)
    if not found and before is not None and before[0].kind not in _BLOCKS:
        found = True
        for x in (before[0], *before[1]):
            names.update(_read_names(fn, x))
    return _closure(fn, names) if found else ()


def _filled(fn: FnView, st) -> set[str]:
    """Local collections the statement adds into (``done.update(...)``)."""
    return {c.container for c in fn.containers(st)
            if c.container.isidentifier() and c.op in ADD_OPS}


def _read_names(fn: FnView, st) -> set[str]:
    """The names a statement reads: all it names but the locals it only
    binds (``done = self._notifs()``) and the local collections it only adds
    into (``failed.update(self._handle(x))`` reads ``x``)."""
    written = _filled(fn, st) | {a.target for a in fn.assigns(st)
                                 if a.target.isidentifier() and not a.aug}
    return {n for n in st.names if n.partition(".")[0] not in written}


_BLOCKS = ("if", "for", "while", "with", "try", "except", "match", "case")


def _with_headers(stmts, around: tuple) -> Iterator:
    """Each statement (not a nested ``def``/``class``) with the loop, test
    and ``with`` headers around it."""
    for st in stmts:
        if st.kind in ("def", "class"):
            continue
        yield st, around
        inner = (*around, st) if st.kind in ("for", "while", "if", "with") else around
        for part in (st.body, st.orelse, st.handlers, st.final):
            yield from _with_headers(part, inner)


def _local_deps(fn: FnView | None, value: str) -> tuple[str, ...]:
    """The names ``value`` of ``fn`` is made of: for a local, the statements
    that bind it or change it in place (``done_sending.update(self._extra)``);
    for ``local.field``, those that bind the local, set or change the field,
    or change an alias of it (``done = results.finished_sending;
    done.add(rid)``); with the headers around them, through the locals those
    read (as ``_deps``). The other fields of a returned object do not count:
    NIXL's push worker returns its base's ``results`` with only
    ``finished_sending`` added to."""
    if fn is None:
        return ()
    local, _, part = value.partition(".")
    changed = {value} if part else {local}
    if part:
        changed |= {a.target for a in fn.all_assigns
                    if a.target.isidentifier() and value in (a.value, a.origin)}
    names: set[str] = set()
    for st, around in _with_headers(fn.fact.body, ()):
        if any((a.target == local or a.target in changed) and not _takes_away(a)
               for a in fn.assigns(st)) or \
                any(op.container in changed for op in fn.containers(st)) or \
                any("." in (c.callee or "") and (c.callee or "").rpartition(".")[0] in changed
                    for c in fn.calls(st)):
            for x in (st, *around):
                names.update(x.names)
    return _closure(fn, names) if names else ()


def _takes_away(a: AssignFact) -> bool:
    """``done -= failed`` (or ``&=``): nothing of the value goes into the target."""
    return a.aug and a.op in AUG_TAKES


def _closure(fn: FnView, names: set[str]) -> tuple[str, ...]:
    """``names`` and, through the function's local assignments and adds
    into local collections (``failed.add(req_id)`` in a loop over
    ``self._recv_failures``, with the loops around the add), what those
    locals were made of; as attribute and head names."""
    made: dict[str, set[str]] = {}
    for st, around in _with_headers(fn.fact.body, ()):
        for a in fn.assigns(st):
            if a.target.isidentifier() and not _takes_away(a):
                made.setdefault(a.target, set()).update(st.names)
        for c in _filled(fn, st):
            # what a loop adds comes from what it loops over
            made.setdefault(c, set()).update(
                _read_names(fn, st), *(_read_names(fn, h) for h in around if h.kind == "for"))
    todo = [n.partition(".")[0] for n in names]
    while todo:
        n = todo.pop()
        for m in made.pop(n, ()):
            if m not in names:
                names.add(m)
                todo.append(m.partition(".")[0])
    return tuple(sorted({n.rpartition(".")[2] for n in names} | {n.partition(".")[0]
                                                                   for n in names}))


def _edge(g: nx.MultiDiGraph, lc: Lifecycle, u: str, v: str, kind: str, line: int, where,
          note: str, copied: list[str] | None = None, deps: tuple[str, ...] = (),
          fillers: tuple[str, ...] = (), gated: tuple[tuple[str, bool], ...] = (),
          via: str = VIA) -> None:
    """One state step; ``copied``: the ``self`` attributes a field written
    whole is a copy of; ``deps``: the names the writing statement depends on
    (``path`` passes through the writer only from a field among them);
    ``fillers``: for a helper that fills a container it is handed, the
    callers that hand it this one (``path`` takes the step only after a
    call from one of them, or from the helper itself)."""
    at = u if kind == "produces" else v
    fn = lc.functions.get(at) or lc.inherited_fns.get(at)
    if fn is None or u not in g or v not in g:
        return
    extra: dict[str, tuple[str, ...]] = {"copied": tuple(copied)} if copied else {}
    if deps:
        extra["deps"] = deps
    if fillers:
        extra["fillers"] = fillers
    if gated:
        extra["gates"] = gated  # type: ignore[assignment]
    g.add_edge(u, v, kind=kind, line=line, via=via, carrier=note, **extra, **where(fn.module))


def gates(fn: FnView | None, line: int) -> tuple[tuple[str, bool], ...]:
    """The parameters of ``fn`` the statement at ``line`` runs only under, and
    the truth each must have: ``if load_remote_cache: self.reqs_to_recv[k] = m``
    runs only for a true ``load_remote_cache``, its ``else`` only for a false
    one. A ``path`` entering ``fn`` through a call that passes the other
    literal (``add_new_req(..., load_remote_cache=False)``) does not take it."""
    if fn is None:
        return ()
    params = {p.name for p in fn.fact.params} - {"self", "cls"}

    def test_of(text: str | None) -> tuple[str, bool] | None:
        t = (text or "").strip()
        neg = t.startswith("not ")
        name = t[4:].strip() if neg else t
        return (name, not neg) if name in params else None

    def visit(body, held: tuple[tuple[str, bool], ...]):
        for st in body:
            if st.line == line and st.kind not in ("if", "for", "while", "with", "try"):
                return held
            if st.kind in ("def", "class"):
                continue
            cond = test_of(st.text) if st.kind == "if" else None
            arms = [(st.body, (cond,) if cond else ()),
                    (st.orelse, ((cond[0], not cond[1]),) if cond else ())] \
                if st.kind == "if" else [(st.body, ()), (st.orelse, ())]
            arms += [(st.final, ())] + [(h.body, ()) for h in st.handlers]
            for part, more in arms:
                found = visit(part, held + more)
                if found is not None:
                    return found
        return None

    return tuple(sorted(set(visit(fn.fact.body, ()) or ())))


def call_literals(g: nx.MultiDiGraph, model) -> None:
    """Give each call of a function with gated writes (``gates``) the truth of
    the literal arguments it passes to the gating parameters (``literals``),
    its defaults included: which arm of the callee's tests the call runs."""
    gated: dict[str, set[str]] = {}
    for u, _, d in g.edges(data=True):
        if d.get("kind") == "produces" and d.get("gates"):
            gated.setdefault(u, set()).update(p for p, _ in d["gates"])
    for u, v, d in g.edges(data=True):
        if d.get("kind") != "call" or v not in gated or d.get("literals"):
            continue
        caller, callee = view(model, u), view(model, v)
        if caller is None or callee is None:
            continue
        line = int(d.get("line") or 0)
        call = next((c for c in caller.all_calls if c.line == line and
                     (c.callee or "").rpartition(".")[2] == callee.name), None)
        if call is None:
            continue
        passed = {param: arg for arg, param in bound_args(callee.fact, call)}
        out = []
        for p in callee.fact.params:
            if p.name not in gated[v]:
                continue
            text = passed[p.name] if p.name in passed else p.default
            truth = _LITERAL_TRUTH.get((text or "").strip())
            if truth is not None:
                out.append((p.name, truth))
        if out:
            d["literals"] = tuple(out)


_LITERAL_TRUTH = {"True": True, "False": False, "None": False, "0": False, "1": True,
                  '""': False, "''": False}
