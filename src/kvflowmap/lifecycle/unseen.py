"""Requests the commit hook never saw: a ``request_finished`` arm for a request
aborted before it was scheduled.

A P/D scheduler's commit hook (``update_state_after_alloc``) often announces
a request under a test of a request flag and then clears the flag (``if
params.get("do_remote_prefill"): ... self._reqs_need_recv[rid] = ...;
params["do_remote_prefill"] = False``). Where ``request_finished``'s own test
sees the flag still set, the commit hook never ran for the request: that arm
must make the announcement itself (an empty entry, so the worker tells the
prefill side to free its blocks), with the request fields the commit hook
sets before announcing when the metadata builder reads them by subscript
(vLLM 0.25.1's NIXL push scheduler announced without ``remote_block_ids``:
``KeyError`` in the scheduler; fixed in 0.26.0). A ``request_finished`` that
never tests the flag at all (nor anything it runs), in a connector whose hook
can delay a free, ends such a request at its first way out that tells the
workers nothing (vLLM 0.9.1's NIXL; 0.9.2 added the test).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.announced import (FALSY, Missed, announcements, evaluate, exits, expand,
                                           forwarded_attrs, guarded, leaves, local_tests,
                                           scheduler_hooks)
from kvflowmap.lifecycle.effects import Effects
from kvflowmap.lifecycle.view import FnView, walk
from kvflowmap.model.classes import ClassIndex


@dataclass(frozen=True)
class Unseen(Missed):
    """A return for a request whose ``flag`` (a ``kv_transfer_params`` key
    the commit hook clears) is still set, so the commit hook never ran for
    it."""

    flag: str
    # set when the path does announce but leaves out a request field the
    # commit hook sets (at ``commit_line``) and ``reader`` subscripts
    key: str = ""
    reader: str = ""
    read_line: int = 0
    # the delay-free hook never tests the flag: this return (its first that
    # tells nothing) is where such a request ends
    untested: bool = False


def _unseeded(fns: dict[str, FnView], reach: Callable[[str], set[str]], builders: list[str],
              commit: FnView, finish: FnView, line: int, keys: set[str], flag: str
              ) -> list[tuple[str, int, str, int]]:
    """``(key, commit line, reader, read line)`` for each request field among
    ``keys`` the commit hook sets (``params["remote_block_ids"] = ()``) that
    the ``if`` arm of ``finish`` holding the return at ``line`` does not set,
    and that the metadata ``builders`` (the class's and the base one its
    ``super()`` call runs) read by subscript with no default
    (``kv_transfer_params["remote_block_ids"]``): a ``KeyError`` there."""
    arm = _arm_of(finish.fact.body, line)
    if arm is None:
        return []
    set_here = {(op.key or "").strip("'\"") for st in walk(arm) for op in finish.containers(st)
                if op.op == "setitem"}
    # only what the commit hook sets on the request's own fields (where it
    # clears the flag), not on a copy it keeps aside (MoRIIO's saved_params)
    at = _set_keys(commit, _flag_mapping(commit, flag))
    out = []
    for key in sorted(keys - set_here):
        read = next((r for b in builders if (r := _subscript_reader(fns, reach, b, key))), None)
        if key in at and read:
            out.append((key, at[key], *read))
    return out


def _arm_of(body: tuple[Stmt, ...], line: int) -> tuple[Stmt, ...] | None:
    """The innermost ``if`` body or ``else`` that holds the statement at ``line``."""
    for s in body:
        for part in (s.body, s.orelse):
            if any(x.line == line for x in walk(part)):
                inner = _arm_of(part, line)
                return inner if inner is not None else (part if s.kind == "if" else None)
        for part in (s.final, *(h.body for h in s.handlers)):
            inner = _arm_of(part, line)
            if inner is not None:
                return inner
    return None


def _subscript_reader(fns: dict[str, FnView], reach: Callable[[str], set[str]], builder: str,
                      key: str) -> tuple[str, int] | None:
    """The first function the metadata builder runs (itself, then what it
    makes run, by name) that reads ``x["key"]`` (a subscript, no default)
    other than to store into it: where the step's metadata is built, for
    every request in it."""
    for f in [builder, *sorted(reach(builder) - {builder})]:
        fn = fns[f]
        stored = {(op.container, op.line) for op in fn.all_containers if op.op == "setitem"}
        for r in fn.facts.key_reads:
            if r.scope == fn.fact.qualname and r.key == key and (r.base, r.line) not in stored:
                return f, r.line
    return None


def _set_keys(fn: FnView, within: str | None = None) -> dict[str, int]:
    """String keys ``fn`` stores under in a local mapping
    (``params["do_remote_prefill"] = False``), with the first line of each;
    with ``within``, only those stored in that mapping."""
    out: dict[str, int] = {}
    for op in fn.all_containers:
        if op.op == "setitem" and op.key and op.key[:1] in "'\"" and "." not in op.container \
                and within in (None, op.container):
            out.setdefault(op.key.strip("'\""), op.line)
    return out


def _flag_mapping(fn: FnView, flag: str) -> str | None:
    """The local mapping ``fn`` clears ``flag`` in (``params``)."""
    return next((op.container for op in fn.all_containers if op.op == "setitem"
                 and (op.key or "").strip("'\"") == flag), None)


def _mentions(fn: FnView, key: str) -> bool:
    """``fn`` reads or writes the request field ``key`` anywhere (a test of
    it, ``params.get("key")``, ``params["key"]``); the caller asks it of the
    hook and of every subject function the hook makes run."""
    quoted = re.compile(rf"['\"]{re.escape(key)}['\"]")
    return any(quoted.search(s.text or "") or any(quoted.search(n) for n in s.names)
               for s in walk(fn.fact.body)) or \
        any(r.key == key for r in fn.facts.key_reads if r.scope == fn.fact.qualname) or \
        any(quoted.search(a) for c in fn.all_calls for a in c.args if a)


def _under_flag(fn: FnView, atom: str) -> set[int]:
    """Lines of ``fn``'s returns that sit in an arm of its own test of
    ``atom`` that holds only where ``atom`` is true (``if
    params.get("do_remote_prefill"):``): the function itself saw the flag set."""
    tests = local_tests(fn)
    out = set()
    for s, guards in guarded(fn.fact.body, ()):
        if s.kind != "return":
            continue
        for text, arm in guards:
            full = expand(text, tests)
            if atom in leaves(full) and evaluate(full, {atom: False}) is (not arm):
                out.add(s.line)
    return out


def _builders(fns: dict[str, FnView], classes: ClassIndex, builder: str) -> list[str]:
    """The builder and the builders its ``super().<name>()`` calls reach."""
    out: list[str] = []
    f: str | None = builder
    while f and f in fns and f not in out:
        out.append(f)
        fn = fns[f]
        f = classes.find_member(fn.cls, fn.name, after=fn.cls) if fn.cls and any(
            (c.callee or "") == f"super().{fn.name}" for c in fn.all_calls) else None
    return out


def unseen(fns: dict[str, FnView], classes: ClassIndex, eff: Effects, commit_name: str,
           finish_name: str, builder_name: str, element: int,
           reach: Callable[[str], set[str]]) -> list[Unseen]:
    """Per class whose commit hook announces ids to the workers under a test
    of a request flag it then clears (``if params.get("do_remote_prefill"):
    ... self._reqs_need_recv[rid] = ...; params["do_remote_prefill"] = False``),
    the returns of the delay-free hook on a path that tests the flag set
    (the request was aborted before the commit hook ran) and announces
    nothing: the workers never learn of it, and the peer that holds KV for it
    (the prefill side's blocks) is never told to free it. ``reach(f)``: the
    subject functions ``f`` makes run."""
    out: set[Unseen] = set()
    chains: dict[str, list[str]] = {}  # builder -> it and the base builders it runs
    for commit, finish, builder in scheduler_hooks(fns, classes, commit_name, finish_name,
                                                   builder_name):
        if builder not in chains:
            chains[builder] = _builders(fns, classes, builder)
        attrs = set().union(*(forwarded_attrs(fns[b]) for b in chains[builder]))
        # ``params["do_remote_prefill"] = False``: the keys the commit hook sets
        cleared = set(_set_keys(fns[commit]))
        tests = local_tests(fns[commit])
        for line, attr, _, guards in announcements(fns[commit], eff, attrs) if attrs else ():
            for text, arm in guards:
                full = expand(text, tests)
                found = next(((a, k) for a in leaves(full) for k in sorted(cleared)
                              if re.search(rf"\(['\"]{re.escape(k)}['\"]", a)), None)
                # the announcement needs the flag set: with it clear the arm
                # is not taken (``params is not None and params.get(flag)``)
                if found is None or evaluate(full, {found[0]: False}) is not (not arm):
                    continue
                atom, flag = found
                tested = _under_flag(fns[finish], atom)
                if not any(_mentions(fns[f], flag) for f in {finish, *reach(finish)}
                           if f in fns):
                    # no test of the flag at all (vLLM 0.9.1's NIXL): a request
                    # aborted before it was scheduled takes the hook's first
                    # way out that tells nothing, whatever that tests
                    ways = exits(fns[finish], eff, (atom,), element, attrs)
                    silent = [e for e in ways
                              if not e.told and not e.handed and e.first in FALSY]
                    # a hook that never delays a free: no peer holds KV for the
                    # request on this connector's word (vllm-ascend's layerwise
                    # push, whose producer pushes only after the consumer allocated)
                    if silent and any(e.first not in FALSY for e in ways):
                        out.add(Unseen(finish, silent[0].line, commit, line, attr, builder,
                                       flag, untested=True))
                    continue
                for e in exits(fns[finish], eff, (atom,), element, attrs):
                    if e.line in tested and not e.told and not e.handed and \
                            e.first in FALSY:
                        out.add(Unseen(finish, e.line, commit, line, attr, builder, flag))
                    elif e.line in tested and attr in e.told:
                        # announced, but without the request fields the commit
                        # hook sets for the consumer (``params["remote_block_ids"]``)
                        for key, at, reader, read_at in _unseeded(
                                fns, reach, chains[builder], fns[commit], fns[finish],
                                e.line, cleared - {flag}, flag):
                            out.add(Unseen(finish, e.line, commit, at, attr, builder, flag,
                                           key, reader, read_at))
    return sorted(out, key=lambda u: (u.fqn, u.line, u.attr))
