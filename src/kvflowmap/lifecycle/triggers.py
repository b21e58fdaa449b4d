"""A remote-load trigger the commit hook never consumes.

A P/D consumer's probe (``get_num_new_matched_tokens``) asks for a remote
load because of what the request carries (``request.kv_transfer_params``:
``do_remote_prefill``, the producer's block ids), and the commit hook
(``update_state_after_alloc``) records the load for the workers. vLLM calls
the probe again for the same request whenever it is scheduled again (it was
preempted, or its blocks could not be allocated this step). Unless the
commit hook consumes the trigger (``params["do_remote_prefill"] = False``,
``params.pop(...)``, ``request.kv_transfer_params = None``), the probe asks
for the same remote KV a second time, from a producer that freed it once
the first load finished: the request waits in ``WAITING_FOR_REMOTE_KVS`` for
a load that cannot succeed, or loads the wrong blocks (tpu-inference 0.18.0;
0.19.0 sets ``params["do_remote_prefill"] = False``, as vLLM's NIXL
connector always has).

Found by structure: in a class that resolves both hooks, a test in the probe
that reads ``<request>.<trigger>`` (directly or through a local bound to it)
guards a return that asks for a load (the probe returns it under the test,
or the test's arm leaves early and the asking return follows); the commit
hook keeps the request id somewhere; and neither hook, nor an analysed
function either one calls, writes into the trigger or rebinds it. A probe
that first tests the request id against the connector's own state (``if
request.request_id in self._loading: return 0, False``) keeps its own
account and is not reported, nor is a module that acts on preemption
(tests ``RequestStatus.PREEMPTED``, walks ``resumed_req_ids``): a request
scheduled again is a case it handles itself (AIBrix's PD-reuse connector
reloads a resumed request from its shared cache by design).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.view import FnView, walk


@dataclass(frozen=True)
class Unconsumed:
    """``commit`` keeps the request at ``line`` and leaves ``trigger`` as
    it was, although ``probe`` asks for a load because of it (test at
    ``test_line``, asking return at ``ask_line``)."""

    probe: str
    test_line: int
    ask_line: int
    commit: str
    line: int
    trigger: str


def unconsumed(probe: FnView, commit: FnView, trigger: str, asks: list[int],
               records: list[int], reach: Callable[[FnView], Iterable[FnView]],
               keeps_own: Callable[[FnView, Stmt], bool]) -> Unconsumed | None:
    """The finding for one class's probe and commit hook, or None. ``asks``:
    lines of the probe's returns that ask for a load; ``records``: lines of
    the commit hook that keep the request id; ``reach``: the analysed
    functions a function calls; ``keeps_own``: a test of the probe that
    checks the request id against the connector's own state."""
    if not asks or not records:
        return None
    test = _guarding_test(probe, trigger, set(asks), keeps_own)
    if test is None:
        return None
    keys = _tested_keys(probe, test[0])
    for fn in (probe, commit, *reach(probe), *reach(commit)):
        if _consumes(fn, trigger, keys):
            return None
    return Unconsumed(probe.fqn, test[0], test[1], commit.fqn, min(records), trigger)


def _aliases(fn: FnView, trigger: str) -> set[str]:
    """Names that stand for the trigger in ``fn``: ``x.<trigger>`` itself and
    every local bound to it (``params = request.kv_transfer_params``)."""
    out = set()
    for s in fn.stmts:
        # ``params = request.kv_transfer_params or {}`` names it too
        reads = any(n.rpartition(".")[2] == trigger and "." in n for n in s.names)
        for a in fn.assigns(s):
            if "." not in a.target and not a.aug and (reads or (
                    a.value and a.value.rpartition(".")[2] == trigger and "." in a.value)):
                out.add(a.target)
    return out


def _reads(fn: FnView, s: Stmt, trigger: str, aliases: set[str]) -> bool:
    """The statement's own text reads the trigger."""
    return any(n.partition(".")[0] in aliases or (n.rpartition(".")[2] == trigger and "." in n)
               for n in s.names)


def _guarding_test(fn: FnView, trigger: str, asks: set[int],
                   keeps_own: Callable[[FnView, Stmt], bool]) -> tuple[int, int] | None:
    """``(test line, asking return line)``: a test of the trigger that holds
    an asking return in its body, or whose body leaves early with the asking
    return after it. None as well when a test of the probe checks the
    request against the connector's own state."""
    aliases = _aliases(fn, trigger)
    found = None
    for s in fn.stmts:
        if s.kind != "if":
            continue
        if keeps_own(fn, s):
            return None
        if found or not _reads(fn, s, trigger, aliases):
            continue
        inside = sorted(x.line for x in walk(s.body) if x.kind == "return" and x.line in asks)
        if inside:
            found = (s.line, inside[0])
        elif s.body and s.body[-1].kind == "return":
            after = sorted(a for a in asks if a > s.line)
            if after:
                found = (s.line, after[0])
    return found


# writes of one key, and writes of the whole mapping
_KEY_WRITES = frozenset({"setitem", "delitem", "pop", "setdefault"})
_WHOLE_WRITES = frozenset({"popitem", "update", "clear"})
_KEY = re.compile(r"""(?:\.get\(|\[)\s*["']([^"']+)["']""")


def _tested_keys(fn: FnView, line: int) -> set[str]:
    """The string keys the test at ``line`` reads (``params.get("do_remote_prefill")``):
    consuming the trigger is writing one of them. None read (``if not
    request.kv_transfer_params``): any write counts."""
    return {k for s in fn.stmts if s.line == line for k in _KEY.findall(s.text or "")}


def _consumes(fn: FnView, trigger: str, keys: set[str]) -> bool:
    """``fn`` writes into the trigger (one of the tested ``keys``, when the
    probe tests keys: another key it sets, ``_remote_blocks_processed``,
    changes nothing the probe reads) or rebinds it on its owner."""
    aliases = _aliases(fn, trigger)
    for op in fn.all_containers:
        root = op.container
        if not (root in aliases or root.rpartition(".")[2] == trigger):
            continue
        if op.op in _WHOLE_WRITES or (op.op in _KEY_WRITES and (
                not keys or (op.key or "").strip("'\"") in keys)):
            return True
    return any(a.target.rpartition(".")[2] == trigger and "." in a.target
               for a in fn.all_assigns)
