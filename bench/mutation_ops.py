"""Mutation operators for the recall harness (``bench/mutants.py``).

Each operator plants one lifecycle bug of the shape ``kvflowmap check`` is meant
to find (DESIGN.md, "The request lifecycle"): a request id that is not
recorded, not reported, or dropped on one path. An operator is two things:

- a *finder* that walks a LibCST module and yields candidate nodes, and
- a *rewriter* that replaces one such node (returns a node, or a
  ``FlattenSentinel`` of statements).

``find_sites(ops, text, file, module)`` lists each operator's sites in one file
(in walk order, so the same text gives the same sites); ``mutate(text, site)``
re-parses, re-finds the site by its ordinal and rewrites it. The mutated text is only ever
compiled (``compile(..., "exec")``), never imported or run.

Heuristics (they only choose sites; they do not decide detection). All are
syntactic, per file; kvflowmap's own lifecycle model is never consulted, so the
measurement is not circular:

- A *request id* is an expression (not a string or number literal) whose code
  contains ``req`` (``req_id``, ``request.request_id``, ``reqs``,
  ``request_id``) or the name ``rid``.
- A *container add* is ``X[id] = v``, ``X[id].append(...)``, ``X.add(id)``,
  ``X.append(id)``, ``X.update(...)`` (and ``extend``, ``put``,
  ``put_nowait``, ``setdefault``, ``appendleft``) whose arguments or key mention
  an id; it is *self-rooted* when ``X``'s code is ``self.NAME``.
- A *report method* is a method named like a report hook (``REPORT_METHODS``:
  ``get_finished``, ``get_transfer_results``, ``get_block_ids_with_load_errors``,
  ``build_connector_meta``, ``request_finished``, ...) or ``get_...finished``,
  ``get_..._requests``, ``get_..._reqs`` returning a value. A *reported
  container* is a ``self.X`` whose name ``X`` is read (as an attribute, not
  called) in the body of a report method of any class in the file.
- The id-bookkeeping operators (drop-report, early-return, drop-remove,
  drop-failed-blocks, drop-return-report) only take statements in methods of a
  class, never ``__init__``, stats/metrics classes (``STATS_RE``) or the probe.
- A *thread loop* is a ``while`` mentioning an id (a name or attribute, not a
  string) in a function passed as ``target=`` to a ``*Thread``/``Process``,
  to ``.submit`` or ``run_in_executor``, or in the ``run`` of a ``*Thread``
  subclass.
- A *logging call* is a call whose receiver is ``logger``/``logging``/``log``
  (or ends in ``.logger``/``_logger``), ``print``, or ``traceback.*``.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

ID_RE = re.compile(r"req|\brid\b", re.IGNORECASE)
ADD_METHODS = frozenset({"add", "append", "update", "extend", "put", "put_nowait",
                         "setdefault", "appendleft"})
REMOVE_METHODS = frozenset({"pop", "discard", "remove"})
LOG_ROOTS = frozenset({"logger", "logging", "log", "print", "traceback", "warnings"})
LOAD_ERRORS = "get_block_ids_with_load_errors"
INIT_METHODS = frozenset({"__init__", "__post_init__", "__new__", "__init_subclass__"})
WAIT_MODULES = frozenset({"asyncio", "concurrent.futures", "futures"})
FAILED_RE = re.compile(r"invalid|failed|error", re.IGNORECASE)
BUILTINS = frozenset(dir(builtins))
_CODE = cst.Module(body=[])
T = TypeVar("T")


# -- the walk -----------------------------------------------------------------

@dataclass(frozen=True)
class Ctx:
    """One node in walk order with what encloses it."""

    node: cst.CSTNode
    parents: tuple[cst.CSTNode, ...]
    scope: tuple[str, ...]  # class/function names enclosing the node
    funcs: tuple[cst.FunctionDef, ...]  # enclosing defs, outermost first
    cls: cst.ClassDef | None  # nearest enclosing class (of the outermost method)

    @property
    def func(self) -> cst.FunctionDef | None:
        """The innermost enclosing function."""
        return self.funcs[-1] if self.funcs else None


def walk(node: cst.CSTNode) -> Iterator[Ctx]:
    """Every node under ``node`` (pre-order) with its parents and scope. The
    walk of a whole module is kept (for the last module walked), since every
    operator walks the same module."""
    if not isinstance(node, cst.Module):
        return _walk(node, (), (), (), None)
    if _LAST_WALK and _LAST_WALK[0] is node:
        return iter(_LAST_WALK[1])
    _MEMO.clear()
    _LAST_WALK[:] = [node, list(_walk(node, (), (), (), None))]
    return iter(_LAST_WALK[1])


_LAST_WALK: list = []  # [module, its walk]
_MEMO: dict[tuple[str, int], tuple[cst.CSTNode, object]] = {}  # per module walked


def _memo(tag: str, node: cst.CSTNode, compute: Callable[[], T]) -> T:
    """``compute()`` once per node of the module walked last."""
    hit = _MEMO.get((tag, id(node)))
    if hit is None or hit[0] is not node:
        hit = _MEMO[(tag, id(node))] = (node, compute())
    return hit[1]  # type: ignore[return-value]


def _walk(node: cst.CSTNode, parents: tuple[cst.CSTNode, ...], scope: tuple[str, ...],
          funcs: tuple[cst.FunctionDef, ...], cls: cst.ClassDef | None) -> Iterator[Ctx]:
    yield Ctx(node, parents, scope, funcs, cls)
    if isinstance(node, cst.ClassDef):
        scope, cls = (*scope, node.name.value), node if not funcs else cls
    elif isinstance(node, cst.FunctionDef):
        scope, funcs = (*scope, node.name.value), (*funcs, node)
    for child in node.children:
        yield from _walk(child, (*parents, node), scope, funcs, cls)


def code(node: cst.CSTNode) -> str:
    """Source text of a node."""
    return _CODE.code_for_node(node)


def mentions_id(node: cst.CSTNode | None) -> bool:
    """Whether the node's code looks like it carries a request id."""
    return node is not None and bool(ID_RE.search(code(node)))


def _id_expr(node: cst.CSTNode | None) -> bool:
    """An expression (not a string or number literal) that looks like an id
    (a subscript key is unwrapped)."""
    if isinstance(node, cst.SubscriptElement):
        node = node.slice
    if isinstance(node, cst.Index):
        node = node.value
    return (node is not None and not isinstance(node, (
        cst.SimpleString, cst.ConcatenatedString, cst.Integer, cst.Float))
        and mentions_id(node))


def _is_log_call(call: cst.Call) -> bool:
    text = code(call.func)
    root = text.split(".")[0].split("(")[0]
    recv = text.rsplit(".", 1)[0] if "." in text else text
    return root in LOG_ROOTS or recv.endswith(("logger", "_log")) or text == "print"


