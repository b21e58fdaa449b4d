"""Functions whose return value decides a request-state transition.

vLLM's scheduler puts a request into ``WAITING_FOR_REMOTE_KVS`` under a test
of what the connector's probe returned::

    ext_tokens, load_kv_async = self.connector.get_num_new_matched_tokens(...)
    ...
    if load_kv_async:
        request.status = RequestStatus.WAITING_FOR_REMOTE_KVS

The function that decides the transition is the connector's
``get_num_new_matched_tokens`` (and the scheduler half its facade returns
from), not only the scheduler line that writes the status. This pass takes
every state write (``sets_state`` edge), the ``if``/``while`` tests
around it, and each local such a test reads that is bound from a call's result, and follows that local back
through returns (``returnflow.trace_value``: tuple positions, facades,
helpers). Each analysed function found gets a ``produces`` edge to the state
with ``via="return"``, so ``path`` and ``where`` treat it as they treat a
carrier filled from a return value: the step is taken only when the path
reached the function from the code that makes the test.
"""

from __future__ import annotations

import ast

from kvflowmap.facts import FunctionFact, Stmt
from kvflowmap.graph.build import Linker
from kvflowmap.graph.returnflow import Want, trace_value

def add_return_states(lk: Linker) -> None:
    """``produces`` edges (``via="return"``) from the functions whose return
    value a test around a state write reads (see the module docstring)."""
    writes = sorted({(u, v, int(d.get("line") or 0)) for u, v, d in lk.graph.edges(data=True)
                     if d.get("kind") == "sets_state"
                     and lk.graph.nodes[v].get("kind") == "state"})
    found: dict[tuple[str, str], tuple[int, str, int, str]] = {}
    for fn_node, state, line in writes:
        d = lk.model.defs.get(fn_node)
        if d is None or not isinstance(d.fact, FunctionFact):
            continue
        module, scope = d.module, d.fact.qualname
        for test, test_line in _tests_around(d.fact.body, line) or ():
            for local in _bound_from_calls(lk, module, scope, test):
                for fqn, ret_line, _ in trace_value(lk, module, scope, local, Want()):
                    if fqn == fn_node:
                        continue
                    old = found.get((fqn, state))
                    if old is None or _says_no(lk, fqn, old[0]) > _says_no(lk, fqn, ret_line):
                        found[(fqn, state)] = (ret_line, test, test_line, fn_node)
    for (fqn, state), (ret_line, test, test_line, tester) in sorted(found.items()):
        d = lk.model.defs[fqn]
        lk.add_edge(fqn, state, "produces", d.module, ret_line, via="return",
                    test=test, tester=tester, test_line=test_line)


_NO = frozenset({"False", "None", "0"})


def _says_no(lk: Linker, fqn: str, line: int) -> int:
    """How many literal no's (``False``, ``None``, ``0``) the return at
    ``line`` of ``fqn`` hands back: the step cites the return that can make
    the test pass (``return count, True``), not ``return 0, False``."""
    d = lk.model.defs[fqn]
    for r in lk.model.scope_returns(d.module, d.fact.qualname):
        if r.line == line:
            return sum(1 for e in (r.elements or (r.value or "",)) if (e or "").strip() in _NO)
    return 0


def _tests_around(body: tuple[Stmt, ...], line: int) -> list[tuple[str, int]] | None:
    """The tests (text, line) of the ``if``/``while`` statements that
    enclose the statement at ``line``, on either arm; None when ``line`` is
    not in ``body``. Earlier ``if T: return`` tests are left out: every
    failed allocation or skipped request before a write would decide it too,
    and a reader asks for the test that chooses the state."""
    for s in body:
        if s.line == line and s.kind not in ("if", "while", "for", "try", "with"):
            return []
        for part in (s.body, s.orelse, s.final, *(h.body for h in s.handlers)):
            inner = _tests_around(part, line)
            if inner is not None:
                own = [(s.text or "", s.line)] if s.kind in ("if", "while") and s.text else []
                return own + inner
    return None


def _bound_from_calls(lk: Linker, module: str, scope: str, test: str) -> list[str]:
    """The plain names a test reads that the function binds, somewhere, from
    a call's result (``x = f()``, ``a, x = f()``)."""
    try:
        node = ast.parse(test, mode="eval")
    except (SyntaxError, ValueError, RecursionError):
        return []
    names = sorted({n.id for n in ast.walk(node) if isinstance(n, ast.Name)})
    assigns = lk.model.assigns.get((module, scope), {})
    return [n for n in names
            if any((a.origin or a.value or "").endswith("()") for a in assigns.get(n, ())
                   if not a.aug)]
