"""Rule kind ``forbid``: calls (or writes) that must not happen in a context.

Context functions are methods of the target classes named in ``methods``, the
protocol's methods of one ``side`` (e.g. every scheduler-side hook) and the
functions matching ``entry_points``.

- Calls mode (``calls``): call edges of the graph (``call`` and ``dispatch``;
  never bridges, nor callbacks handed to threads unless ``follow_refs``) are
  followed ``depth`` hops through the subject code. A call whose resolved
  external target (or, when unresolved, whose callee text) matches a ``calls``
  glob is a finding unless it is bounded: it passes a keyword of
  ``unless_kwargs`` (``timeout=``); it matches ``positional_timeout`` and has
  a positional argument (``event.wait(5)``; this also spares ``sep.join(xs)``);
  for a ``guarded_by`` glob, the receiver was asked first on the way to the
  call (``if fut.done(): fut.result()``, ``if not fut.done(): return``); or,
  for a ``timeout_setters`` glob, the class of the call gives its sockets a
  timeout (``sock.setsockopt(zmq.RCVTIMEO, ms)``, ``sock.settimeout(s)``).
- Writes mode (``forbid_writes: true``): an attribute or container write on
  ``self.*`` in a context function, in a method it calls on ``self``
  (``self._helper()``), or in the method of the same name it delegates to
  (``self._scheduler.get_num_new_matched_tokens(...)``, a facade's half) is a
  finding unless the attribute matches ``allow_attrs``. With ``released_by``,
  a write is accepted when what the ``released_by`` methods reach (the same
  way) resets the attribute (``self.x = ...``, ``self.x.clear()``: per-step
  state) or, for a keyed write (``self._d[req_id] = ...``, ``.add(req_id)``),
  removes from it (a per-request memo dropped when the request ends).
  ``ignore_removals`` accepts pops, ``del`` and ``discard`` (they release).

Each site is reported once, with the chain from the first context function
(sorted) that reaches it by the fewest hops.
"""

from __future__ import annotations

import ast
import fnmatch
from collections import deque

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.model import Finding, Step
from kvflowmap.facts import CallFact, Stmt

PARAMS: dict[str, tuple[tuple[type, ...], object, str]] = {
    "methods": ((list,), [], "method names of the target classes to start from"),
    "side": ((str,), "", "start from the protocol's methods of this side (scheduler, worker)"),
    "entry_points": ((list,), [], "FQN globs of functions to start from"),
    "calls": ((list,), [], "FQN globs of forbidden calls (time.sleep, requests.*, *.wait)"),
    "unless_kwargs": ((list,), [], "a call passing one of these keywords is fine (timeout)"),
    "positional_timeout": ((list,), ["*.wait", "*.join", "*.result"],
                           "globs of calls whose positional argument is a timeout"),
    "guarded_by": ((dict,), {"*.result": ["done"], "*.recv*": ["poll"], "*.wait": ["is_set"]},
                   "glob -> methods that, called first on the same receiver, bound the call"),
    "timeout_setters": ((dict,), {"*.recv*": ["setsockopt:RCVTIMEO", "settimeout"]},
                        "glob -> calls ('method' or 'method:ARG') that, made anywhere in the "
                        "class of the call, give its receivers a timeout"),
    "exclude": ((list,), ["os.path.*", "posixpath.*", "<builtin>.*"], "globs never reported"),
    "depth": ((int,), 6, "call hops followed from a context function"),
    "edge_kinds": ((list,), ["call", "dispatch"], "graph edge kinds followed (calls mode)"),
    "follow_refs": ((bool,), False, "follow functions passed as values (thread targets)"),
    "follow_context": ((bool,), False, "follow calls into --context/--release code"),
    "forbid_writes": ((bool,), False, "report writes to self.* instead of calls"),
    "allow_attrs": ((list,), [], "writes mode: attribute globs that may be written"),
    "follow_attrs": ((bool,), False, "writes mode: also follow any call on a self attribute "
                     "(self.pool.touch()), not only self.m() and same-name delegation"),
    "released_by": ((list,), [], "writes mode: methods whose resets (and, for keyed writes, "
                    "removals) make a write acceptable (request_finished, build_connector_meta)"),
    "ignore_removals": ((bool,), False, "writes mode: pops, del and discard are not reported"),
}

Chain = tuple[Step, ...]
REMOVALS = {"delitem", "pop", "popitem", "discard", "remove", "clear", "popleft"}
KEYED = {"setitem", "add", "setdefault"}
EXITS = {"return", "raise", "continue", "break"}


