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

Heuristics (they only choose sites; they do not decide detection):

- A *request id* is an expression whose code contains ``req`` (``req_id``,
  ``request.request_id``, ``reqs``, ``request_id``) or the name ``rid``.
- A *container add* is ``X[id] = v``, ``X[id].append(...)``, ``X.add(id)``,
  ``X.append(id)``, ``X.update(...)`` (and ``extend``, ``put``,
  ``put_nowait``, ``setdefault``, ``appendleft``) whose arguments or key mention
  an id; it is *self-rooted* when ``X``'s code starts with ``self.``.
- A *thread loop* is a ``while`` in a function passed as ``target=`` to a
  ``*Thread``/``Process``, to ``.submit`` or ``run_in_executor``, or named
  like a loop (``THREAD_NAME_RE``).
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
REPORT_FUNCS = ("get_finished", "get_transfer_results")
LOAD_ERRORS = "get_block_ids_with_load_errors"
INIT_METHODS = frozenset({"__init__", "__post_init__", "__new__", "__init_subclass__"})
WAIT_MODULES = frozenset({"asyncio", "concurrent.futures", "futures"})
FAILED_RE = re.compile(r"invalid|failed|error", re.IGNORECASE)
THREAD_NAME_RE = re.compile(r"_loop$|_thread|^run$|^loop$|_worker$")
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
        if isinstance(tgt, cst.Subscript) and mentions_id(tgt.slice[0]):
            return code(tgt.value), "subscript"
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        call = small.value
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in ADD_METHODS:
            recv = call.func.value
            if any(mentions_id(a.value) for a in call.args) or (
                    isinstance(recv, cst.Subscript) and mentions_id(recv.slice[0])):
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
    attribute names, keywords or called names), id-like names first."""
    out: list[str] = []
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
        if n.value not in out:
            out.append(n.value)
    return sorted(out, key=lambda name: not ID_RE.search(name))


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


def find_drop_report(module: cst.Module) -> Iterator[Ctx]:
    """Statements that put an id into a ``self.``-rooted container."""
    for c in walk(module):
        if _in_method(c) and self_container_add(c.node):
            yield c


def find_early_return(module: cst.Module) -> Iterator[Ctx]:
    """The drop-report sites that read a local the guard can test."""
    for c in find_drop_report(module):
        if _local_names(c.node):
            yield c


def rewrite_early_return(node: cst.CSTNode, ctx: Ctx, module: cst.Module):
    """``if not <local>: return|continue`` before the statement."""
    name = _local_names(node)[0]
    exit_ = "continue" if _in_loop(ctx) else "return"
    guard = _stmt(f"if not {name}:\n    {exit_}\n")
    guard = guard.with_changes(leading_lines=getattr(node, "leading_lines", ()))
    return cst.FlattenSentinel([guard, node.with_changes(leading_lines=())])


def _reports(handler: cst.ExceptHandler) -> bool:
    for c in walk(handler.body):
        if container_add(c.node):
            return True
        if isinstance(c.node, cst.Call) and not _is_log_call(c.node):
            return True
    return False


def find_except_log(module: cst.Module) -> Iterator[Ctx]:
    """Except handlers (in functions) that add an id or call something other than logging."""
    for c in walk(module):
        if isinstance(c.node, cst.ExceptHandler) and _in_method(c) and _reports(c.node):
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


def rewrite_except_log(node: cst.CSTNode, ctx: Ctx, module: cst.Module):
    """The handler's body becomes ``logger.warning("mutant")`` (or ``pass``)."""
    src = 'logger.warning("mutant")' if "logger" in _module_names(module) else "pass"
    return node.with_changes(body=cst.IndentedBlock(body=[_stmt(src + "\n")]))


def find_finally_out(module: cst.Module) -> Iterator[Ctx]:
    """``try/finally`` statements whose finally calls something."""
    for c in walk(module):
        n = c.node
        if (isinstance(n, cst.Try) and n.finalbody is not None and _in_method(c)
                and any(isinstance(x.node, cst.Call) for x in walk(n.finalbody))):
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
    """Calls given a timeout (``timeout=``, ``.result(x)``, ``.wait(x)``, ``.join(t)``)."""
    for c in walk(module):
        if isinstance(c.node, cst.Call) and _in_method(c) and _timeout_arg(c.node) is not None:
            yield c


