"""Rule kind ``returns``: literal return shapes a protocol method must never produce.

For each method named in ``methods`` in the target classes, every ``return`` is
looked at: a tuple display (``return 0, True``), a conditional expression of
tuples, a local variable assigned a literal tuple (``result = (0, True)`` ...
``return result``, from the assignment's ``literal`` fact), and a returned
call to an analysed function
(``return self._scheduler.get_num_new_matched_tokens(...)``), which is checked
in that delegate instead, once, whoever delegates to it. A shape matching a
``forbid`` pattern (``*`` matches any element) is a finding at the ``return``
that builds it, with a path from where the value was built. A tuple of the
wrong length, or a literal that is not a tuple, when ``require_tuple_len`` is
set, is a finding there too, except in a delegate: the delegate may have its
own contract (an ``int`` that another caller wraps in a pair), so it is
reported at the ``return`` that hands the delegate's result on as is.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.spec import KindSpec
from kvflowmap.check.model import Finding, Step
from kvflowmap.check.options import option
from kvflowmap.facts import ReturnFact, Stmt
from kvflowmap.model.cfg import build_cfg
from kvflowmap.model.annotations import dotted_name

READS = ("Reads: the return statements of the method in the target classes, the "
         "literal values of the local variables they return, and the return statements of "
         "analysed functions whose result they return (through resolved calls).")


@dataclass(frozen=True)
class Options:
    """Parameters of the ``returns`` kind."""

    methods: tuple[str, ...] = option(("get_num_new_matched_tokens",),
                                      "method names of the target classes")
    forbid: tuple[tuple[Any, ...], ...] = option((), "forbidden tuples, each a list of literal "
                                                  "texts ('*' = any), e.g. [['0', 'True']]")
    require_tuple_len: int | None = option(None, "every literal return must be a tuple of "
                                           "this length")
    follow_delegates: bool = option(True, "check analysed functions whose result is returned")
    depth: int = option(4, "how many delegations deep to follow")


Shape = tuple[tuple[str, ...] | str, tuple[Step, ...]]  # tuple elements or a literal


Site = tuple[str, ReturnFact]  # the root's ``return <delegate call>``


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """Findings for forbidden literal return shapes of the ``methods``."""
    roots = sorted({f for m in opts.methods for f in ctx.methods_named(m)})
    seen: set[str] = set(roots)
    found = each_function(ctx, roots, lambda f: _check_function(ctx, opts, f, (), seen, None))
    unique = {(f.file, f.line, f.anchor.partition(":")[0]) if f.anchor.startswith("via")
              else (f.file, f.line, f.anchor): f for f in reversed(found)}
    return sorted(unique.values(), key=Finding.sort_key)


def _check_function(ctx: CheckContext, opts: Options, fqn: str, prefix: tuple[Step, ...],
                    seen: set[str],
                    site: Site | None) -> list[Finding]:
    """Shapes returned by ``fqn``; delegates are followed once. A length
    mismatch in a delegate is the delegating caller's (``site``): the delegate
    may have its own contract (an int) that another caller wraps in a pair."""
    fn, ff = ctx.function(fqn), ctx.facts(fqn)
    out: list[Finding] = []
    for r in (r for r in ff.returns if r.scope == fn.qualname):
        node = _parse(r.value or "None")
        ret = ctx.step(fqn, r.line, f"returns {r.value or 'None'}")
        for shape, built in _shapes(ctx, fqn, node, 0):
            out += _judge(ctx, opts, fqn, r, shape, (*prefix, *built, ret), site)
        if isinstance(node, ast.Call) and opts.follow_delegates and len(prefix) < opts.depth:
            for target in _delegates(ctx, fqn, r, node):
                if target in seen:
                    continue  # a target method itself, or already checked
                seen.add(target)
                step = ctx.step(fqn, r.line, f"returns the result of {target}")
                out += _check_function(ctx, opts, target, (*prefix, step), seen, site or (fqn, r))
    if opts.require_tuple_len is not None and falls_through(fn.body):
        # the end of the body is reachable: the call returns None
        end = ReturnFact(fn.qualname, None, None, fn.end_line, 0)
        out += _judge(ctx, opts, fqn, end, "None",
                      (*prefix, ctx.step(fqn, fn.end_line, "reaches the end: returns None")),
                      site)
    return out


def falls_through(body: tuple[Stmt, ...]) -> bool:
    """The end of ``body`` can be reached (it does not always return or
    raise): its control-flow graph has an edge that falls into the exit (a
    missing ``else``, a handler that carries on, a loop that can end, a stub)."""
    cfg = build_cfg(body)
    return any(d == cfg.exit and label == "end" for _, d, label in cfg.edges())


def _parse(text: str) -> ast.expr | None:
    try:
        return ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None


def _shapes(ctx: CheckContext, fqn: str, node: ast.expr | None, depth: int) -> list[Shape]:
    """Literal shapes an expression may evaluate to, with where they were built."""
    if node is None or depth > 3:
        return []
    if isinstance(node, ast.Tuple):
        return [(tuple(_text(e) for e in node.elts), ())]
    if isinstance(node, ast.Constant):
        return [(_text(node), ())]
    if isinstance(node, ast.IfExp):
        return _shapes(ctx, fqn, node.body, depth + 1) + _shapes(ctx, fqn, node.orelse, depth + 1)
    if isinstance(node, ast.Name):
        return _variable(ctx, fqn, node.id, depth)
    return []


def _variable(ctx: CheckContext, fqn: str, name: str, depth: int) -> list[Shape]:
    """Shapes of a local variable from its literal assignments in the function."""
    d = ctx.definition(fqn)
    out: list[Shape] = []
    for a in ctx.model.assigns.get((d.module, d.fact.qualname), {}).get(name, ()):
        if a.aug or a.value is not None or a.literal is None:
            continue  # a chain (name, call) or no literal display
        for shape, built in _shapes(ctx, fqn, _parse(a.literal), depth + 1):
            text = ", ".join(shape) if isinstance(shape, tuple) else shape
            out.append((shape, (*built, ctx.step(fqn, a.line, f"{name} = ({text})"))))
    return out


def _text(node: ast.expr) -> str:
    return ast.unparse(node)


def _delegates(ctx: CheckContext, fqn: str, r: ReturnFact, node: ast.Call) -> list[str]:
    """Analysed subject functions a returned call resolves to."""
    callee = dotted_name(node.func, calls=True)  # callee texts compare with '()' dropped
    out: list[str] = []
    for call in ctx.calls_in(fqn):
        if call.line < r.line or call.callee is None or call.callee.replace("()", "") != callee:
            continue
        for t in ctx.resolve_call(fqn, call):
            d = ctx.model.defs.get(t.fqn)
            if not t.external and d is not None and not d.is_class and ctx.is_subject(d.module):
                out.append(t.fqn)
        break
    return sorted(set(out))


def _norm(x: object) -> str:
    """A pattern element from YAML (``0``, ``true``, ``"0"``) as Python source text."""
    if isinstance(x, bool) or x is None:
        return repr(x)
    return str(x).strip()


def _judge(ctx: CheckContext, opts: Options, fqn: str, r: ReturnFact,
           shape: tuple[str, ...] | str,
           path: tuple[Step, ...], site: Site | None) -> list[Finding]:
    method = fqn.rpartition(".")[2]
    shown = f"({', '.join(shape)})" if isinstance(shape, tuple) else shape
    out: list[Finding] = []
    want = opts.require_tuple_len
    if want is not None and (not isinstance(shape, tuple) or len(shape) != int(want)):
        if site is None:
            out.append(ctx.finding(fqn, r.line, f"{method} returns {shown}; callers unpack a "
                                   f"tuple of {want}", column=r.col, path=path,
                                   anchor=f"len:{shown}"))
        else:
            root, rr = site
            out.append(ctx.finding(root, rr.line, f"{method} returns the result of "
                                   f"{_short(fqn)} as is, which can be {shown}; callers unpack "
                                   f"a tuple of {want}", column=rr.col, path=path,
                                   anchor=f"via:{_short(fqn)}"))
    for pat in opts.forbid:
        pat = tuple(_norm(p) for p in pat)
        if isinstance(shape, tuple) and len(pat) == len(shape) and all(
                p == "*" or p.replace(" ", "") == s.replace(" ", "") for p, s in zip(pat, shape, strict=True)):
            out.append(ctx.finding(fqn, r.line, f"{method} returns {shown}, a forbidden shape "
                                   f"({', '.join(pat)})", column=r.col, path=path,
                                   anchor=f"forbid:{shown}"))
    return out


def _short(fqn: str) -> str:
    return ".".join(fqn.split(".")[-2:])


SPEC = KindSpec(Options, check, READS)
