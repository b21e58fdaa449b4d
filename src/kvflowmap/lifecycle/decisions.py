"""Which turns of a path are decisions about a request, not ways of losing it.

A branch that tests the id (``rid in self._pending``), the request's own
record (``meta.load_spec is None``; not what an operation answered: ``if not
future`` asks whether the work succeeded), configuration only (``if
self._has_mamba``), what the function itself collected (``if not
all_block_ids``), the binding itself (``if not preempted_req_ids``) or what
vLLM passed a hook (``num_external_tokens == 0``) decides; a branch that
warns, or a path that returns a status to its caller, reports. ``paths``
asks these questions at the last turn of a dropping path.
"""

from __future__ import annotations

from kvflowmap.model.cfg import CFG
from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.containers import ADD_OPS
from kvflowmap.lifecycle.effects import Effects, is_logging
from kvflowmap.lifecycle.ids import is_outcome
from kvflowmap.lifecycle.view import FnView, walk

_ID_TESTS = ("In", "NotIn", "Is", "IsNot", "Equal", "NotEqual")
LOUD = ("warning", "warn", "error", "exception", "critical")


def is_filter(fn: FnView, eff: Effects, s: Stmt, name: str) -> bool:
    """A test that decides about this request, not a failure: it compares the
    id, reads the request's own record (``meta.load_spec``), or only reads
    configuration (``self._has_mamba``)."""
    if s.kind not in ("if", "while"):
        return False
    ids = eff.state.of(fn.fqn)
    own = set(fn.param_names) | {a.target for a in fn.all_assigns} | set(ids.ids)
    local = [n for n in s.names if n in own and n != "self"]
    built = _built_for_load(fn, eff, s, local)
    records = (ids.records - built) | ids.requests | {name}
    if any(n in ids.outcomes for n in local):
        return tests_id(fn, eff, s)  # ``if not future``: did the work succeed, not a choice
    if any(n.partition(".")[0] in records and "." in n for n in s.names):
        return True
    if any(n in ids.records - built for n in local):
        return True
    if config_test(fn, s, own, eff.state.runtime_attrs) and not _records_part(fn, s, name):
        return True
    if _tests_collected(fn, s, own):
        return True
    if local and all(n == name for n in local):
        return True  # ``if not preempted_req_ids: return``: nothing to hand on
    if name in local and name in ids.colls:
        return True  # ``if done or failed: ... else: return``: tests what it holds
    if fn.name in eff.state.spec.hooks and local and \
            _tests_input(fn, s, local, ids.records | ids.requests):
        return True  # ``if num_external_tokens == 0``: what vLLM passed the hook decides
    return tests_id(fn, eff, s)


def _built_for_load(fn: FnView, eff: Effects, s: Stmt, local: list[str]) -> set[str]:
    """The locals ``s`` tests that a hook built itself as an object of an
    analysed class (``intent = LoadIntent(...)``), once it has tested what
    vLLM passed it or the request's data (``if num_external_tokens > 0``):
    a load is then known to be owed, and what was built for it being empty
    (``if not intent.block_ids: return``) is a failure to record it, not a
    choice about the request (which a record read from the request, such as
    ``params.get("do_remote_prefill")``, still is)."""
    if fn.name not in eff.state.spec.hooks:
        return set()
    built = {n for n in local if _constructed(fn, eff, n)}
    ids = eff.state.of(fn.fqn)
    if built and _tested_before(fn, s, ids.records - built | ids.requests):
        return built
    return set()


def _constructed(fn: FnView, eff: Effects, name: str) -> bool:
    """Every binding of ``name`` in ``fn`` calls an analysed class."""
    bindings = [(st, a) for st in fn.stmts for a in fn.assigns(st) if a.target == name]
    for st, a in bindings:
        callee = (a.value or "")[:-2] if (a.value or "").endswith("()") else ""
        call = next((c for c in fn.calls(st) if c.callee == callee), None) if callee else None
        targets = eff.calls.resolve(fn.ctx, call) if call is not None else []
        if not targets or not all(not t.external and eff.calls.classes.is_class(t.fqn)
                                  for t in targets):
            return False
    return bool(bindings)


def _tested_before(fn: FnView, s: Stmt, request_data: set[str]) -> bool:
    """A test before ``s`` reads a parameter or the request's data."""
    seen = set(fn.param_names) - {"self"} | request_data
    return any(t.kind in ("if", "while") and t.line < s.line and
               seen & {n.partition(".")[0] for n in t.names}
               for t in walk(fn.fact.body))