def check(ctx: CheckContext) -> list[Finding]:
    """Forbidden calls (or writes) reachable from the context functions."""
    if ctx.param("forbid_writes", False):
        released = _released(ctx)
        one = lambda start: _writes_from(ctx, start, released)  # noqa: E731
    else:
        one = lambda start: _calls_from(ctx, start)  # noqa: E731
    found: dict[tuple[str, int, int], Finding] = {}
    for f in each_function(ctx, _contexts(ctx), one):
        key = (f.function, f.line, f.column)
        if key not in found or len(f.path) < len(found[key].path):
            found[key] = f
    return sorted(found.values(), key=Finding.sort_key)


def _contexts(ctx: CheckContext, names: set[str] | None = None) -> list[str]:
    if names is None:
        names = set(ctx.param("methods") or [])
        if ctx.param("side"):
            names |= set(ctx.protocol.methods.get(str(ctx.param("side")), ()))
        pats = ctx.param("entry_points") or []
    else:
        pats = []
    out = {f for f in ctx.target_functions if f.rpartition(".")[2] in names}
    out |= {f for f, d in ctx.model.defs.items() if not d.is_class
            and any(fnmatch.fnmatchcase(f, p) for p in pats)}
    return sorted(out)


def _followable(ctx: CheckContext, fqn: str) -> bool:
    d = ctx.model.defs.get(fqn)
    return d is not None and not d.is_class and (
        ctx.is_subject(d.module) or bool(ctx.param("follow_context", False)))


def _short(fqn: str) -> str:
    return ".".join(fqn.split(".")[-2:])


def _start(ctx: CheckContext, start: str) -> dict[str, Chain]:
    return {start: (ctx.step(start, ctx.function(start).line, f"context: {_short(start)}"),)}


# -- calls mode ---------------------------------------------------------------
def _reach(ctx: CheckContext, start: str) -> dict[str, Chain]:
    """Functions reachable from ``start`` by graph edges, with the chain to each."""
    kinds = set(ctx.param("edge_kinds") or ["call", "dispatch"])
    refs, depth = bool(ctx.param("follow_refs", False)), int(ctx.param("depth", 6))
    chains, todo = _start(ctx, start), deque([(start, 0)])
    while todo:
        node, hops = todo.popleft()
        if hops >= depth:
            continue
        edges = sorted(ctx.graph.out_edges(node, data=True), key=lambda e: (e[2]["line"], e[1]))
        for _, target, data in edges:
            if data.get("kind") not in kinds or (data.get("ref") and not refs):
                continue
            if target in chains or not _followable(ctx, target):
                continue
            line = int(data.get("line") or 0)
            step = ctx.step(target, line, f"overrides {_short(node)}") \
                if data["kind"] == "dispatch" else ctx.step(node, line, f"calls {_short(target)}")
            chains[target] = (*chains[node], step)
            todo.append((target, hops + 1))
    return chains


def _calls_from(ctx: CheckContext, start: str) -> list[Finding]:
    out: list[Finding] = []
    for fqn, chain in sorted(_reach(ctx, start).items()):
        for call in ctx.calls_in(fqn):
            hit = _forbidden(ctx, fqn, call)
            if hit is None:
                continue
            name, pat = hit
            shown = f"{call.callee}()" + (f" ({name})" if name != call.callee else "")
            path = (*chain, ctx.step(fqn, call.line, f"calls {shown}"))
            out.append(ctx.finding(fqn, call.line, f"{shown} matches forbidden '{pat}' and is "
                                   f"reachable from {_short(start)}", column=call.col,
                                   path=path, anchor=f"call:{name}:{call.callee}"))
    return out


def _forbidden(ctx: CheckContext, fqn: str, call: CallFact) -> tuple[str, str] | None:
    """(name, pattern) when the call matches a forbidden glob and is not bounded."""
    targets = ctx.resolve_call(fqn, call)
    names = [t.fqn for t in targets if not _followable(ctx, t.fqn)]
    if not targets and call.callee:
        names = [call.callee]
    excluded = ctx.param("exclude", PARAMS["exclude"][1]) or []
    for name in names:
        if any(fnmatch.fnmatchcase(name, p) for p in excluded):
            continue
        pat = next((p for p in ctx.param("calls") or [] if fnmatch.fnmatchcase(name, p)), None)
        if pat is None:
            continue
        return None if _bounded(ctx, fqn, name, call) else (name, pat)
    return None