def _single(stmt: cst.CSTNode) -> cst.BaseSmallStatement | None:
    """The one small statement of a simple statement line, else None."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        return stmt.body[0]
    return None


# -- container adds -----------------------------------------------------------

def container_add(stmt: cst.CSTNode) -> tuple[str, str] | None:
    """``(container code, how)`` when the statement line adds an id to a
    container (``how`` is ``subscript`` or the method name), else None."""
    small = _single(stmt)
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        tgt = small.targets[0].target
        if isinstance(tgt, cst.Subscript) and _id_expr(tgt.slice[0]):
            return code(tgt.value), "subscript"
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        call = small.value
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in ADD_METHODS:
            recv = call.func.value
            if any(_id_expr(a.value) for a in call.args) or (
                    isinstance(recv, cst.Subscript) and _id_expr(recv.slice[0])):
                base = recv.value if isinstance(recv, cst.Subscript) else recv
                return code(base), call.func.attr.value
    return None


def self_container_add(stmt: cst.CSTNode) -> str | None:
    """The ``self.X`` attribute name when the line adds an id to ``self.X``."""
    found = container_add(stmt)
    if found and re.fullmatch(r"self\.\w+", found[0]):
        return found[0].split(".", 1)[1]
    return None


def _in_loop(ctx: Ctx) -> bool:
    """Whether ``continue`` is valid at the node (a loop encloses it in its function)."""
    for p in reversed(ctx.parents):
        if isinstance(p, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if isinstance(p, (cst.For, cst.While)):
            return True
    return False


def _local_names(node: cst.CSTNode) -> list[str]:
    """Plain names read in ``node`` that could be locals (not self, builtins,
    attribute names, keywords or called names, nor names a comprehension or
    lambda inside binds: ``_`` of ``[[] for _ in ...]`` is unbound outside it),
    id-like names first."""
    out: list[str] = []
    bound = {n.value for c in walk(node) if isinstance(c.node, (cst.CompFor, cst.Lambda))
             for n in _bound_by(c.node)}
    for c in walk(node):
        n = c.node
        parent = c.parents[-1] if c.parents else None
        if not isinstance(n, cst.Name) or n.value in ("self", "cls") or n.value in BUILTINS:
            continue
        if isinstance(parent, cst.Attribute) and parent.attr is n:
            continue
        if isinstance(parent, cst.Arg) and parent.keyword is n:
            continue
        if isinstance(parent, cst.Call) and parent.func is n:
            continue
        if n.value not in out and n.value not in bound:
            out.append(n.value)
    return sorted(out, key=lambda name: not ID_RE.search(name))


def _bound_by(node: cst.CompFor | cst.Lambda) -> list[cst.Name]:
    """The names a comprehension's ``for`` target or a lambda's parameters bind."""
    if isinstance(node, cst.Lambda):
        return [p.name for p in node.params.params]
    return [c.node for c in walk(node.target) if isinstance(c.node, cst.Name)]


def _params(func: cst.FunctionDef) -> list[str]:
    ps = [*func.params.posonly_params, *func.params.params, *func.params.kwonly_params]
    return [p.name.value for p in ps if p.name.value not in ("self", "cls")]


def _with_first(func: cst.FunctionDef, stmts: list[cst.BaseStatement]) -> cst.FunctionDef:
    """``func`` with ``stmts`` inserted as its first statements (after a docstring)."""
    old = _stmts(func.body)
    at = 1 if old and _is_docstring(old[0]) else 0
    new = [*old[:at], *stmts, *old[at:]]
    if isinstance(func.body, cst.IndentedBlock):
        return func.with_changes(body=func.body.with_changes(body=new))
    return func.with_changes(body=cst.IndentedBlock(body=new))


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    small = _single(stmt)
    return isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString,
                                                                     cst.ConcatenatedString))


def _stmts(block: cst.BaseSuite) -> list[cst.BaseStatement]:
    """The statements of a block (a one-line suite becomes one line)."""
    if isinstance(block, cst.IndentedBlock):
        return list(block.body)
    assert isinstance(block, cst.SimpleStatementSuite)
    return [cst.SimpleStatementLine(body=list(block.body))]


def _stmt(src: str) -> cst.BaseStatement:
    return cst.parse_statement(src)


PASS = cst.SimpleStatementLine(body=[cst.Pass()])


def _to_pass(node: cst.CSTNode, ctx: Ctx, module: cst.Module) -> cst.CSTNode:
    return PASS.with_changes(leading_lines=getattr(node, "leading_lines", ()))


# -- a peer's id looked up --------------------------------------------------------

_PEER_CALL_RE = re.compile(r"\.(decode|loads|unpackb|recv\w*)\(")


def find_drop_peer_lookup(module: cst.Module) -> Iterator[Ctx]:
    """``if rid not in self.X ...: ... continue`` in a method that decodes or
    receives a peer's message: the filter that keeps an id this instance
    does not hold out of what it reports."""
    for c in walk(module):
        n = c.node
        if not (isinstance(n, cst.If) and _in_class_method(c) and c.func is not None):
            continue
        test = code(n.test)
        last = n.body.body[-1] if isinstance(n.body, cst.IndentedBlock) and n.body.body else None
        if " not in self." in test and n.orelse is None and \
                isinstance(_single(last) if last is not None else None, cst.Continue) and \
                _PEER_CALL_RE.search(code(c.func)):
            yield c


# -- operators ----------------------------------------------------------------

Finder = Callable[[cst.Module], Iterator[Ctx]]
Rewriter = Callable[[cst.CSTNode, Ctx, cst.Module], "cst.CSTNode | cst.FlattenSentinel"]


@dataclass(frozen=True)
class Operator:
    """A mutation operator: where it applies and how it rewrites."""

    name: str
    doc: str
    find: Finder
    rewrite: Rewriter


def _in_method(ctx: Ctx) -> bool:
    return ctx.func is not None


# -- file facts: report methods and the containers they report ----------------
#
# Purely syntactic, per file (never kvflowmap's lifecycle model, so the
# measurement is not circular). A *report method* is a method named like one of
# the protocol's report hooks (``REPORT_METHODS``), or ``get_...finished`` /
# ``get_..._requests`` / ``get_..._reqs`` that returns something. A *reported
# container* is an attribute name ``X`` read (not called) in the body of a
# report method of any class of the file; a site's ``self.X`` must be one.

REPORT_METHODS = frozenset({
    "get_finished", "get_transfer_results", LOAD_ERRORS, "get_finished_with_lazy_offload",
    "build_connector_meta", "request_finished"})
REPORT_NAME_RE = re.compile(r"^get_\w*(finished|_requests|_reqs)$")
PROBE = "get_num_new_matched_tokens"
COMMIT = "update_state_after_alloc"
HOOKS = frozenset({
    PROBE, COMMIT, "build_connector_meta", "request_finished",
    "update_connector_output", "get_finished", "get_transfer_results", "start_load_kv",
    "wait_for_layer_load", "save_kv_layer", "wait_for_save", "bind_connector_metadata",
    "handle_preemptions"})
TEARDOWN_RE = re.compile(r"^(shutdown|close|__init__|__del__|__exit__|__aexit__|stop)$|"
                         r"^_*reset|^_*(shutdown|close|cleanup|teardown)")
# A queue/socket poll with a timeout still hands over every item without it.
POLL_CALLS = frozenset({"get", "get_nowait", "poll", "recv", "recv_multipart", "select"})
STATS_RE = re.compile(r"Stats|Metrics")
RELEASE_RE = re.compile(r"release|free|unpin|unlock|close|ref_count_down|discard|pop",
                        re.IGNORECASE)
# Handlers: what a lifecycle handler catches. Benign, expected-flow exceptions
# (an optional import, an empty queue, a poll that timed out) are not sites.
BROAD_EXC = frozenset({"Exception", "BaseException"})
BENIGN_EXC = frozenset({
    "ImportError", "ModuleNotFoundError", "Again", "Empty", "KeyboardInterrupt",
    "StopIteration", "StopAsyncIteration", "CancelledError", "GeneratorExit",
    "AttributeError", "KeyError", "IndexError", "ValueError", "TypeError",
    "NotImplementedError", "JSONDecodeError", "UnicodeDecodeError", "FileNotFoundError",
    "QueueEmpty", "QueueFull", "Full", "ZMQError"})
TRANSFER_EXC_RE = re.compile(
    r"(transfer|kv|connector|cache|load|save|rpc|remote|nixl|mooncake|runtime|^os|^io|"
    r"connection|socket|network|storage|timeout)\w*(error|exception)$", re.IGNORECASE)


def _is_report_method(func: cst.FunctionDef) -> bool:
    name = func.name.value
    if name in REPORT_METHODS:
        return True
    return bool(REPORT_NAME_RE.match(name)) and any(
        isinstance(c.node, cst.Return) and c.node.value is not None for c in walk(func.body))


def _classes(ctx: Ctx) -> list[cst.ClassDef]:
    return [p for p in ctx.parents if isinstance(p, cst.ClassDef)]


def _in_class_method(ctx: Ctx) -> bool:
    """In a method (or a def nested in one) of a class that is not a stats/metrics
    class, and not in ``__init__``-like methods."""
    classes = _classes(ctx)
    return (bool(ctx.funcs) and bool(classes)
            and not any(STATS_RE.search(k.name.value) for k in classes)
            and not any(f.name.value in INIT_METHODS for f in ctx.funcs))


def _func_names(ctx: Ctx) -> set[str]:
    return {f.name.value for f in ctx.funcs}


@dataclass
class _FileFacts:
    reported: set[str] = field(default_factory=set)  # attribute names read by report methods
    report_funcs: set[int] = field(default_factory=set)  # id() of report FunctionDefs


def _file_facts(module: cst.Module) -> _FileFacts:
    def compute() -> _FileFacts:
        facts = _FileFacts()
        for c in walk(module):
            n = c.node
            if (isinstance(n, cst.FunctionDef) and _classes(c) and _is_report_method(n)):
                facts.report_funcs.add(id(n))
                for x in walk(n.body):
                    a, parent = x.node, x.parents[-1] if x.parents else None
                    if (isinstance(a, cst.Attribute)
                            and not (isinstance(parent, cst.Call) and parent.func is a)):
                        facts.reported.add(a.attr.value)
        return facts
    return _memo("file", module, compute)


def _report_func(ctx: Ctx, module: cst.Module) -> cst.FunctionDef | None:
    """The innermost enclosing report method, if any."""
    ids = _file_facts(module).report_funcs
    return next((f for f in reversed(ctx.funcs) if id(f) in ids), None)


def _returned(func: cst.FunctionDef) -> set[str]:
    return _memo("returns", func, lambda: _returned_names(func))


def _reported_container(container: str, ctx: Ctx, module: cst.Module) -> bool:
    """``self.X`` with ``X`` a reported container, or a local the enclosing
    report method returns."""
    m = re.fullmatch(r"self\.(\w+)", container)
    if m:
        return m.group(1) in _file_facts(module).reported
    func = _report_func(ctx, module)
    return func is not None and container in _returned(func)


def _lifecycle_stmt(ctx: Ctx) -> bool:
    return _in_class_method(ctx) and PROBE not in _func_names(ctx)


def find_drop_report(module: cst.Module) -> Iterator[Ctx]:
    """Statements adding an id to a reported container (``self.X`` read by a
    report method, or a local a report method returns), in a class's methods
    (not ``__init__``, stats/metrics classes, or the probe)."""
    for c in walk(module):
        if not isinstance(c.node, cst.SimpleStatementLine):
            continue
        found = container_add(c.node)
        if found and _lifecycle_stmt(c) and _reported_container(found[0], c, module):
            yield c


def _guard_names(node: cst.CSTNode) -> list[str]:
    """Locals a guard can test that are not the id itself: ``if not req_id``
    never fires for a real (non-empty) id, so that mutant would be equivalent."""
    return [n for n in _local_names(node) if not ID_RE.search(n)]


def find_early_return(module: cst.Module) -> Iterator[Ctx]:
    """The drop-report sites that read a local (not the id) the guard can test."""
    for c in find_drop_report(module):
        if _guard_names(c.node):
            yield c


def rewrite_early_return(node: cst.CSTNode, ctx: Ctx, module: cst.Module):
    """``if not <local>: return|continue`` before the statement, on a local
    that is not the id (a record, a handle, a count)."""
    name = _guard_names(node)[0]
    exit_ = "continue" if _in_loop(ctx) else "return"
    guard = _stmt(f"if not {name}:\n    {exit_}\n")
    guard = guard.with_changes(leading_lines=getattr(node, "leading_lines", ()))
    return cst.FlattenSentinel([guard, node.with_changes(leading_lines=())])


def _exc_names(handler: cst.ExceptHandler) -> list[str] | None:
    """Last dotted part of each caught type; None for a bare ``except:``."""
    if handler.type is None:
        return None
    t = handler.type
    items = [e.value for e in t.elements] if isinstance(t, cst.Tuple) else [t]
    return [code(i).rsplit(".", 1)[-1] for i in items]


def _lifecycle_handler(handler: cst.ExceptHandler, ctx: Ctx) -> bool:
    """Bare, ``Exception``/``BaseException`` or a transfer-ish error; a
    ``TimeoutError`` only outside a (retry) loop."""
    names = _exc_names(handler)
    if names is None:
        return True
    for n in names:
        if n in BENIGN_EXC:
            continue
        if n in ("TimeoutError", "Timeout") or "timeout" in n.lower():
            if not _in_loop(ctx):
                return True
            continue
        if n in BROAD_EXC or TRANSFER_EXC_RE.search(n):
            return True
    return False


def _reports(handler: cst.ExceptHandler) -> bool:
    """The handler adds an id to a container or passes an id to a (non-logging) call."""
    for c in walk(handler.body):
        if isinstance(c.node, cst.SimpleStatementLine) and container_add(c.node):
            return True
        if (isinstance(c.node, cst.Call) and not _is_log_call(c.node)
                and any(_id_expr(a.value) for a in c.node.args)):
            return True
    return False


def find_except_log(module: cst.Module) -> Iterator[Ctx]:
    """Lifecycle except handlers (not ``__init__``) that record or pass on an id."""
    for c in walk(module):
        if (isinstance(c.node, cst.ExceptHandler) and c.funcs
                and not any(f.name.value in INIT_METHODS for f in c.funcs)
                and _lifecycle_handler(c.node, c) and _reports(c.node)):
            yield c


def _module_names(module: cst.Module) -> set[str]:
    """Names bound at module level by assignment or import."""
    names: set[str] = set()
    for stmt in module.body:
        for small in getattr(stmt, "body", ()) if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, (cst.Assign, cst.AnnAssign)):
                tgts = small.targets if isinstance(small, cst.Assign) else [small]
                names.update(t.target.value for t in tgts if isinstance(t.target, cst.Name))
            elif isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(
                    small.names, cst.ImportStar):
                for a in small.names:
                    alias = a.asname.name if a.asname else a.name
                    names.add(code(alias).split(".")[0])
    return names


_JUMP_NODES = (cst.Return, cst.Continue, cst.Break, cst.Raise)


def rewrite_except_log(node: cst.CSTNode, ctx: Ctx, module: cst.Module):
    """The handler's body becomes ``logger.warning("mutant")`` (or ``pass``),
    followed by the body's own last statement when that is a ``return``,
    ``continue``, ``break`` or ``raise``: the handler still leaves the way it
    did, it only forgets to report (without that, the mutant falls through
    into code that reads names the ``try`` never bound)."""
    assert isinstance(node, cst.ExceptHandler)
    src = 'logger.warning("mutant")' if "logger" in _module_names(module) else "pass"
    body: list[cst.BaseStatement] = [_stmt(src + "\n")]
    last = _stmts(node.body)[-1]
    small = _single(last)
    if small is not None and isinstance(small, _JUMP_NODES):
        body.append(cst.SimpleStatementLine(body=[small]))
    return node.with_changes(body=cst.IndentedBlock(body=body))


def _call_name(call: cst.Call) -> str:
    return code(call.func).rsplit(".", 1)[-1]


def find_finally_out(module: cst.Module) -> Iterator[Ctx]:
    """``try/finally`` statements whose finally releases something (a call named
    like release/free/unpin/unlock/close/ref_count_down/discard/pop)."""
    for c in walk(module):
        n = c.node
        if (isinstance(n, cst.Try) and n.finalbody is not None and _in_method(c)
                and any(isinstance(x.node, cst.Call) and RELEASE_RE.search(_call_name(x.node))
                        for x in walk(n.finalbody))):
            yield c


def rewrite_finally_out(node: cst.CSTNode, ctx: Ctx, module: cst.Module):
    """The finally body runs after the try instead of on every exit."""
    assert isinstance(node, cst.Try) and node.finalbody is not None
    tail = _stmts(node.finalbody.body)
    if node.handlers:
        return cst.FlattenSentinel([node.with_changes(finalbody=None), *tail])
    head = _stmts(node.body)
    head[0] = head[0].with_changes(leading_lines=node.leading_lines)
    return cst.FlattenSentinel([*head, *tail])


def _reports_id(stmt: cst.CSTNode) -> bool:
    """The line hands an id on: adds it to a container, or passes it to a call
    that is not logging (``self.set_finished_request(req_id)``)."""
    if container_add(stmt):
        return True
    return any(isinstance(x.node, cst.Call) and not _is_log_call(x.node)
               and any(_id_expr(a.value) for a in x.node.args) for x in walk(stmt))


def find_finally_report_out(module: cst.Module) -> Iterator[Ctx]:
    """``try/finally`` statements whose finally hands an id on (reports the
    request, counts it down, answers for it) and releases nothing by name
    (those are ``finally-out``'s)."""
    for c in walk(module):
        n = c.node
        if (isinstance(n, cst.Try) and n.finalbody is not None and _in_method(c)
                and any(_reports_id(s) for s in _stmts(n.finalbody.body))
                and not any(isinstance(x.node, cst.Call) and RELEASE_RE.search(_call_name(x.node))
                            for x in walk(n.finalbody))):
            yield c


def find_drop_lock(module: cst.Module) -> Iterator[Ctx]:
    """``with self.X:`` (a plain attribute chain, no ``as``) in a class method,
    outside constructors, whose body adds an id to or takes one out of a
    ``self`` container: the lock guarding request state."""
    for c in walk(module):
        n = c.node
        if not (isinstance(n, cst.With) and len(n.items) == 1 and n.items[0].asname is None
                and isinstance(n.items[0].item, cst.Attribute)
                and code(n.items[0].item).startswith("self.") and _in_class_method(c)
                and c.func is not None and c.func.name.value not in INIT_METHODS):
            continue
        if any(_self_id_change(x.node) for x in walk(n.body)):
            yield c


def _self_id_change(node: cst.CSTNode) -> bool:
    """A statement line that adds an id to, or removes one from, ``self.X``."""
    if not isinstance(node, cst.SimpleStatementLine):
        return False
    if self_container_add(node):
        return True
    small = _single(node)
    call = small.value if isinstance(small, cst.Expr) else None
    return (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
            and call.func.attr.value in REMOVE_METHODS
            and code(call.func.value).startswith("self.")
            and any(_id_expr(a.value) for a in call.args))


def rewrite_drop_lock(node: cst.CSTNode, ctx: Ctx, module: cst.Module):
    """The body runs without the lock (dedented in place of the ``with``)."""
    assert isinstance(node, cst.With)
    body = _stmts(node.body)
    body[0] = body[0].with_changes(leading_lines=node.leading_lines)
    return cst.FlattenSentinel(body)


def _timeout_arg(call: cst.Call) -> int | None:
    """Index of the argument that is the call's timeout, else None."""
    for i, a in enumerate(call.args):
        if a.keyword is not None and a.keyword.value == "timeout":
            return i
    if isinstance(call.func, cst.Attribute) and len(call.args) == 1 and not call.args[0].keyword:
        meth, arg = call.func.attr.value, call.args[0].value
        if isinstance(call.func.value, (cst.SimpleString, cst.FormattedString)):
            return None
        if code(call.func.value) in WAIT_MODULES:
            return None
        if meth in ("result", "wait") and not call.args[0].star:
            return 0
        if meth == "join" and (isinstance(arg, (cst.Integer, cst.Float))
                               or "time" in code(arg).lower()):
            return 0
    return None


def find_drop_timeout(module: cst.Module) -> Iterator[Ctx]:
    """Calls given a timeout (``timeout=``, ``.result(x)``, ``.wait(x)``,
    ``.join(t)``) in protocol hooks or thread targets, never in teardown, and
    not queue/socket polls (``POLL_CALLS``)."""
    targets = _thread_targets(module)
    for c in walk(module):
        if not (isinstance(c.node, cst.Call) and c.funcs and _timeout_arg(c.node) is not None
                and _call_name(c.node) not in POLL_CALLS):
            continue
        names = _func_names(c)
        if any(TEARDOWN_RE.search(n) for n in names):
            continue
        if names & HOOKS or names & targets:
            yield c


def rewrite_drop_timeout(node: cst.CSTNode, ctx: Ctx, module: cst.Module):
    """The call without its timeout argument."""
    assert isinstance(node, cst.Call)
    i = _timeout_arg(node)
    args = [a for j, a in enumerate(node.args) if j != i]
    if args:
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return node.with_changes(args=args)


# reset-no-forward and probe-acquire need class-level facts: which self.X are
# filled with ids where.

@dataclass
class _ClassFacts:
    fillers: dict[str, set[str]] = field(default_factory=dict)  # attr -> methods filling it
    how: dict[str, str] = field(default_factory=dict)  # attr -> first way it is filled
    inits: dict[str, str] = field(default_factory=dict)  # attr -> code of its first value


def _self_attr(node: cst.CSTNode) -> str | None:
    """``X`` when the node is ``self.X``."""
    if (isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name)
            and node.value.value == "self"):
        return node.attr.value
    return None


