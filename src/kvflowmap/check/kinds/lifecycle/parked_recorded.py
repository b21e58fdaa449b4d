"""``lifecycle`` mode ``parked_recorded``: a request the probe asks to load
is recorded by the commit hook.

When ``get_num_new_matched_tokens`` answers ``load_kv_async=True``, vLLM
parks the request in ``WAITING_FOR_REMOTE_KVS`` and calls
``update_state_after_alloc`` with its blocks; only what that hook records
(for the metadata the workers load from) ever leads to ``finished_recving``.
A commit hook that records the request on no path at all, in a class whose
probe can ask for a load (``True``, or a token count that is not a literal
0), parks every async load forever, and leaves a synchronous one unloaded.

The same holds per kind of request: when the probe parks only requests whose
record says so (``if params.get("do_remote_prefill"): return n, True``), the
commit hook's arm for that same test (``if params.get("do_remote_prefill"):``)
must record them; one that records nothing, while the hook records only in
its other arms (``elif params.get("do_remote_decode"): ...``), parks every
such request forever; and so does its arm for a request with external tokens
to load (``if num_external_tokens > 0:``) that records nothing while the
other arm records.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.lifecycle._shared import (async_returns, functions, lifecycle,
                                                     probe_commit_pairs, record_lines, short)
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option
from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.view import walk

READS = ("Reads: per class, the probe (`lifecycle.probe`) and commit hook "
         "(`lifecycle.commit`) its MRO resolves to, the probe's returned tuples (the "
         "async element), and the lifecycle model's effects of every statement of the "
         "commit hook on the request id.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``parked_recorded``."""

    never_async: tuple[str, ...] = option(("False",), "texts of the probe's async element "
                                                      "that mean 'no async load'")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per commit hook that records nothing while its probe can park."""
    lc = lifecycle(ctx)
    wanted = set(functions(ctx, lc))
    commit_name, idx = lc.spec.commit, lc.spec.async_element
    out = []
    for probe, commit in probe_commit_pairs(ctx, lc, wanted):
        parks = async_returns(lc, probe, idx, opts.never_async)
        if not parks:
            continue
        if _records(lc, probe):
            continue  # the design records in the probe
        if _records(lc, commit):
            out += [_arm_finding(ctx, probe, commit, arm, key, line)
                    for arm, key, line in _unrecorded_arms(lc, probe, commit, parks)]
            out += [_tokens_finding(ctx, probe, commit, arm, parks[0])
                    for arm in _unrecorded_token_arms(lc, commit)]
            continue
        fn = lc.functions[commit]
        line = parks[0]
        out.append(ctx.finding(
            commit, fn.fact.line,
            f"{short(commit)} records the request on no path, but {short(probe)} can ask for "
            f"a load (line {line}): vLLM counts those tokens as computed (and, for an async "
            "load, parks the request in WAITING_FOR_REMOTE_KVS), yet nothing is recorded "
            "for the workers to load: the request runs on unloaded blocks or waits for a "
            "finished_recving that never comes",
            path=(ctx.step(probe, line, "the probe asks for a load"),
                  ctx.step(commit, fn.fact.line, "the commit hook records nothing")),
            anchor=f"parked:{commit_name}"))
    return out


def _records(lc, fqn: str) -> bool:
    """Some statement of ``fqn`` keeps the request id (not only returns it)."""
    return bool(record_lines(lc, fqn))


def _arm_finding(ctx: CheckContext, probe: str, commit: str, arm: Stmt, key: str,
                 line: int) -> Finding:
    return ctx.finding(
        commit, arm.line,
        f"{short(commit)} records nothing for a request whose record has {key!r}, but "
        f"{short(probe)} asks to load exactly those (line {line}), and this hook records "
        "requests only in its other arms: vLLM parks such a request in "
        "WAITING_FOR_REMOTE_KVS (or counts its tokens as computed), and no worker ever "
        "loads it or names it in finished_recving",
        path=(ctx.step(probe, line, f"the probe asks for a load when {key!r} is set"),
              ctx.step(commit, arm.line, f"the arm for {key!r} records nothing")),
        anchor=f"parked-arm:{key}")


def _unrecorded_arms(lc, probe: str, commit: str, parks: list[int]
                     ) -> list[tuple[Stmt, str, int]]:
    """(``if`` statement, key, probe line) for each arm of the commit hook
    whose test requires a key of the request's record that every way the
    probe asks for a load requires too, where that arm records nothing and
    every record of the hook lies in the ``if``'s other arms."""
    keys = _park_keys(lc.functions[probe], set(parks))
    fn = lc.functions[commit]
    records = record_lines(lc, commit)
    out = []
    for key, line in sorted(keys.items()):
        for s in walk(fn.fact.body):
            if s.kind != "if" or key not in _positive_keys(s.text):
                continue
            inside = {x.line for x in walk(s.body)}
            other = {x.line for x in walk(s.orelse)}
            if records and not records & inside and records <= other:
                out.append((s, key, line))
    return out