def _bounded(ctx: CheckContext, fqn: str, name: str, call: CallFact) -> bool:
    if any(k in (ctx.param("unless_kwargs") or []) for k, _ in call.kwargs):
        return True
    timeout_pos = ctx.param("positional_timeout", PARAMS["positional_timeout"][1]) or []
    if call.args and any(fnmatch.fnmatchcase(name, p) for p in timeout_pos):
        return True
    if _configured(ctx, fqn, name):
        return True
    guards = ctx.param("guarded_by", PARAMS["guarded_by"][1]) or {}
    methods = {m for p, ms in guards.items() if fnmatch.fnmatchcase(name, p) for m in ms}
    receiver = (call.callee or "").rpartition(".")[0]
    if not methods or not receiver:
        return False
    fn = ctx.function(fqn)
    return _guarded(fn.body, call.line, _Guard(receiver, methods))


def _configured(ctx: CheckContext, fqn: str, name: str) -> bool:
    """A timeout set on the receivers by a call in the same class (or function)."""
    setters = [m for p, ms in (ctx.param("timeout_setters", PARAMS["timeout_setters"][1])
                               or {}).items() if fnmatch.fnmatchcase(name, p) for m in ms]
    if not setters:
        return False
    fn = ctx.function(fqn)
    scope = fn.class_qualname or fn.qualname
    for c in ctx.facts(fqn).calls:
        if c.callee and (c.scope == scope or c.scope.startswith(scope + ".")):
            for setter in setters:
                meth, _, arg = setter.partition(":")
                if c.callee.rpartition(".")[2] == meth and (
                        not arg or any(arg in (a or "") for a in c.args)):
                    return True
    return False


class _Guard:
    """Tests that prove ``receiver`` is ready: ``r.done()`` (positive) or
    ``not r.done()`` followed by an exit (negative). Other conjuncts may only
    check that a prefix of the receiver exists (``pending is not None``)."""

    def __init__(self, receiver: str, methods: set[str]) -> None:
        self.receiver, self.methods = receiver, methods

    def _is_ask(self, node: ast.expr) -> bool:
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in self.methods and _chain(node.func.value) == self.receiver

    def _exists(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and \
                isinstance(node.ops[0], ast.IsNot):
            node = node.left
        text = _chain(node)
        return bool(text) and (self.receiver == text or self.receiver.startswith(text + "."))

    def test(self, text: str | None, negative: bool) -> bool:
        try:
            node = ast.parse(text or "", mode="eval").body
        except SyntaxError:
            return False
        want = (lambda n: isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not)
                and self._is_ask(n.operand)) if negative else self._is_ask
        if want(node):
            return True
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            return any(want(v) for v in node.values) and all(
                want(v) or self._exists(v) for v in node.values)
        return negative and isinstance(node, ast.BoolOp) and any(want(v) for v in node.values)


def _last_line(stmt: Stmt) -> int:
    kids = (*stmt.body, *stmt.orelse, *stmt.handlers, *stmt.final)
    return max([stmt.line, *(_last_line(k) for k in kids)])


def _guarded(block: tuple[Stmt, ...], line: int, guard: _Guard) -> bool:
    """True when, on the way to ``line`` through ``block``, a guard holds."""
    held = False
    for stmt in block:
        if stmt.line > line:
            break
        if stmt.line < line <= _last_line(stmt) or (stmt.line == line and stmt.body):
            if stmt.kind == "if" and any(b.line <= line for b in stmt.body[:1]) and \
                    line <= max(_last_line(b) for b in stmt.body) and guard.test(stmt.text, False):
                return True
            return held or any(_guarded(sub, line, guard) for sub in
                               (stmt.body, stmt.orelse, stmt.handlers, stmt.final))
        if stmt.kind == "if" and stmt.body and stmt.body[-1].kind in EXITS and \
                guard.test(stmt.text, True):
            held = True
    return held