def _class_facts(cls: cst.ClassDef, module: cst.Module) -> _ClassFacts:
    """Which ``self.X`` each method of ``cls`` fills with ids, and initialises."""
    facts = _ClassFacts()
    for c in walk(module):
        if c.func is None or c.cls is not cls:
            continue
        method = c.funcs[0].name.value
        attr = self_container_add(c.node)
        if attr:
            facts.fillers.setdefault(attr, set()).add(method)
            facts.how.setdefault(attr, container_add(c.node)[1])  # type: ignore[index]
        small = _single(c.node)
        if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is not None:
            tgts = small.targets if isinstance(small, cst.Assign) else [small]
            for t in tgts:
                target = _self_attr(t.target)
                if target:
                    facts.inits.setdefault(target, code(small.value))
    return facts


def _facts_of(cls: cst.ClassDef, module: cst.Module) -> _ClassFacts:
    return _memo("class", cls, lambda: _class_facts(cls, module))


COPY_CALLS = frozenset({"set", "list", "dict", "tuple", "frozenset", "sorted", "deepcopy",
                        "copy"})
ITER_METHODS = frozenset({"items", "keys", "values", "copy"})


def _forward_read(ctx: Ctx) -> str | None:
    """``X`` when the node reads ``self.X`` to forward it: iterates it
    (``for``/comprehension, maybe via ``.items()``), copies it
    (``set(self.X)``, ``self.X.copy()``) or returns it."""
    attr = _self_attr(ctx.node)
    if attr is None or not ctx.parents:
        return None
    node, parents = ctx.node, list(ctx.parents)
    # self.X.items() / .keys() / .values() / .copy(): the call is the read
    if (len(parents) >= 2 and isinstance(parents[-1], cst.Attribute)
            and parents[-1].value is node and parents[-1].attr.value in ITER_METHODS
            and isinstance(parents[-2], cst.Call) and parents[-2].func is parents[-1]):
        node, parents = parents[-2], parents[:-2]
        if not parents:
            return None
    parent = parents[-1]
    if isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is node:
        return attr
    if isinstance(parent, cst.Return) and parent.value is node:
        return attr
    if isinstance(parent, cst.Element) and len(parents) >= 3 and isinstance(
            parents[-2], cst.Tuple) and isinstance(parents[-3], cst.Return):
        return attr
    if (isinstance(parent, cst.Arg) and len(parents) >= 2 and isinstance(parents[-2], cst.Call)
            and _call_name(parents[-2]) in COPY_CALLS):
        return attr
    if node is not ctx.node and code(node).endswith(".copy()"):
        return attr
    return None


