"""Return annotations of overrides against the release's base: an override
annotated with a type the release's callers do not take (``get_transfer_results``
returning the ``(sending, recving)`` tuple of ``get_finished``), or with a tuple
of another length. An override without a return annotation is not compared,
nor a base that returns ``None`` (vLLM does not read the value)."""

from __future__ import annotations

import ast

from kvflowmap.check.kinds.conforms_signatures import annotation_heads
from kvflowmap.compat.context import Run
from kvflowmap.compat.findings import Finding
from kvflowmap.compat.model import Method
from kvflowmap.compat.related import Related
from kvflowmap.facts import FunctionFact


def tuple_length(text: str | None) -> int | None:
    """The length of a fixed ``tuple[A, B]`` annotation (None: not one)."""
    if not text:
        return None
    try:
        node = ast.parse(text.strip().strip("\"'"), mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None
    if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
            and node.value.id in ("tuple", "Tuple")):
        return None
    elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    if any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in elts):
        return None
    return len(elts)


def check_return(run: Run, module: str, fn: FunctionFact, base: Method,
                 related: Related) -> list[Finding]:
    """The override's return annotation where the release's base returns another type."""
    if not fn.returns or not base.returns or base.ret_heads is None or \
            set(base.ret_heads) <= {"None"}:
        return []
    names = run.code.names[module]
    mine = annotation_heads(fn.returns, names.annotation)
    issue = None
    if mine is not None and not any(related(x, y) for x in base.ret_heads for y in mine):
        issue = f"returns {fn.returns}; vLLM {run.surface.version}'s base returns {base.returns}"
    else:
        n, m = tuple_length(fn.returns), tuple_length(base.returns)
        if n is not None and m is not None and n != m:
            issue = (f"returns a {n}-tuple ({fn.returns}); vLLM {run.surface.version}'s base "
                     f"returns a {m}-tuple ({base.returns})")
    if issue is None:
        return []
    older = _matching(run, fn)
    if older:
        issue += f" (the annotation of vLLM {', '.join(older)}'s base)"
    return [run.finding("error", "return", f"{fn.name} {issue}", module, fn.line, base.where)]


def _matching(run: Run, fn: FunctionFact) -> list[str]:
    """Other releases whose base returns what the override is annotated with."""
    def norm(t: str | None) -> str:
        return "".join(c for c in (t or "") if c not in "\"' ")
    out: list[str] = []
    for s in run.others:
        for b in run.bases:
            m = next((s.method(k, fn.name) for k in s.mro(b) if s.method(k, fn.name)), None)
            if m is not None and norm(m.returns) == norm(fn.returns):
                out.append(s.version)
                break
    return out