def _chain(node: ast.expr) -> str | None:
    """``self.socks[i].x`` -> ``self.socks[].x`` (the facts' chain text)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _chain(node.value)
        return None if base is None else f"{base}.{node.attr}"
    if isinstance(node, ast.Subscript):
        base = _chain(node.value)
        return None if base is None else f"{base}[]"
    return None


# -- writes mode --------------------------------------------------------------
def _is_method(ctx: CheckContext, fqn: str) -> bool:
    fn = ctx.function(fqn)
    return bool(fn.params) and fn.class_qualname is not None and not any(
        d.split(".")[-1] == "staticmethod" for d in fn.decorators)


def _self_reach(ctx: CheckContext, start: str) -> dict[str, Chain]:
    """Methods reached from ``start`` by ``self.m()`` calls and same-name
    delegation (``self.half.m()`` from ``m``); any ``self.a.m()`` with ``follow_attrs``."""
    depth, attrs = int(ctx.param("depth", 6)), bool(ctx.param("follow_attrs", False))
    chains, todo = _start(ctx, start), deque([(start, 0)])
    while todo:
        fqn, hops = todo.popleft()
        fn = ctx.function(fqn)
        if hops >= depth or not fn.params:
            continue
        me = fn.params[0].name
        for call in ctx.calls_in(fqn):
            parts = (call.callee or "").split(".")
            if parts[0] != me or len(parts) < 2 or "(" in call.callee or "[" in call.callee:
                continue
            if len(parts) > 2 and parts[-1] != fn.name and not attrs:
                continue
            for t in ctx.resolve_call(fqn, call):
                if t.fqn in chains or not _followable(ctx, t.fqn) or not _is_method(ctx, t.fqn):
                    continue
                chains[t.fqn] = (*chains[fqn], ctx.step(fqn, call.line, f"calls {call.callee}"))
                todo.append((t.fqn, hops + 1))
    return chains


def _writes(ctx: CheckContext, fqn: str) -> list[tuple[str, int, int, str, str | None]]:
    """(target, line, column, op, key) of each write on ``self.*`` in ``fqn``."""
    fn, ff = ctx.function(fqn), ctx.facts(fqn)
    me = f"{fn.params[0].name}."
    out = [(a.target, a.line, a.col, "+=" if a.aug else "=", None) for a in ff.assigns
           if a.scope == fn.qualname and a.target.startswith(me)]
    out += [(c.container, c.line, c.col, c.op, c.key) for c in ff.containers
            if c.scope == fn.qualname and c.container.startswith(me)]
    return sorted(out, key=lambda w: (w[1], w[2]))


def _attr(target: str) -> str:
    """``self._d[].x`` -> ``_d``: the attribute of the instance written."""
    return target.split(".")[1].split("[")[0]


def _released(ctx: CheckContext) -> set[tuple[str, str, str]]:
    """(class, attribute, remove|reset) done in what the ``released_by`` methods reach:
    a removal (pop, del, discard) or a reset (``self.x = ...``, ``self.x.clear()``)."""
    out: set[tuple[str, str, str]] = set()
    for start in _contexts(ctx, set(ctx.param("released_by") or [])):
        for fqn in _self_reach(ctx, start):
            cls = fqn.rpartition(".")[0]
            for target, _, _, op, _ in _writes(ctx, fqn):
                if op == "clear" or (op == "=" and target.count(".") == 1 and "[" not in target):
                    out.add((cls, _attr(target), "reset"))
                elif op in REMOVALS:
                    out.add((cls, _attr(target), "remove"))
    return out


def _writes_from(ctx: CheckContext, start: str,
                 released: set[tuple[str, str, str]]) -> list[Finding]:
    out: list[Finding] = []
    ignore_removals = bool(ctx.param("ignore_removals", False))
    for fqn, chain in sorted(_self_reach(ctx, start).items()):
        cls = fqn.rpartition(".")[0]
        for target, line, col, op, key in _writes(ctx, fqn):
            attr = target.split(".", 1)[1]
            if _allowed(ctx, attr) or (ignore_removals and op in REMOVALS):
                continue
            ok = {"reset", "remove"} if op in KEYED and key else {"reset"}
            if any(a == _attr(target) and how in ok and _related(ctx, cls, k)
                   for k, a, how in released):
                continue
            what = {"=": f"{target} = ...", "+=": f"{target} += ...",
                    "setitem": f"{target}[{key or '...'}] = ...",
                    "delitem": f"del {target}[{key or '...'}]"}.get(op, f"{target}.{op}(...)")
            path = (*chain, ctx.step(fqn, line, f"writes {what}"))
            out.append(ctx.finding(fqn, line, f"the probe {_short(start)} writes {what} in "
                                   f"{_short(fqn)}: not memo state", column=col, path=path,
                                   anchor=f"write:{target}:{op}"))
    return out


def _related(ctx: CheckContext, a: str, b: str) -> bool:
    return a == b or b in ctx.classes.mro(a) or a in ctx.classes.mro(b)


def _allowed(ctx: CheckContext, attr: str) -> bool:
    first = attr.split(".")[0].split("[")[0]
    return any(fnmatch.fnmatchcase(first, p) or fnmatch.fnmatchcase(attr, p)
               for p in ctx.param("allow_attrs") or [])