def rewrite_drop_timeout(node: cst.CSTNode, ctx: Ctx, module: cst.Module):
    """The call without its timeout argument."""
    assert isinstance(node, cst.Call)
    i = _timeout_arg(node)
    args = [a for j, a in enumerate(node.args) if j != i]
    if args:
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return node.with_changes(args=args)


# reset-no-forward needs class-level facts: which self.X are filled with ids where.

@dataclass
class _ClassFacts:
    fillers: dict[str, set[str]] = field(default_factory=dict)  # attr -> methods filling it
    how: dict[str, str] = field(default_factory=dict)  # attr -> first way it is filled
    inits: dict[str, str] = field(default_factory=dict)  # attr -> code of its first value
    reads: dict[str, set[str]] = field(default_factory=dict)  # method -> self attrs it uses


def _self_attr(node: cst.CSTNode) -> str | None:
    """``X`` when the node is ``self.X``."""
    if (isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name)
            and node.value.value == "self"):
        return node.attr.value
    return None


def _class_facts(cls: cst.ClassDef, module: cst.Module) -> _ClassFacts:
    """Which ``self.X`` each method of ``cls`` fills with ids, initialises, reads."""
    facts = _ClassFacts()
    for c in walk(module):
        if c.func is None or c.cls is not cls:
            continue
        method = c.funcs[0].name.value
        read = _self_attr(c.node)
        if read:
            facts.reads.setdefault(method, set()).add(read)
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


def _reset_target(func: cst.FunctionDef, cls: cst.ClassDef, module: cst.Module) -> str | None:
    """The first (sorted) id-filled ``self.X`` that ``func`` reads but does not fill."""
    if func.name.value in INIT_METHODS:
        return None
    facts = _facts_of(cls, module)
    reads = facts.reads.get(func.name.value, set())
    for attr in sorted(facts.fillers):
        if func.name.value not in facts.fillers[attr] and attr in reads:
            return attr
    return None


def find_reset_no_forward(module: cst.Module) -> Iterator[Ctx]:
    """Methods reading a ``self.X`` that another method fills with ids."""
    for c in walk(module):
        n = c.node
        if (isinstance(n, cst.FunctionDef) and len(c.funcs) == 0 and c.parents
                and isinstance(c.parents[-1], cst.IndentedBlock)
                and len(c.parents) >= 2 and isinstance(c.parents[-2], cst.ClassDef)
                and _reset_target(n, c.parents[-2], module)):
            yield c


_CONTAINER_INIT = re.compile(
    r"(set|dict|list|deque|defaultdict|OrderedDict|Counter)\(|\{|\[|(collections\.)")


def rewrite_reset_no_forward(node: cst.CSTNode, ctx: Ctx, module: cst.Module):
    """``self.X.clear()`` (or a fresh empty container) as the method's first statement."""
    assert isinstance(node, cst.FunctionDef)
    cls = ctx.parents[-2]
    assert isinstance(cls, cst.ClassDef)
    attr = _reset_target(ctx.node, cls, module)  # type: ignore[arg-type]
    facts = _facts_of(cls, module)
    init = facts.inits.get(attr or "", "")
    if _CONTAINER_INIT.match(init):
        src = f"self.{attr}.clear()"
    else:
        empty = {"subscript": "{}", "add": "set()"}.get(facts.how.get(attr or "", ""), "[]")
        src = f"self.{attr} = {empty}"
    return _with_first(node, [_stmt(src + "\n")])


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


def _failed_containers(module: cst.Module) -> set[str]:
    """Codes of the ``self.X`` read by a ``get_block_ids_with_load_errors``."""
    out: set[str] = set()
    for c in walk(module):
        if isinstance(c.node, cst.FunctionDef) and c.node.name.value == LOAD_ERRORS:
            for x in walk(c.node.body):
                if isinstance(x.node, cst.Attribute) and re.fullmatch(r"self\.\w+", code(x.node)):
                    out.add(code(x.node))
    return out


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
    """Adds to the load-error container, or to any container named invalid/failed/error."""
    returned = _failed_containers(module)
    for c in walk(module):
        if c.func is None or c.func.name.value == LOAD_ERRORS:
            continue
        target = _adds_to(c.node)
        if target and (target in returned or FAILED_RE.search(target.rsplit(".", 1)[-1])):
            yield c