def _park_keys(fn, parks: set[int]) -> dict[str, int]:
    """Keys of the request's record (``params.get("k")``) that the tests around
    every one of the probe's asking returns require, with one such line."""
    found: dict[int, set[str]] = {}

    def visit(body: tuple[Stmt, ...], keys: frozenset[str]) -> None:
        for s in body:
            if s.kind == "return" and s.line in parks:
                found[s.line] = set(keys)
            if s.kind == "if":
                visit(s.body, keys | _positive_keys(s.text))
                visit(s.orelse, keys)
                continue
            for part in (s.body, s.orelse, s.final, *(h.body for h in s.handlers)):
                visit(part, keys)

    visit(fn.fact.body, frozenset())
    if not found or set(found) != parks:
        return {}
    common = set.intersection(*found.values())
    return {k: min(found) for k in common}


def _positive_keys(test: str | None) -> frozenset[str]:
    """String keys the test requires to be set: ``x.get("k")`` or ``x["k"]`` as
    the test or one part of its ``and`` (not under ``not``)."""
    try:
        node = ast.parse(test or "", mode="eval").body
    except SyntaxError:
        return frozenset()
    parts = node.values if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And) \
        else [node]
    out = set()
    for p in parts:
        if isinstance(p, ast.Call) and isinstance(p.func, ast.Attribute) and \
                p.func.attr == "get" and p.args and isinstance(p.args[0], ast.Constant) and \
                isinstance(p.args[0].value, str):
            out.add(p.args[0].value)
        elif isinstance(p, ast.Subscript) and isinstance(p.slice, ast.Constant) and \
                isinstance(p.slice.value, str):
            out.add(p.slice.value)
    return frozenset(out)


def _tokens_finding(ctx: CheckContext, probe: str, commit: str, arm: Stmt,
                    line: int) -> Finding:
    return ctx.finding(
        commit, arm.line,
        f"{short(commit)} records nothing in its arm for a request with tokens to load "
        f"(`{arm.text}`), and records requests only in its other arms: the tokens "
        f"{short(probe)} asked for (line {line}) are counted as computed, and no worker "
        "loads them or names the request in finished_recving",
        path=(ctx.step(probe, line, "the probe asks for a load"),
              ctx.step(commit, arm.line, "the arm for external tokens records nothing")),
        anchor=f"parked-tokens:{arm.text}")


def _unrecorded_token_arms(lc, commit: str) -> list[Stmt]:
    """``if`` statements of the commit hook whose test holds only for a
    request with external tokens to load (``num_external_tokens > 0``, on
    the hook's count parameter, its third), where that arm records nothing
    and every record of the hook lies in the ``if``'s other arm."""
    fn = lc.functions[commit]
    params = [p for p in fn.param_names if p not in ("self", "cls")]
    if len(params) < 3:
        return []
    count = params[2]
    records = record_lines(lc, commit)
    out = []
    for s in walk(fn.fact.body):
        if s.kind != "if" or not _positive_count(s.text, count):
            continue
        # what follows a ``return`` at the arm's top level never runs
        live = next((i for i, x in enumerate(s.body) if x.kind in ("return", "raise")),
                    len(s.body))
        inside = {x.line for x in walk(s.body[:live + 1])}
        other = {x.line for x in walk(s.orelse)}
        dead = {x.line for x in walk(s.body[live + 1:])}
        if records & other and not records & inside and records <= other | dead:
            out.append(s)
    return out


def _positive_count(test: str | None, name: str) -> bool:
    """``test`` holds only where ``name`` is positive: ``n > 0``, ``n >= 1``,
    ``0 < n``, ``n != 0``, ``n`` (alone or as a part of an ``and``)."""
    try:
        node = ast.parse(test or "", mode="eval").body
    except SyntaxError:
        return False
    parts = node.values if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And) \
        else [node]
    for p in parts:
        if isinstance(p, ast.Name) and p.id == name:
            return True
        if isinstance(p, ast.Compare) and len(p.ops) == 1:
            left, op, right = p.left, p.ops[0], p.comparators[0]
            lit = right if isinstance(left, ast.Name) and left.id == name else \
                left if isinstance(right, ast.Name) and right.id == name else None
            if not isinstance(lit, ast.Constant) or not isinstance(lit.value, int):
                continue
            if lit is right and (isinstance(op, ast.Gt) and lit.value >= 0 or
                                 isinstance(op, ast.GtE) and lit.value >= 1 or
                                 isinstance(op, ast.NotEq) and lit.value == 0):
                return True
            if lit is left and (isinstance(op, ast.Lt) and lit.value >= 0 or
                                isinstance(op, ast.NotEq) and lit.value == 0):
                return True
    return False