def _reset_site(func: cst.FunctionDef, cls: cst.ClassDef,
                module: cst.Module) -> tuple[cst.BaseStatement, str] | None:
    """The statement (directly in a block) holding ``func``'s first forwarding
    read of a reported, id-filled ``self.X`` that ``func`` does not fill."""
    name = func.name.value
    if TEARDOWN_RE.search(name) or (name.startswith("__") and name.endswith("__")):
        return None
    facts = _facts_of(cls, module)
    reported = _file_facts(module).reported
    for c in walk(func.body):
        attr = _forward_read(c)
        if (attr is None or attr not in reported or attr not in facts.fillers
                or name in facts.fillers[attr]):
            continue
        chain = [*c.parents, c.node]
        for i in range(len(chain) - 1, 0, -1):
            if isinstance(chain[i], cst.BaseStatement) and isinstance(chain[i - 1],
                                                                      cst.IndentedBlock):
                return chain[i], attr  # type: ignore[return-value]
        return None
    return None


def _method_class(ctx: Ctx) -> tuple[cst.FunctionDef, cst.ClassDef] | None:
    """The method (a def directly in a class body) enclosing ``ctx`` and its class."""
    for i, p in enumerate(ctx.parents):
        if (isinstance(p, cst.FunctionDef) and i >= 2 and isinstance(ctx.parents[i - 1],
                                                                    cst.IndentedBlock)
                and isinstance(ctx.parents[i - 2], cst.ClassDef)):
            return p, ctx.parents[i - 2]  # type: ignore[return-value]
    return None


def find_reset_no_forward(module: cst.Module) -> Iterator[Ctx]:
    """In methods (not teardown, reset*, dunders) that forward a reported
    ``self.X`` another method fills with ids: the statement of the first read."""
    for c in walk(module):
        if not isinstance(c.node, cst.BaseStatement):
            continue
        mc = _method_class(c)
        if mc is None or STATS_RE.search(mc[1].name.value):
            continue
        site = _memo("reset", mc[0], lambda mc=mc: _reset_site(mc[0], mc[1], module))
        if site is not None and site[0] is c.node:
            yield c


_CONTAINER_INIT = re.compile(
    r"(set|dict|list|deque|defaultdict|OrderedDict|Counter)\(|\{|\[|(collections\.)")


def rewrite_reset_no_forward(node: cst.CSTNode, ctx: Ctx, module: cst.Module):
    """``self.X.clear()`` (or a fresh empty container) just before the first read."""
    mc = _method_class(ctx)
    assert mc is not None
    site = _reset_site(mc[0], mc[1], module)
    assert site is not None
    attr = site[1]
    facts = _facts_of(mc[1], module)
    init = facts.inits.get(attr, "")
    if _CONTAINER_INIT.match(init):
        src = f"self.{attr}.clear()"
    else:
        empty = {"subscript": "{}", "add": "set()"}.get(facts.how.get(attr, ""), "[]")
        src = f"self.{attr} = {empty}"
    clear = _stmt(src + "\n").with_changes(leading_lines=getattr(node, "leading_lines", ()))
    return cst.FlattenSentinel([clear, node.with_changes(leading_lines=())])


def _methods_named(module: cst.Module, names: tuple[str, ...]) -> Iterator[Ctx]:
    for c in walk(module):
        if isinstance(c.node, cst.FunctionDef) and c.node.name.value in names and _params(c.node):
            yield c


def find_request_finished_true(module: cst.Module) -> Iterator[Ctx]:
    """Every ``request_finished`` with a request parameter."""
    return _methods_named(module, ("request_finished",))


def rewrite_request_finished_true(node: cst.CSTNode, ctx: Ctx, module: cst.Module):
    """``if request.request_id: return True, None`` first: delay freeing, schedule no save."""
    assert isinstance(node, cst.FunctionDef)
    p = _params(node)[0]
    return _with_first(node, [_stmt(f"if {p}.request_id:\n    return True, None\n")])


def _returned_attrs(func: cst.FunctionDef) -> set[str]:
    """``self.X`` attributes whose contents ``func`` returns: in a return value
    or in the value of a local the function returns."""
    locals_ = _returned(func)
    out: set[str] = set()
    for c in walk(func.body):
        n = c.node
        vals: list[cst.CSTNode] = []
        if isinstance(n, cst.Return) and n.value is not None:
            vals = [n.value]
        elif isinstance(n, cst.Assign) and any(
                isinstance(t.target, cst.Name) and t.target.value in locals_ for t in n.targets):
            vals = [n.value]
        for v in vals:
            out.update(a for x in walk(v) if (a := _self_attr(x.node)))
    return out


def _failed_containers(module: cst.Module) -> tuple[set[str], set[str]]:
    """(``self.X`` names returned by ``get_block_ids_with_load_errors``, and
    failed/invalid/error-named ``self.X`` other report methods return)."""
    def compute() -> tuple[set[str], set[str]]:
        errors: set[str] = set()
        failed: set[str] = set()
        for c in walk(module):
            n = c.node
            if not (isinstance(n, cst.FunctionDef) and _classes(c) and _is_report_method(n)):
                continue
            attrs = _returned_attrs(n)
            if n.name.value == LOAD_ERRORS:
                errors |= attrs
            else:
                failed |= {a for a in attrs if FAILED_RE.search(a)}
        return errors, failed
    return _memo("failed", module, compute)


def _adds_to(stmt: cst.CSTNode) -> str | None:
    """Code of the container a statement line adds to (any element), else None."""
    small = _single(stmt)
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        f = small.value.func
        if isinstance(f, cst.Attribute) and f.attr.value in ("add", "update", "append", "extend"):
            return code(f.value)
    if isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.BitOrAssign):
        return code(small.target)
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        t = small.targets[0].target
        if isinstance(t, cst.Subscript):
            return code(t.value)
    return None


def find_drop_failed_blocks(module: cst.Module) -> Iterator[Ctx]:
    """Adds to a container ``get_block_ids_with_load_errors`` returns (a
    ``self.X``, or its own returned local), or to a failed/invalid-named
    ``self.X`` another report method returns; not in stats/metrics classes."""
    errors, failed = _failed_containers(module)
    for c in walk(module):
        if not isinstance(c.node, cst.SimpleStatementLine) or not _in_class_method(c):
            continue
        target = _adds_to(c.node)
        if target is None:
            continue
        m = re.fullmatch(r"self\.(\w+)", target)
        if m and (m.group(1) in errors or m.group(1) in failed):
            yield c
        elif not m and c.func is not None and c.func.name.value == LOAD_ERRORS \
                and target in _returned(c.func):
            yield c


def _thread_targets(module: cst.Module) -> set[str]:
    """Function names handed to a thread or an executor in this module, and
    ``run`` when a class of the module subclasses a ``Thread``."""
    def compute() -> set[str]:
        out: set[str] = set()
        for c in walk(module):
            n = c.node
            if isinstance(n, cst.ClassDef) and any(
                    code(b.value).rsplit(".", 1)[-1].endswith("Thread") for b in n.bases):
                out.add("run")
            if not isinstance(n, cst.Call):
                continue
            fname = _call_name(n)
            picked: list[cst.BaseExpression] = []
            if fname.endswith("Thread") or fname == "Process":
                picked = [a.value for a in n.args if a.keyword and a.keyword.value == "target"]
            elif fname == "submit" and n.args:
                picked = [n.args[0].value]
            elif fname == "run_in_executor" and len(n.args) >= 2:
                picked = [n.args[1].value]
            out.update(code(p).rsplit(".", 1)[-1] for p in picked)
        return out
    return _memo("targets", module, compute)