def _thread_targets(module: cst.Module) -> set[str]:
    """Function names handed to a thread or an executor in this module."""
    out: set[str] = set()
    for c in walk(module):
        n = c.node
        if not isinstance(n, cst.Call):
            continue
        fname = code(n.func).rsplit(".", 1)[-1]
        picked: list[cst.BaseExpression] = []
        if fname.endswith("Thread") or fname == "Process":
            picked = [a.value for a in n.args if a.keyword and a.keyword.value == "target"]
        elif fname == "submit" and n.args:
            picked = [n.args[0].value]
        elif fname == "run_in_executor" and len(n.args) >= 2:
            picked = [n.args[1].value]
        out.update(code(p).rsplit(".", 1)[-1] for p in picked)
    return out


def find_raise_in_thread_loop(module: cst.Module) -> Iterator[Ctx]:
    """``while`` loops in thread targets or functions named like a loop."""
    targets = _thread_targets(module)
    for c in walk(module):
        if (isinstance(c.node, cst.While) and c.func is not None
                and isinstance(c.node.body, cst.IndentedBlock)):
            name = c.func.name.value
            if name in targets or THREAD_NAME_RE.search(name):
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


def find_probe_acquire(module: cst.Module) -> Iterator[Ctx]:
    """Every ``get_num_new_matched_tokens`` with a request parameter."""
    return _methods_named(module, ("get_num_new_matched_tokens",))


def rewrite_probe_acquire(node: cst.CSTNode, ctx: Ctx, module: cst.Module):
    """The probe records the request: ``self._mutant_held.add(request.request_id)``."""
    assert isinstance(node, cst.FunctionDef)
    p = _params(node)[0]
    return _with_first(node, [_stmt(f"self._mutant_held.add({p}.request_id)\n")])


def _returned_names(func: cst.FunctionDef) -> set[str]:
    out: set[str] = set()
    for c in walk(func.body):
        if isinstance(c.node, cst.Return) and c.node.value is not None:
            v = c.node.value
            items = [e.value for e in v.elements] if isinstance(v, cst.Tuple) else [v]
            out.update(i.value for i in items if isinstance(i, cst.Name))
    return out


def _is_report_func(name: str) -> bool:
    return name in REPORT_FUNCS or "finished" in name or "transfer_result" in name


def find_drop_return_report(module: cst.Module) -> Iterator[Ctx]:
    """In report functions, adds to a local the function returns."""
    for c in walk(module):
        func = c.func
        if func is None or not _is_report_func(func.name.value):
            continue
        target = _adds_to(c.node)
        if target and target in _memo("returns", func, lambda: _returned_names(func)):
            yield c


def _removes_id(stmt: cst.CSTNode) -> bool:
    small = _single(stmt)
    if isinstance(small, cst.Del):
        return isinstance(small.target, cst.Subscript) and mentions_id(small.target.slice[0])
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        f = small.value.func
        return (isinstance(f, cst.Attribute) and f.attr.value in REMOVE_METHODS
                and code(f.value).startswith("self.")
                and any(mentions_id(a.value) for a in small.value.args))
    return False


def find_drop_remove(module: cst.Module) -> Iterator[Ctx]:
    """Statements removing an id from a ``self.`` container (``del``, ``.pop``, ``.discard``)."""
    for c in walk(module):
        if _in_method(c) and _removes_id(c.node):
            yield c


OPERATORS: dict[str, Operator] = {op.name: op for op in (
    Operator("drop-report", "an id is not put into its self container", find_drop_report,
             _to_pass),
    Operator("early-return", "return/continue before the id is recorded", find_early_return,
             rewrite_early_return),
    Operator("except-log", "an except handler only logs", find_except_log, rewrite_except_log),
    Operator("finally-out", "the finally body runs only on the normal path", find_finally_out,
             rewrite_finally_out),
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
