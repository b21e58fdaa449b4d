"""Hooks the analysed vLLM may call while no step metadata is bound, and the
reads of the bound metadata they reach without testing it first.

A worker hook reads the step's metadata with ``self._get_connector_metadata()``,
which asserts that ``bind_connector_metadata`` ran. vLLM binds it around the
model's forward pass, but up to 0.12 the attention layers called
``save_kv_layer`` and ``wait_for_layer_load`` testing only the attention
metadata: a speculative-decoding drafter runs its layers after the metadata
is cleared, and a connector that reads it there raises inside the forward
pass (LMCache 0.3.5's ``save_kv_layer``, uc-manager 0.4.0's layer-wise
connector; vLLM 0.13 added a ``has_connector_metadata()`` test to the caller).

By structure, per analysed vLLM: a hook call in one of the protocol's entry
points is *unbound* when that function neither binds the metadata (calls the
binder) nor tests it (calls or tests a guard) before the call, and its class,
if it has one, binds it nowhere. From every connector class's implementation
of such a hook, calls are followed (call and dispatch edges, a few deep) into
the subject; a call of the reader there is reported unless a function on the
way tests a guard (``if not self.has_connector_metadata(): return``,
``if self._connector_metadata is None``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kvflowmap.lifecycle.view import FnView, mentions

_DEPTH = 4


@dataclass(frozen=True)
class UnboundCall:
    """vLLM's ``caller`` calls ``hook`` at ``line`` with no metadata bound
    or tested first."""

    hook: str
    caller: str
    line: int


@dataclass(frozen=True)
class UnguardedRead:
    """``fqn`` reads the bound metadata at ``line``, reached from ``hook``
    (the connector's implementation) through ``chain``, none of which tests
    it first; ``call`` is how vLLM gets there unbound."""

    fqn: str
    line: int
    hook: str
    chain: tuple[str, ...]
    call: UnboundCall


def unbound_calls(views: Iterable[FnView], hooks: Iterable[str], binder: str,
                  guards: tuple[str, ...], binds_in_class: Callable[[str], bool]
                  ) -> dict[str, UnboundCall]:
    """Per hook name, the first call of it in ``views`` (vLLM's entry
    points) made with no metadata bound: the function calls neither
    ``binder`` nor a guard before it, tests no guard before it, and its
    class (``binds_in_class``) binds nowhere."""
    wanted = set(hooks) - {binder}
    out: dict[str, UnboundCall] = {}
    for fn in sorted(views, key=lambda v: v.fqn):
        if fn.cls is not None and binds_in_class(fn.cls):
            continue
        for c in sorted(fn.all_calls, key=lambda c: (c.line, c.col)):
            base, _, meth = (c.callee or "").rpartition(".")
            if meth not in wanted or not base or base == "self" or meth in out:
                continue
            if not _guarded(fn, (binder, *guards), guards, c.line):
                out[meth] = UnboundCall(meth, fn.fqn, c.line)
    return out


def _guarded(fn: FnView, calls: tuple[str, ...], guards: tuple[str, ...],
             line: int | None = None) -> bool:
    """``fn`` calls one of ``calls`` or tests a guard in an ``if``/``while``
    (before ``line``, when given)."""
    def before(at: int) -> bool:
        return line is None or at <= line

    if any(before(c.line) and (c.callee or "").rpartition(".")[2] in calls
           for c in fn.all_calls):
        return True
    dotted = tuple(f".{g}" for g in guards)
    return any(s.kind in ("if", "while") and before(s.line) and mentions(s.text, dotted)
               for s in fn.stmts)


def binds(fn: FnView, binder: str) -> bool:
    """``fn`` calls the binder on some object (vLLM binding a connector)."""
    return any((c.callee or "").rpartition(".")[2] == binder and "." in (c.callee or "")
               for c in fn.all_calls)


def unguarded_reads(starts: dict[str, UnboundCall], callees: Callable[[str], list[str]],
                    fn_of: Callable[[str], FnView | None], is_subject: Callable[[str], bool],
                    reader: str, guards: tuple[str, ...]) -> list[UnguardedRead]:
    """The reader's calls in the subject reached from ``starts`` (hook
    implementations, each with the unbound call of its hook) through
    ``callees``, ``_DEPTH`` deep, where no function on the way tests a guard."""
    out: dict[tuple[str, int], UnguardedRead] = {}
    for start in sorted(starts):
        call = starts[start]
        parent: dict[str, str | None] = {start: None}
        queue = deque([(start, 0)])
        while queue:
            f, depth = queue.popleft()
            fn = fn_of(f)
            if fn is None or _guarded(fn, guards, guards):
                continue  # the metadata is tested on the way: a decision
            if is_subject(f):
                chain = _chain(parent, f)
                for c in fn.all_calls:
                    seen = out.get((f, c.line))
                    # the shortest way there names the read (its own hook, if it is one)
                    if (c.callee or "").rpartition(".")[2] == reader and \
                            (seen is None or len(chain) < len(seen.chain)):
                        out[(f, c.line)] = UnguardedRead(f, c.line, start, chain, call)
            if depth < _DEPTH:
                for g in callees(f):
                    if g not in parent:
                        parent[g] = f
                        queue.append((g, depth + 1))
    return sorted(out.values(), key=lambda r: (r.fqn, r.line))


def _chain(parent: dict[str, str | None], f: str) -> tuple[str, ...]:
    out = [f]
    cur = parent.get(f)
    while cur is not None:
        out.append(cur)
        cur = parent.get(cur)
    return tuple(reversed(out))