def _thread_class(ctx: Ctx) -> bool:
    classes = _classes(ctx)
    return bool(classes) and any(code(b.value).rsplit(".", 1)[-1].endswith("Thread")
                                 for b in classes[-1].bases)


def _mentions_id_name(node: cst.CSTNode) -> bool:
    """A name or attribute (not a string) in the node looks like a request id."""
    for c in walk(node):
        n = c.node
        if isinstance(n, cst.Name) and ID_RE.search(n.value):
            return True
        if isinstance(n, cst.Attribute) and ID_RE.search(n.attr.value):
            return True
    return False


def find_raise_in_thread_loop(module: cst.Module) -> Iterator[Ctx]:
    """Outermost ``while`` loops handling request ids in thread/executor targets
    or in the ``run`` of a ``Thread`` subclass."""
    targets = _thread_targets(module)
    for c in walk(module):
        if not (isinstance(c.node, cst.While) and c.func is not None
                and isinstance(c.node.body, cst.IndentedBlock)):
            continue
        name = c.func.name.value
        is_target = (name in targets and name != "run") or (name == "run" and _thread_class(c))
        nested = any(isinstance(p, cst.While) for p in c.parents[c.parents.index(c.func):])
        if is_target and not nested and _mentions_id_name(c.node.body):
            yield c


def rewrite_raise_in_thread_loop(node: cst.CSTNode, ctx: Ctx, module: cst.Module):
    """``if <local>: raise RuntimeError("mutant")`` first in the loop body."""
    assert isinstance(node, cst.While) and isinstance(node.body, cst.IndentedBlock)
    func = ctx.func
    assert func is not None
    names = [n for n in _local_names(node) if n in _params(func) or n in _assigned(func)]
    guard = _stmt(f'if {names[0] if names else "self"}:\n    raise RuntimeError("mutant")\n')
    return node.with_changes(body=node.body.with_changes(body=[guard, *node.body.body]))


def _assigned(func: cst.FunctionDef) -> set[str]:
    out: set[str] = set()
    for c in walk(func.body):
        if isinstance(c.node, cst.AssignTarget) and isinstance(c.node.target, cst.Name):
            out.add(c.node.target.value)
        if isinstance(c.node, cst.For) and isinstance(c.node.target, cst.Name):
            out.add(c.node.target.value)
    return out


_SET_INIT = re.compile(r"(set|frozenset)\(|\{\s*\}$|\{[^:]*\}$")
_DICT_INIT = re.compile(r"(dict|defaultdict|OrderedDict)\(|\{")


def _probe_holder(ctx: Ctx, module: cst.Module) -> tuple[str, str] | None:
    """An existing id-keyed set (``add``) or dict (``subscript``) ``self.X`` of
    the probe's class, preferring reported ones: ``(X, how)``."""
    mc = _method_class(ctx) if not isinstance(ctx.node, cst.FunctionDef) else None
    cls = mc[1] if mc else (ctx.parents[-2] if len(ctx.parents) >= 2
                            and isinstance(ctx.parents[-2], cst.ClassDef) else None)
    if cls is None:
        return None
    facts = _facts_of(cls, module)
    reported = _file_facts(module).reported
    found = [(attr not in reported, attr, facts.how[attr]) for attr in facts.fillers
             if facts.how.get(attr) in ("add", "subscript")
             and PROBE not in facts.fillers[attr]]
    if not found:
        return None
    _, attr, how = min(found)
    return attr, how


def find_probe_acquire(module: cst.Module) -> Iterator[Ctx]:
    """Every ``get_num_new_matched_tokens`` with a request parameter, in a class
    with an id-keyed set/dict attribute to record the request in."""
    for c in _methods_named(module, (PROBE,)):
        if _probe_holder(c, module):
            yield c


def rewrite_probe_acquire(node: cst.CSTNode, ctx: Ctx, module: cst.Module):
    """The probe records the request in an existing id-keyed attribute:
    ``self.X.add(request.request_id)`` or ``self.X[request.request_id] = None``."""
    assert isinstance(node, cst.FunctionDef)
    p = _params(node)[0]
    held = _probe_holder(ctx, module)
    assert held is not None
    attr, how = held
    src = (f"self.{attr}.add({p}.request_id)\n" if how == "add"
           else f"self.{attr}[{p}.request_id] = None\n")
    return _with_first(node, [_stmt(src)])


def _returned_names(func: cst.FunctionDef) -> set[str]:
    out: set[str] = set()
    for c in walk(func.body):
        if isinstance(c.node, cst.Return) and c.node.value is not None:
            v = c.node.value
            items = [e.value for e in v.elements] if isinstance(v, cst.Tuple) else [v]
            out.update(i.value for i in items if isinstance(i, cst.Name))
    return out


def find_drop_return_report(module: cst.Module) -> Iterator[Ctx]:
    """In report methods (not of stats/metrics classes), adds to a local the
    method returns."""
    for c in walk(module):
        if not isinstance(c.node, cst.SimpleStatementLine) or not _in_class_method(c):
            continue
        func = _report_func(c, module)
        if func is None or func is not c.func:
            continue
        target = _adds_to(c.node)
        if target and target in _returned(func):
            yield c


def _removed_from(stmt: cst.CSTNode) -> str | None:
    """Code of the container a statement line removes an id from, else None."""
    small = _single(stmt)
    if isinstance(small, cst.Del):
        t = small.target
        if isinstance(t, cst.Subscript) and _id_expr(t.slice[0]):
            return code(t.value)
        return None
    call = None
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        call = small.value
    if call is not None and isinstance(call.func, cst.Attribute) \
            and call.func.attr.value in REMOVE_METHODS and call.args \
            and _id_expr(call.args[0].value):
        return code(call.func.value)
    return None


def find_drop_remove(module: cst.Module) -> Iterator[Ctx]:
    """Statements removing an id from a reported ``self.X`` that the file fills
    with ids (``del``, ``.pop``, ``.discard``, ``.remove``), in a class's methods (not ``__init__``, the
    probe, or stats/metrics classes)."""
    for c in walk(module):
        if not isinstance(c.node, cst.SimpleStatementLine):
            continue
        target = _removed_from(c.node)
        if target is None or not _lifecycle_stmt(c):
            continue
        m = re.fullmatch(r"self\.(\w+)", target)
        if m and m.group(1) in _file_facts(module).reported and m.group(1) in _id_filled(module):
            yield c


def _id_filled(module: cst.Module) -> set[str]:
    """Names ``X`` of every ``self.X`` some statement of the file adds an id to."""
    return _memo("filled", module, lambda: {
        a for c in walk(module) if isinstance(c.node, cst.SimpleStatementLine)
        and (a := self_container_add(c.node))})


# -- a release before a failure exit --------------------------------------------
#
# The bug a check added later makes: a function that releases something
# before one of its failure exits (``self._release_probe(req_id); raise ...``,
# or ``self._unpin(rid); return 0, False`` in an ``except``) gains another that
# forgets it. The mutant drops the release before one such exit while another
# failure exit of the function keeps the same call.

RELEASE_RE = re.compile(r"(^|_)(release|unpin|unlock|free|close|unref|deref)", re.IGNORECASE)


def _release_callee(stmt: cst.CSTNode) -> str | None:
    """The callee's code when the line is one release-named call (not logging)."""
    small = _single(stmt)
    call = small.value if isinstance(small, cst.Expr) else None
    if not isinstance(call, cst.Call) or _is_log_call(call):
        return None
    name = code(call.func).rpartition(".")[2]
    return code(call.func) if RELEASE_RE.search(name) else None


def _failure_exit(stmt: cst.CSTNode, in_handler: bool) -> bool:
    small = _single(stmt)
    return isinstance(small, cst.Raise) or (in_handler and isinstance(small, cst.Return))


def _releases_before_failures(func: cst.FunctionDef) -> list[tuple[cst.CSTNode, str]]:
    """(release line, callee) for each failure exit of ``func`` whose block
    runs a release-named call in the lines right before it (log lines skipped)."""
    out: list[tuple[cst.CSTNode, str]] = []
    for c in walk(func):
        if len(c.funcs) != 1 or not isinstance(c.node, cst.IndentedBlock):
            continue  # a block of ``func`` itself, not of a nested def
        in_handler = any(isinstance(p, cst.ExceptHandler) for p in c.parents)
        stmts = list(c.node.body)
        for i, st in enumerate(stmts):
            if not _failure_exit(st, in_handler):
                continue
            for prev in reversed(stmts[:i]):
                small = _single(prev)
                if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and \
                        _is_log_call(small.value):
                    continue
                callee = _release_callee(prev)
                if callee is not None:
                    out.append((prev, callee))
                break
    return out


def find_unreleased_failure(module: cst.Module) -> Iterator[Ctx]:
    """Release lines right before a failure exit, in functions where another
    failure exit is released by the same call."""
    keep: set[int] = set()
    for c in walk(module):
        if isinstance(c.node, cst.FunctionDef):
            sites = _releases_before_failures(c.node)
            callees = [callee for _, callee in sites]
            keep |= {id(node) for node, callee in sites if callees.count(callee) > 1}
    for c in walk(module):
        if id(c.node) in keep:
            yield c


# -- operators for waits and done-callbacks -----------------------------------

_TIMEOUT_OPTS = ("RCVTIMEO",)


