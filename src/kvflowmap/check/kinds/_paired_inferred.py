"""Acquisitions that ``paired`` infers from a function's own releases.

With ``infer_from_release``, no acquire name is needed: a function that
releases something on one path shows that it owns it, so it owes the same
release on every other path (the mistake a release moved out of a
``finally``, or an early ``return`` before it, makes). What is held, and
from where:

- a local bound to a call's result that a release consumes
  (``sock = ctx.socket(); ...; sock.close()``): from the binding;
- a call matching ``acquire`` whose receiver (or what it names) a release of
  the same function also names (``self._acquire_step()`` ...
  ``self._release_step()``, ``self._lock.acquire()`` ... ``.release()``).

A local bound from what the function pops out of ``self`` state (``lease =
self._leases.pop(rid)``) was stored for the request by an earlier hook: it is
*held on entry*, and its raising exits count whatever the rule's failure
options (``Resource.held_on_entry``). One only looked up there (``task =
self._tasks.get(tid)``) stays the container's: releasing it on one path is no
sign the function owns it.

A parameter a function run in the background releases (a thread or executor
target given a file descriptor or a lock) was handed over by the spawner, who
is not there to clean up: held on entry, every exit owes its release. Other
parameters a release consumes and ``self`` container entries removed again
under the same key were tried too and left out: on the five code bases of
the mutation bench they were mostly counts (``sem.release(n)``), objects the
caller still owns (released on a failure branch only, kept on success) and
reference counters decremented on one branch.

An acquire-named call whose release lives in another method is not inferred:
that is the cross-hook lifecycle of the ``reach`` kind and the lifecycle
rules, and a function that never releases shows no ownership.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from kvflowmap.check.kinds._paired_alias import NOT_HANDLES, aliases, call_resource
from kvflowmap.check.kinds._paired_match import call_matches
from kvflowmap.check.kinds._paired_model import Resource
from kvflowmap.check.kinds._paired_raised import released_on_failure
from kvflowmap.facts import Stmt

if TYPE_CHECKING:
    from kvflowmap.check.kinds._paired_sites import FunctionSites

_COMPUTED = frozenset({"len", "sorted", "list", "tuple", "set", "dict", "frozenset", "int",
                       "str", "float", "bool", "min", "max", "sum", "range", "getattr",
                       "enumerate", "zip", "reversed", "iter", "next", "id", "hash", "abs"})
# ``self._leases.pop()``, ``self._q.popleft()``: taken out of state (a ``get`` leaves it there)
_FROM_STATE = re.compile(r"^self(\.\w+)+\.(pop|popleft|popitem|get_nowait)\(\)$")
# ``self._tasks.get(tid)``: a look at state, which keeps owning what it holds
_READ_OF_STATE = re.compile(r"^self(\.\w+)+\.get\(\)$")
_CHAIN = re.compile(r"^[A-Za-z_][\w.]*$")


def inferred_acquires(sites: FunctionSites) -> list[Resource]:
    """The acquisitions of one function that its own releases imply, one per
    (CFG node, event), ordered as the CFG lists them."""
    receivers, names = _released(sites)
    out: list[Resource] = []
    if not (receivers or names):
        return released_on_failure(sites, out)
    tests = _enclosing_tests(sites.fn.body, frozenset())
    for node in sites.cfg.nodes:
        s = node.stmt
        if node.kind != "stmt" or s is None or s.kind == "with":
            continue
        calls = sites.events(s, "call")
        for i in calls:
            call = sites.ff.calls[i]
            if not _acquire_named(sites, i):
                continue
            r = call_resource(sites, node.id, s, call)
            receiver = (call.callee or "").rpartition(".")[0]
            if receiver in receivers:
                # Paired by the receiver (``self._acquire_step()`` ...
                # ``self._release_step()``): known by it, not by the arguments
                # (a timeout, a count); ``self`` itself names nothing.
                handles = frozenset() if receiver == "self" else frozenset({receiver})
                out.append(replace(r, key=None, handles=handles, held_if=tests[id(s)]))
            elif r.handles & names:
                out.append(replace(r, held_if=tests[id(s)]))
        if calls and s.kind == "simple":
            for i in sites.events(s, "assign"):
                a = sites.ff.assigns[i]
                if a.target in names and "." not in a.target \
                        and (a.value or "").endswith(")") \
                        and not _READ_OF_STATE.match(a.value or "") \
                        and not any(_acquire_named(sites, j) for j in calls):
                    out.append(Resource(node.id, "call", a.value or "?", None,
                                        aliases(sites, frozenset({a.target})), a.line, a.col,
                                        held_if=tests[id(s)],
                                        held_on_entry=bool(_FROM_STATE.match(a.value or ""))))
    out += _given_to_background(sites, names)
    return out + released_on_failure(sites, out)


def _given_to_background(sites: FunctionSites, names: set[str]) -> list[Resource]:
    """Parameters a function run in the background (a thread, executor task
    or callback the subject starts) releases: the spawner handed them over
    (``pool.submit(self._write, tensors, lock_fd)`` ... ``os.close(lock_fd)``)
    and is not there to clean up, so every exit owes the release, raising
    ones included (``held_on_entry``)."""
    if sites.fqn not in sites.ctx.lifecycle().background():
        return []
    cfg = sites.cfg
    params = [p for p in sites.fn.params if p.name in names and p.name not in ("self", "cls")]
    return [Resource(cfg.entry, "call", p.name, None, aliases(sites, frozenset({p.name})),
                     sites.fn.line, 0, held_on_entry=True) for p in params]


def _acquire_named(sites: FunctionSites, index: int) -> bool:
    call = sites.ff.calls[index]
    fqns = [f for f, _ in sites.targets(index)]
    return not call_matches(sites.spec.exclude, call.callee, fqns) and \
        call_matches(sites.spec.acquire, call.callee, fqns)


def _released(sites: FunctionSites) -> tuple[set[str], set[str]]:
    """(receivers, local names) the function's release calls name: the
    receiver chain of an argument-less ``x.close()`` / ``self._release_step()``
    and the first argument of a release that is not a method of a local or a
    ``self`` attribute (``os.close(fd)``, ``self._unpin(handle)``). Releases
    in an ``except`` handler only do not count: what a function frees when
    something failed and hands on when it worked (``coro.close()`` after a
    failed ``run_coroutine_threadsafe``) is not its own to keep."""
    receivers: set[str] = set()
    names: set[str] = set()
    for s in _outside_handlers(sites.fn.body):
        for i in sites.events(s, "call"):
            call = sites.ff.calls[i]
            fqns = [f for f, _ in sites.targets(i)]
            if call_matches(sites.spec.exclude, call.callee, fqns) or \
                    not call_matches(sites.spec.release, call.callee, fqns):
                continue
            receiver = (call.callee or "").rpartition(".")[0]
            if receiver and "(" not in receiver and not call.args:
                # ``sock.close()``, ``lock.release()``: the receiver is the resource
                # (``pool.free_blocks(blocks)`` frees the argument, not the pool).
                receivers.add(receiver)
                if "." not in receiver and receiver not in NOT_HANDLES:
                    names.add(receiver)
            first = call.args[0] if call.args else None
            if first and "." not in first and first not in NOT_HANDLES and (
                    not (receiver in sites._locals or receiver.startswith("self."))
                    or _obtained(sites, first)):
                # ``os.close(fd)``, ``self._unpin(h)``: the first argument is the
                # resource; through a held object (``sem.release(n)``) it is as
                # often a count or a key, unless the function obtained it from
                # a call (``lease = self._leases.pop(rid)`` ...
                # ``self._client.release(lease)``).
                names.add(first)
    return receivers, names


def _obtained(sites: FunctionSites, name: str) -> bool:
    """``name`` is bound in the function from a call that is not a builtin
    computation (``len(x)``, ``sorted(x)``, ``int(s)`` give values, not
    resources)."""
    return any((a.value or "").endswith(")") and
               (a.value or "").partition("(")[0] not in _COMPUTED
               for a in sites._assigns.get(name, ()))


def _outside_handlers(stmts: tuple[Stmt, ...]) -> Iterator[Stmt]:
    """The statements of a tree that are not inside an ``except`` handler."""
    for s in stmts:
        yield s
        for part in (s.body, s.orelse, s.final):
            yield from _outside_handlers(part)


def _enclosing_tests(stmts: tuple[Stmt, ...], held: frozenset[str]) -> dict[int, frozenset[str]]:
    """For each statement (by id), the tests of the ``if`` bodies it is in,
    where the test is a plain name or attribute chain (``self.use_gpu``): a
    test that calls something may change its answer."""
    out: dict[int, frozenset[str]] = {}
    for s in stmts:
        out[id(s)] = held
        inner = held | {s.text} if s.kind == "if" and s.text and _CHAIN.match(s.text) else held
        out.update(_enclosing_tests(s.body, inner))
        for part in (s.orelse, s.handlers, s.final):
            out.update(_enclosing_tests(part, held))
    return out