def _tests_input(fn: FnView, s: Stmt, local: list[str], request_data: set[str]) -> bool:
    """A hook's test on what vLLM passed it: the parameters themselves, or
    values computed from them alone (``block_groups = blocks.get_block_ids()``)
    while the hook has not yet tested a parameter or the request's data
    itself. Once it has (``if num_external_tokens == 0: return``, ``if
    params.get("do_remote_prefill")``), a load is known to be owed and an
    empty block list is a failure to record it, not a choice."""
    params = set(fn.param_names) - {"self"}
    if all(n in params for n in local):
        return True
    return not _tested_before(fn, s, request_data) and all(n in _derived(fn, params)
                                                           for n in local)


def _derived(fn: FnView, seeds: set[str]) -> set[str]:
    """``seeds`` and the locals computed from them alone (``groups =
    tuple(group_list)``), in statement order."""
    out = set(seeds)
    own = set(fn.param_names) | {a.target for a in fn.all_assigns}
    for s in fn.stmts:
        for a in fn.assigns(s):
            # locals read besides the target (configuration on ``self`` may be)
            read = {n.partition(".")[0] for n in s.names if n != a.target} & own - {"self"}
            if "." not in a.target and read and read <= out and not is_outcome(a.value):
                out.add(a.target)
    return out


def _tests_collected(fn: FnView, s: Stmt, own: set[str]) -> bool:
    """A test on what the function itself collected (``if not all_block_ids``):
    every local it reads is a collection the function fills. Nothing to do
    is a decision, not a failure (a failure is an outcome: ``if not ok``)."""
    filled = _derived(fn, {op.container.partition("[")[0] for op in fn.all_containers
                           if "." not in op.container})
    local = [n for n in s.names if n in own and n != "self"]
    return bool(local) and all(n in filled for n in local)


def _records_part(fn: FnView, s: Stmt, name: str) -> bool:
    """The branch of a state test puts part of the request (what a parameter
    other than the id carries: ``self.error_block_ids.update(op.block_ids)``)
    into the object's state and leaves: it handles a failure of the request's
    work, not a choice about the request, and the id it leaves behind is lost."""
    data = set(fn.param_names) - {"self", "cls", name}
    for st in walk(s.body):
        if st.kind == "simple" and any(
                op.container.startswith("self.") and op.op in ADD_OPS | {"update"}
                for op in fn.containers(st)) and \
                data & {n.partition(".")[0] for n in st.names} and name not in st.names:
            return True
    return False


def config_test(fn: FnView, s: Stmt, own: set[str] | None = None,
                runtime: frozenset[str] = frozenset()) -> bool:
    """A test that reads only ``self`` attributes, no local or parameter
    (a role or configuration: ``if self._has_mamba``), none of them one that
    background work changes (``runtime``: ``if not self.is_healthy`` is the
    failure path of a heartbeat, not a role)."""
    own = own if own is not None else set(fn.param_names) | {a.target for a in fn.all_assigns}
    attrs = [n.split(".")[1] for n in s.names if n.startswith("self.")]
    return not any(n in own and n != "self" for n in s.names) and bool(attrs) and \
        not runtime.intersection(attrs)


def tests_id(fn: FnView, eff: Effects, s: Stmt) -> bool:
    """An ``if``/``while`` whose test compares an id (``rid in self._x``)."""
    if s.kind not in ("if", "while"):
        return False
    ids = eff.state.id_names_in(fn, s.names)
    if not ids:
        return False
    fields = eff.state.id_attrs
    for c in fn.compares.get(s.line, ()):
        if set(c.ops) & set(_ID_TESTS) and any(
                o in ids or o.rpartition(".")[2] in fields for o in c.operands):
            return True
    # ``if self._status(rid) != DONE`` / ``if self._x.get(rid)``: the id's own state.
    return any(any(eff.state.is_id(fn, a) for a in (*c.args, *(v for _, v in c.kwargs)))
               for c in fn.calls(s))


def warns(fn: FnView, branch: Stmt) -> bool:
    """The early-exit branch logs a warning or error: the drop is not silent,
    it is a condition the author saw and reported (``No blocks to push``)."""
    for s in walk(branch.body + branch.orelse):
        for c in fn.calls(s):
            callee = c.callee or ""
            if is_logging(callee) and callee.rpartition(".")[2] in LOUD:
                return True
    return False


def returns_status(s: Stmt | None) -> bool:
    """``return False`` / ``return result``: the caller learns the outcome and
    owns the id from there."""
    return s is not None and s.kind == "return" and (s.text or "None").strip() != "None"


def ends_with_status(cfg: CFG, rest: list[int]) -> bool:
    """The path leaves by ``return <value>``: the caller learns of the failure."""
    last = [cfg.nodes[n].stmt for n in rest if cfg.nodes[n].stmt is not None]
    return bool(last) and returns_status(last[-1])