def find_drop_socket_timeout(module: cst.Module) -> Iterator[Ctx]:
    """A line that gives a socket its receive timeout (``sock.setsockopt(
    zmq.RCVTIMEO, ms)``, ``sock.settimeout(s)``) in a method, not in teardown."""
    for c in walk(module):
        if not isinstance(c.node, cst.SimpleStatementLine) or not c.funcs:
            continue
        small = _single(c.node)
        call = small.value if isinstance(small, cst.Expr) else None
        if not isinstance(call, cst.Call) or any(TEARDOWN_RE.search(n) and n != "__init__"
                                                 for n in _func_names(c)):
            continue
        name = _call_name(call)
        if name == "settimeout" or (name == "setsockopt" and call.args and
                                    any(o in code(call.args[0].value) for o in _TIMEOUT_OPTS)):
            yield c


def _bound_names(block: cst.CSTNode) -> set[str]:
    """Plain names assigned (``x = ...``, ``a, b = ...``) anywhere in ``block``."""
    out: set[str] = set()
    for c in walk(block):
        if isinstance(c.node, cst.AssignTarget):
            t = c.node.target
            elts = [e.value for e in t.elements] if isinstance(t, (cst.Tuple, cst.List)) else [t]
            out.update(e.value for e in elts if isinstance(e, cst.Name))
    return out


def find_handler_falls_through(module: cst.Module) -> Iterator[Ctx]:
    """The ``return``/``continue`` that ends an ``except`` handler of a ``try``
    whose body binds a name that a statement after the ``try`` reads: without
    it the handler goes on into a name the failed ``try`` never bound."""
    for c in walk(module):
        if not isinstance(c.node, cst.SimpleStatementLine) or not c.funcs or len(c.parents) < 4:
            continue
        if not isinstance(_single(c.node), (cst.Return, cst.Continue)):
            continue
        block, handler, tried, outer = c.parents[-1], c.parents[-2], c.parents[-3], c.parents[-4]
        if not (isinstance(handler, cst.ExceptHandler) and isinstance(tried, cst.Try) and
                isinstance(block, cst.IndentedBlock) and block.body[-1] is c.node and
                isinstance(outer, (cst.IndentedBlock, cst.Module))):
            continue
        names = _bound_names(tried.body) - _bound_names(handler.body)
        after = list(outer.body)[list(outer.body).index(tried) + 1:] \
            if tried in outer.body else []
        text = "\n".join(code(st) for st in after)
        if any(re.search(rf"(?<![\w.]){re.escape(n)}\b", text) for n in names):
            yield c


def find_unchecked_callback(module: cst.Module) -> Iterator[Ctx]:
    """The line of a done-callback (a def whose name is passed to
    ``add_done_callback``) that asks its future how it ended (a bare
    ``fut.result()`` / ``fut.exception()``), the check the callback's failure
    branch depends on."""
    callbacks = {code(a.value) for c in walk(module) if isinstance(c.node, cst.Call)
                 and _call_name(c.node) == "add_done_callback" for a in c.node.args[:1]}
    for c in walk(module):
        if not (isinstance(c.node, cst.SimpleStatementLine) and c.func is not None
                and c.func.name.value in callbacks and _params(c.func)):
            continue
        small = _single(c.node)
        call = small.value if isinstance(small, cst.Expr) else None
        first = [p for p in _params(c.func) if p != "self"][:1]
        if isinstance(call, cst.Call) and first and code(call.func) in (
                f"{first[0]}.result", f"{first[0]}.exception"):
            yield c


def find_silent_load_errors(module: cst.Module) -> Iterator[Ctx]:
    """Overrides of ``get_block_ids_with_load_errors`` that return something
    other than a constant empty set: the hook is made to report nothing."""
    for c in walk(module):
        n = c.node
        if isinstance(n, cst.FunctionDef) and n.name.value == LOAD_ERRORS and _classes(c):
            body = [st for st in _stmts(n.body) if not _is_docstring(st)]
            if not (len(body) == 1 and code(body[0]).strip() == "return set()"):
                yield c


def rewrite_silent_load_errors(node: cst.CSTNode, ctx: Ctx, module: cst.Module):
    """The hook answers ``set()`` and nothing else."""
    assert isinstance(node, cst.FunctionDef)
    return node.with_changes(body=cst.IndentedBlock(body=[_stmt("return set()")]))


def find_finish_no_forward(module: cst.Module) -> Iterator[Ctx]:
    """In ``request_finished``, a statement adding to a ``self`` container in
    a block that ends with ``return False, ...``: the path that ends the
    request without delaying tells the workers about it
    (``reqs_not_processed``)."""
    parents = {id(c.node): c for c in walk(module)}
    for c in walk(module):
        if not (isinstance(c.node, cst.IndentedBlock) and c.func is not None
                and c.func.name.value == "request_finished"):
            continue
        body = list(c.node.body)
        last = _single(body[-1]) if body else None
        if not (isinstance(last, cst.Return) and last.value is not None
                and code(last.value).startswith("False")):
            continue
        for stmt in body[:-1]:
            found = container_add(stmt)
            if found and found[0].startswith("self."):
                yield parents[id(stmt)]


# -- a shutdown that forgets one of the objects it closes ----------------------

SHUTDOWN_CLOSE_RE = re.compile(r"^self\.\w+\.(close|shutdown|stop|join|terminate)\(")


def find_shutdown_no_close(module: cst.Module) -> Iterator[Ctx]:
    """Statements ``self.X.close()`` (or shutdown/stop/join/terminate) in a
    class's ``shutdown`` method: the mutant forgets to close that object."""
    for c in walk(module):
        if not isinstance(c.node, cst.SimpleStatementLine) or c.func is None \
                or c.func.name.value != "shutdown" or len(c.funcs) != 1 or not _classes(c):
            continue
        if SHUTDOWN_CLOSE_RE.match(code(c.node).strip()):
            yield c


# -- a REP serving loop that forgets one of its replies --------------------------

REPLY_RE = re.compile(r"^(?:await\s+)?([\w.]+)\.send(?:_multipart|_pyobj|_json|_string)?\(")


def find_drop_reply(module: cst.Module) -> Iterator[Ctx]:
    """In a module that makes ``zmq.REP`` sockets, a reply ``sock.send(...)``
    inside a loop whose function sends on the same socket more than once
    (an error reply besides the normal one): the mutant drops it."""
    if "zmq.REP" not in code(module):
        return
    sends: dict[tuple[int, str], int] = {}
    hits = []
    for c in walk(module):
        if not isinstance(c.node, cst.SimpleStatementLine) or c.func is None:
            continue
        m = REPLY_RE.match(code(c.node).strip())
        if m and any(isinstance(p, (cst.While, cst.For)) for p in c.parents):
            key = (id(c.func), m.group(1))
            sends[key] = sends.get(key, 0) + 1
            hits.append((key, c))
    for key, c in hits:
        if sends[key] > 1:
            yield c


def find_pop_to_del(module: cst.Module) -> Iterator[Ctx]:
    """``self.X.pop(k, None)`` as a statement in a class's methods: the
    removal that tolerates an entry another path took out already."""
    for c in walk(module):
        small = _single(c.node) if isinstance(c.node, cst.SimpleStatementLine) else None
        if not (small is not None and isinstance(small, cst.Expr) and _in_class_method(c)):
            continue
        call = small.value
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) \
                and call.func.attr.value == "pop" and code(call.func.value).startswith("self.") \
                and len(call.args) == 2 and code(call.args[1].value) == "None":
            yield c


def rewrite_pop_to_del(node: cst.CSTNode, ctx: Ctx, module: cst.Module):
    """``del self.X[k]``: a KeyError where the entry is gone."""
    small = _single(node)
    assert isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)
    call = small.value
    assert isinstance(call.func, cst.Attribute)
    target = f"{code(call.func.value)}[{code(call.args[0].value)}]"
    return _stmt(f"del {target}\n").with_changes(
        leading_lines=getattr(node, "leading_lines", ()))


# -- a per-request count no longer moved ---------------------------------------

def _counted_subscript(target: cst.BaseExpression) -> bool:
    """``self.X[k]`` with a key that is not a string literal (a statistic)."""
    return isinstance(target, cst.Subscript) and code(target.value).startswith("self.") and \
        len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index) and \
        not isinstance(target.slice[0].slice.value, (cst.SimpleString, cst.ConcatenatedString))


def find_drop_count_move(module: cst.Module) -> Iterator[Ctx]:
    """A count of a ``self`` container moved by a number, as a statement in a
    class's methods: ``self.X[k] += 1``, ``self.X[k] -= 1``, ``self.X[k] =
    left - 1``; its key is not a literal (per request, not a statistic)."""
    for c in walk(module):
        small = _single(c.node) if isinstance(c.node, cst.SimpleStatementLine) else None
        if small is None or not _in_class_method(c):
            continue
        if isinstance(small, cst.AugAssign) and isinstance(
                small.operator, (cst.AddAssign, cst.SubtractAssign)) and \
                isinstance(small.value, cst.Integer) and _counted_subscript(small.target):
            yield c
        elif isinstance(small, cst.Assign) and len(small.targets) == 1 and \
                _counted_subscript(small.targets[0].target) and \
                isinstance(small.value, cst.BinaryOperation) and \
                isinstance(small.value.operator, (cst.Add, cst.Subtract)) and \
                isinstance(small.value.right, cst.Integer):
            yield c


# -- a None test dropped ---------------------------------------------------------

def _none_test(node: cst.BaseExpression, op: type) -> str | None:
    """``X.f`` when ``node`` is ``X.f is not None`` (``op`` IsNot) or
    ``X.f is None`` (``op`` Is), ``X`` a chain other than ``self`` itself."""
    if not (isinstance(node, cst.Comparison) and len(node.comparisons) == 1):
        return None
    cmp = node.comparisons[0]
    if not (isinstance(cmp.operator, op) and isinstance(cmp.comparator, cst.Name)
            and cmp.comparator.value == "None" and isinstance(node.left, cst.Attribute)):
        return None
    text = code(node.left)
    head = text.rpartition(".")[0]
    return text if re.fullmatch(r"[A-Za-z_][\w.]*", text) and head not in ("self", "cls") \
        else None


def find_drop_none_test(module: cst.Module) -> Iterator[Ctx]:
    """An ``if X.f is not None [and ...]:`` whose body reads through ``X.f``,
    or an ``if X.f is None: return/continue`` followed in its block by such a
    read: the test that keeps a request without the field out."""
    for c in walk(module):
        if not (isinstance(c.node, cst.If) and c.func is not None):
            continue
        test = c.node.test
        left = test.left if isinstance(test, cst.BooleanOperation) and \
            isinstance(test.operator, cst.And) else test
        field = _none_test(left, cst.IsNot)
        if field and f"{field}." in code(c.node.body):
            yield c
            continue
        field = _none_test(test, cst.Is)
        body = _stmts(c.node.body)
        block = c.parents[-1] if c.parents else None
        if field and not c.node.orelse and len(body) == 1 and \
                isinstance(_single(body[0]), (cst.Return, cst.Continue)) and \
                isinstance(block, cst.IndentedBlock) and c.node in block.body:
            after = list(block.body)[list(block.body).index(c.node) + 1:]
            if any(f"{field}." in code(st) for st in after):
                yield c


def rewrite_drop_none_test(node: cst.CSTNode, ctx: Ctx, module: cst.Module):
    """The ``is not None`` conjunct goes (``if True:`` when it was the whole
    test); an ``if X.f is None: return`` becomes ``pass``."""
    assert isinstance(node, cst.If)
    test = node.test
    if isinstance(test, cst.Comparison) and isinstance(test.comparisons[0].operator, cst.Is):
        return _to_pass(node, ctx, module)
    if isinstance(test, cst.BooleanOperation):
        return node.with_changes(test=test.right)
    return node.with_changes(test=cst.Name("True"))


# -- the commit hook blind to whether it was chosen ------------------------------

def _count_param(func: cst.FunctionDef) -> str | None:
    """The commit hook's count of external tokens (its third parameter after
    ``self``), when it is one."""
    ps = _params(func)
    return ps[2] if func.name.value == COMMIT and len(ps) >= 3 else None


def find_ignore_count(module: cst.Module) -> Iterator[Ctx]:
    """A commit hook that compares its count of external tokens
    (``if num_external_tokens > 0``): it tells a connector not chosen to load
    apart."""
    for c in walk(module):
        if not isinstance(c.node, cst.FunctionDef):
            continue
        count = _count_param(c.node)
        if count and any(isinstance(x.node, cst.Comparison) and any(
                isinstance(n.node, cst.Name) and n.node.value == count for n in walk(x.node))
                for x in walk(c.node.body)):
            yield c


class _AsChosen(cst.CSTTransformer):
    """Every read of ``name`` becomes ``1``: the count of a chosen load."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return cst.Integer("1") if updated.value == self.name else updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute
                        ) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)  # ``x.name`` is no read

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)


def rewrite_ignore_count(node: cst.CSTNode, ctx: Ctx, module: cst.Module):
    """The hook's body reads its count as ``1``: every call is taken as the
    chosen load."""
    assert isinstance(node, cst.FunctionDef)
    count = _count_param(node)
    assert count is not None
    return node.with_changes(body=node.body.visit(_AsChosen(count)))


# -- a request registered only after it is handed to background work -----------

_PUT_RE = re.compile(r"\.(put|put_nowait|submit)\(")
_REGISTER_RE = re.compile(r"self\.\w+\.add\(")


def _methods_doing(module: cst.Module, pattern: re.Pattern[str],
                   unless: re.Pattern[str] | None = None) -> set[str]:
    """Names of the module's methods whose body matches ``pattern`` and not ``unless``."""
    def compute() -> set[str]:
        out = set()
        for c in walk(module):
            if isinstance(c.node, cst.FunctionDef) and c.cls is not None:
                text = code(c.node.body)
                if pattern.search(text) and not (unless and unless.search(text)):
                    out.add(c.node.name.value)
        return out
    return _memo(f"doing:{pattern.pattern}:{unless and unless.pattern}", module, compute)


def _calls_any(stmt: cst.CSTNode, names: set[str]) -> bool:
    return any(isinstance(x.node, cst.Call) and isinstance(x.node.func, cst.Attribute)
               and x.node.func.attr.value in names for x in walk(stmt))


def _register_then_handoff(func: cst.FunctionDef, module: cst.Module) -> tuple[int, int] | None:
    """Indexes (registration, last hand-off after it) among the top-level
    statements of ``func``: a statement registering ids (``self.X.add(id)``,
    or a call to a method of the module that does so) and a later one handing
    ids to background work (a queue ``put``/``submit``, or a call to a method
    that does)."""
    putters = _methods_doing(module, _PUT_RE)
    registrars = _methods_doing(module, _REGISTER_RE, _PUT_RE)
    body = _stmts(func.body)
    regs = [i for i, st in enumerate(body) if mentions_id(st) and (
        _REGISTER_RE.search(code(st)) or _calls_any(st, registrars))
        and not _PUT_RE.search(code(st)) and not _calls_any(st, putters)]
    hands = [i for i, st in enumerate(body) if mentions_id(st) and (
        _PUT_RE.search(code(st)) or _calls_any(st, putters))]
    for r in regs:
        later = [h for h in hands if h > r]
        if later:
            return r, later[-1]
    return None


def find_register_after_handoff(module: cst.Module) -> Iterator[Ctx]:
    """A method that registers request ids and later hands ids to background
    work (vllm-ascend 0.23.0's Mooncake ``start_load_kv``)."""
    for c in walk(module):
        if isinstance(c.node, cst.FunctionDef) and c.cls is not None and \
                _register_then_handoff(c.node, module) is not None:
            yield c


def rewrite_register_after_handoff(node: cst.CSTNode, ctx: Ctx, module: cst.Module):
    """The registration moves after the last hand-off (vllm-ascend 0.18.0's
    order)."""
    assert isinstance(node, cst.FunctionDef)
    found = _register_then_handoff(node, module)
    assert found is not None
    r, h = found
    body = _stmts(node.body)
    moved = [*body[:r], *body[r + 1:h + 1], body[r], *body[h + 1:]]
    return node.with_changes(body=cst.IndentedBlock(body=moved))


# -- a remote-load trigger left set ----------------------------------------------

_TRIGGER_RE = re.compile(r"\b(\w+)\s*=\s*[\w.]*\.kv_transfer_params\b")


def find_drop_trigger_consume(module: cst.Module) -> Iterator[Ctx]:
    """``params["do_remote_prefill"] = False`` (a string key of the request's
    ``kv_transfer_params``, or a local bound to it, set to False/None), or
    ``request.kv_transfer_params = None``: the line that marks a remote load
    consumed."""
    for c in walk(module):
        if not (isinstance(c.node, cst.SimpleStatementLine) and c.func is not None):
            continue
        small = _single(c.node)
        if not isinstance(small, cst.Assign) or len(small.targets) != 1 or \
                code(small.value) not in ("False", "None"):
            continue
        target = small.targets[0].target
        if isinstance(target, cst.Attribute) and target.attr.value == "kv_transfer_params":
            yield c
        elif isinstance(target, cst.Subscript) and isinstance(
                target.slice[0].slice, cst.Index) and isinstance(
                target.slice[0].slice.value, cst.SimpleString):
            base = code(target.value)
            if base.endswith(".kv_transfer_params") or base in _trigger_locals(c.func):
                yield c


def _trigger_locals(func: cst.FunctionDef) -> set[str]:
    """Locals ``func`` binds to a request's ``kv_transfer_params``."""
    return _memo("trigger-locals", func, lambda: set(_TRIGGER_RE.findall(code(func))))


# -- a notice one arm no longer sends ------------------------------------------------

_NOTICE_RE = re.compile(r"\.(send_notif|send_multipart|send_pyobj|send_json|send_string|"
                        r"_?notify\w*|_?send_\w*notif\w*)\(")


def find_silence_notice(module: cst.Module) -> Iterator[Ctx]:
    """An arm (the indented block) of an ``if``/``else`` whose two arms both
    send a peer its notice (``send_notif``, ``send_multipart``,
    ``_notify_pull_done``...), when the arm also logs: it is rewritten to
    only log, as a full-prefix-hit arm that forgets the producer does."""
    picked: set[int] = set()  # the arms chosen (an ``if`` comes before its arms)
    for c in walk(module):
        if id(c.node) in picked:
            yield c
            continue
        if not (isinstance(c.node, cst.If) and c.func is not None) or \
                not isinstance(c.node.orelse, cst.Else):
            continue
        blocks = (c.node.body, c.node.orelse.body)
        if not all(any(_NOTICE_RE.search(code(st)) for st in _stmts(b)) for b in blocks):
            continue
        picked.update(id(b) for b in blocks if isinstance(b, cst.IndentedBlock)
                      and any(_log_line(st) for st in b.body))


def _log_line(st: cst.CSTNode) -> bool:
    small = _single(st)
    return isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and \
        _is_log_call(small.value)


def rewrite_silence_notice(node: cst.CSTNode, ctx: Ctx, module: cst.Module):
    """The arm keeps only its logging lines."""
    assert isinstance(node, cst.IndentedBlock)
    return node.with_changes(body=[st for st in node.body if _log_line(st)])


# -- a transfer's outcome read unguarded ----------------------------------------------


def find_unguard_result(module: cst.Module) -> Iterator[Ctx]:
    """A ``try`` in a report method whose body reads a future's ``.result(``
    and whose handlers catch it: the read then raises out of the hook."""
    for c in walk(module):
        if isinstance(c.node, cst.Try) and c.func is not None and c.node.handlers and \
                not c.node.finalbody and ".result(" in code(c.node.body) and \
                _report_func(c, module) is not None:
            yield c


def rewrite_unguard_result(node: cst.CSTNode, ctx: Ctx, module: cst.Module):
    """The ``try`` becomes its body (no handler, no ``else``)."""
    assert isinstance(node, cst.Try)
    body = _stmts(node.body)
    if node.orelse is not None:
        body += _stmts(node.orelse.body)
    first = body[0].with_changes(leading_lines=node.leading_lines)
    return cst.FlattenSentinel([first, *body[1:]])


def _entry_loop(ctx: Ctx) -> tuple[str, str] | None:
    """``(container, key)`` when ``ctx.node`` is a ``for`` over the entry an
    enclosing ``for key, value in container.items()`` took (``value`` or
    ``container[key]``), in a method, and the outer loop removes ``key`` from
    ``container`` after it (``del container[key]`` or ``container.pop(key``)."""
    node = ctx.node
    if not isinstance(node, cst.For) or ctx.func is None:
        return None
    for outer in reversed(ctx.parents):
        if isinstance(outer, cst.FunctionDef):
            return None
        if not isinstance(outer, cst.For) or not isinstance(outer.target, cst.Tuple):
            continue
        names = [e.value.value for e in outer.target.elements if isinstance(e.value, cst.Name)]
        it = code(outer.iter)
        if len(names) != 2 or ".items()" not in it:
            continue
        container = it.removeprefix("list(").split(".items()")[0]
        key, value = names
        if code(node.iter) not in (value, f"{container}[{key}]"):
            return None
        rest = code(outer.body)[code(outer.body).find(code(node)) + len(code(node)):]
        if f"del {container}[{key}]" in rest or f"{container}.pop({key}" in rest:
            return container, key
        return None
    return None


def find_remove_in_parts_loop(module: cst.Module) -> Iterator[Ctx]:
    """A loop over a request's parts, whose entry the enclosing loop removes
    after it (vLLM 0.9.2's NIXL ``_pop_done_transfers``)."""
    for c in walk(module):
        if _entry_loop(c) is not None:
            yield c


def rewrite_remove_in_parts_loop(node: cst.CSTNode, ctx: Ctx, module: cst.Module):
    """The entry is removed at the end of the loop over its parts too, at the
    first part (vLLM 0.9.1's shape)."""
    assert isinstance(node, cst.For)
    found = _entry_loop(ctx)
    assert found is not None
    container, key = found
    body = [*_stmts(node.body), _stmt(f"{container}.pop({key}, None)\n")]
    return node.with_changes(body=cst.IndentedBlock(body=body))


OPERATORS: dict[str, Operator] = {op.name: op for op in (
    Operator("drop-report", "an id is not put into its self container", find_drop_report,
             _to_pass),
    Operator("early-return", "return/continue before the id is recorded", find_early_return,
             rewrite_early_return),
    Operator("except-log", "an except handler only logs", find_except_log, rewrite_except_log),
    Operator("finally-out", "the finally body runs only on the normal path", find_finally_out,
             rewrite_finally_out),
    Operator("finally-report-out", "a finally's report runs only on the normal path",
             find_finally_report_out, rewrite_finally_out),
    Operator("drop-timeout", "a wait loses its timeout", find_drop_timeout,
             rewrite_drop_timeout),
    Operator("reset-no-forward", "a reader clears id state first", find_reset_no_forward,
             rewrite_reset_no_forward),
    Operator("request-finished-true", "request_finished delays freeing, schedules nothing",
             find_request_finished_true, rewrite_request_finished_true),
    Operator("drop-failed-blocks", "failed blocks are not recorded", find_drop_failed_blocks,
             _to_pass),
    Operator("raise-in-thread-loop", "a thread loop body can raise",
             find_raise_in_thread_loop, rewrite_raise_in_thread_loop),
    Operator("probe-acquire", "the probe records the request", find_probe_acquire,
             rewrite_probe_acquire),
    Operator("drop-return-report", "a report function forgets an id",
             find_drop_return_report, _to_pass),
    Operator("drop-remove", "an id is never removed from its self container",
             find_drop_remove, _to_pass),
    Operator("drop-lock", "request state changes without the lock guarding it",
             find_drop_lock, rewrite_drop_lock),
    Operator("unreleased-failure", "one failure exit loses the release the others run",
             find_unreleased_failure, _to_pass),
    Operator("drop-socket-timeout", "a socket loses its receive timeout",
             find_drop_socket_timeout, _to_pass),
    Operator("unchecked-callback", "a done-callback no longer asks its future how it ended",
             find_unchecked_callback, _to_pass),
    Operator("silent-load-errors", "the failed-blocks hook reports nothing",
             find_silent_load_errors, rewrite_silent_load_errors),
    Operator("finish-no-forward", "request_finished ends a request, telling the workers nothing",
             find_finish_no_forward, _to_pass),
    Operator("pop-to-del", "a tolerant pop(k, None) becomes del c[k]", find_pop_to_del,
             rewrite_pop_to_del),
    Operator("shutdown-no-close", "the shutdown hook forgets to close one object",
             find_shutdown_no_close, _to_pass),
    Operator("drop-reply", "a REP serving loop forgets one of its replies", find_drop_reply,
             _to_pass),
    Operator("drop-peer-lookup", "an id off a peer's message is no longer looked up",
             find_drop_peer_lookup, _to_pass),
    Operator("handler-falls-through", "a handler no longer leaves, and goes on into a name "
             "its try never bound", find_handler_falls_through, _to_pass),
    Operator("drop-trigger-consume", "the commit hook no longer marks the remote load "
             "consumed", find_drop_trigger_consume, _to_pass),
    Operator("silence-notice", "an arm that sends the peer its notice only logs",
             find_silence_notice, rewrite_silence_notice),
    Operator("unguard-result", "a future's result() is read with nothing catching it",
             find_unguard_result, rewrite_unguard_result),
    Operator("remove-in-parts-loop", "an entry of several parts is removed in the loop over "
             "them, at the first part", find_remove_in_parts_loop,
             rewrite_remove_in_parts_loop),
    Operator("drop-none-test", "a read through a field no longer tests it for None first",
             find_drop_none_test, rewrite_drop_none_test),
    Operator("ignore-count", "the commit hook takes every call as the load it was chosen "
             "for (its count of external tokens read as 1)", find_ignore_count,
             rewrite_ignore_count),
    Operator("register-after-handoff", "ids are registered only after they are handed to "
             "background work", find_register_after_handoff, rewrite_register_after_handoff),
    Operator("drop-count-move", "a per-request count is no longer moved (its increment or "
             "decrement dropped)", find_drop_count_move, _to_pass),
)}


# -- sites and mutation -------------------------------------------------------

@dataclass(frozen=True)
class Site:
    """One place an operator can mutate, stable for the same text."""

    operator: str
    file: str  # path relative to the import root
    line: int
    ordinal: int  # index among the operator's candidates in the file
    function: str  # fully qualified name of the innermost enclosing def
    enclosing: tuple[str, ...]  # qualified names of every enclosing def, outermost first
    snippet: str


def _candidates(op: Operator, module: cst.Module) -> list[Ctx]:
    return list(op.find(module))


def _qualname(module: str, scope: tuple[str, ...]) -> str:
    return ".".join([module, *scope]) if module else ".".join(scope)


def _enclosing(module: str, c: Ctx) -> tuple[str, ...]:
    """Qualified names of the defs enclosing ``c`` (the def itself for a def site)."""
    out: list[str] = []
    parts: list[str] = []
    for p in (*c.parents, c.node):
        if isinstance(p, (cst.ClassDef, cst.FunctionDef)):
            parts.append(p.name.value)
            if isinstance(p, cst.FunctionDef):
                out.append(_qualname(module, tuple(parts)))
    return tuple(out)


def find_sites(ops: Iterable[str], text: str, file: str, module: str) -> dict[str, list[Site]]:
    """Every site of each operator in one file (parsed once), in walk order."""
    tree = cst.parse_module(text)
    pos = MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)
    return {op: _sites(op, tree, pos, file, module) for op in ops}


def _sites(op_name: str, tree: cst.Module, pos, file: str, module: str) -> list[Site]:
    sites: list[Site] = []
    for i, c in enumerate(_candidates(OPERATORS[op_name], tree)):
        encl = _enclosing(module, c)
        if not encl:
            continue
        first = code(c.node).strip().splitlines()
        sites.append(Site(op_name, file, pos[c.node].start.line, i, encl[-1], encl,
                          first[0][:100] if first else ""))
    return sites


class _Replace(cst.CSTTransformer):
    def __init__(self, target: cst.CSTNode, new: Callable[[cst.CSTNode], object]) -> None:
        super().__init__()
        self.target, self.new, self.done = target, new, False

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        if original_node is self.target:
            self.done = True
            return self.new(updated_node)
        return updated_node


def mutate(text: str, site: Site) -> str:
    """The text with ``site`` mutated by its operator (LibCST re-finds the site)."""
    op = OPERATORS[site.operator]
    module = cst.parse_module(text)
    ctx = _candidates(op, module)[site.ordinal]
    tr = _Replace(ctx.node, lambda updated: op.rewrite(updated, ctx, module))
    out = module.visit(tr)
    if not tr.done:
        raise ValueError(f"site not found: {site}")
    return out.code
