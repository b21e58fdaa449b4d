"""``lifecycle`` mode ``thread_loop``: a serving loop survives its exceptions.

A function run by a thread, executor, task or callback that loops
(``while``) to serve transfers must not let an exception escape the loop
body: the first transfer that fails kills the thread, and every request it
would have completed later waits forever (no error reaches vLLM). Catch in
the loop body, fail the request being served, and go on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvflowmap.model.cfg import build_cfg
from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.lifecycle._shared import functions, lifecycle, short, steps
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option
from kvflowmap.lifecycle.effects import HANDLING
from kvflowmap.lifecycle.threads import escaping_raise, explicit_raises, leaves_function
from kvflowmap.lifecycle.view import walk

READS = ("Reads: the spawn calls of the subject (the protocol's `lifecycle.spawners`: "
         "threads, executors, tasks, callbacks) resolved to analysed targets, the `run` of "
         "each `threading.Thread` subclass the connector constructs, and the "
         "control-flow graph of each `while` loop in a target, with exception edges.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``thread_loop``."""

    require_ids: bool = option(True, "only loops whose body does something with request "
                                     "ids (lifecycle effects) or serves peers (see "
                                     "serve_calls)")
    serve_calls: tuple[str, ...] = option(
        ("recv", "recv_multipart", "recv_pyobj", "recv_json", "recv_string", "accept",
         "recvfrom"),
        "methods that take a peer's message each iteration: a loop calling one is a "
        "server (a handshake or metadata listener) whose death stalls every later peer")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per serving loop that lets an exception out."""
    lc = lifecycle(ctx)
    wanted = set(functions(ctx, lc))
    targets: dict[str, list] = {}
    for sp in [*lc.spawned, *lc.thread_starts()]:
        if sp.target in wanted:
            targets.setdefault(sp.target, []).append(sp)
    fed = _fed_queues(lc) if targets else set()  # once: it reads every subject function
    return each_function(ctx, sorted(targets),
                         lambda f: _check(ctx, lc, f, targets[f], opts, fed, wanted))


def _check(ctx: CheckContext, lc, fqn: str, spawned, opts: Options,
           fed: set[str], wanted: set[str]) -> list[Finding]:
    fn = lc.functions[fqn]
    cfg = _cfg(ctx, lc, fn)
    nested = {id(x) for s in fn.stmts if s.kind in ("while", "for") for x in walk(s.body)}
    out = []
    for n in cfg.nodes:
        if n.kind not in ("stmt",) or n.stmt is None or n.stmt.kind != "while":
            continue
        if id(n.stmt) in nested:
            continue  # an inner loop: what leaves it may be caught by the outer one
        if opts.require_ids and not _serves(lc, fn, n.stmt, opts.serve_calls, fed):
            continue
        out += _stalled(ctx, fn, n.stmt, spawned[0])
        bad = escaping_raise(cfg, n.stmt, fn)
        if bad is None:
            continue
        line = cfg.nodes[bad].line
        sp = spawned[0]
        origin = _raised_below(ctx, lc, fn, cfg.nodes[bad].stmt)
        path = (ctx.step(sp.spawner, sp.line, f"{sp.call} runs {short(fqn)}"),
                *steps(ctx, fqn, [(n.line, "the serving loop"),
                                  (line, "an exception here leaves the loop: the thread ends")]),
                *(steps(ctx, origin[0], [(origin[1], _ORIGIN_NOTES[origin[2]])]) if origin else ()))
        out.append(ctx.finding(
            fqn, line, f"an exception at this line ends the loop of {short(fqn)}, which runs "
            f"in the background ({sp.call}): every transfer it would complete later hangs "
            "with no error. Catch it in the loop body, fail the request it was serving, and "
            "continue", path=path, anchor=f"loop:{n.stmt.text}"))
        if origin and origin[2] == "assert" and origin[0] in wanted:
            # an ``assert`` is no way to fail one transfer: where it is, is
            # where a fix lands as often as the loop
            out.append(ctx.finding(
                origin[0], origin[1],
                f"this `assert` runs in {short(fqn)}'s background loop ({sp.call}) with "
                "nothing catching its AssertionError on the way: when it fails, the thread "
                "ends and every transfer it would complete later hangs with no error. Handle "
                "the case (fail the request it concerns) instead of asserting it",
                path=path, anchor=f"loop-assert:{n.stmt.text}"))
        for r in explicit_raises(cfg, n.stmt):
            if r == bad:
                continue
            out.append(ctx.finding(
                fqn, cfg.nodes[r].line,
                f"this `raise` ends the loop of {short(fqn)}, which runs in the background "
                f"({sp.call}): one bad message or transfer kills the thread, and every "
                "transfer it would complete later hangs with no error. Log it, fail the "
                "request it concerns, and continue",
                path=(*path[:2], *steps(ctx, fqn, [(cfg.nodes[r].line, "this `raise` "
                                                   "leaves the loop")])),
                anchor=f"loop-raise:{n.stmt.text}:{cfg.nodes[r].stmt.text}"))
        break  # one finding per function: the first loop that dies
    return out


def _stalled(ctx: CheckContext, fn, loop, sp) -> list[Finding]:
    """``E.wait()`` with no timeout inside a loop that runs while ``E`` is
    not set (``while not E.is_set():``): the wait returns only once the loop
    is told to stop, so the loop takes no further turn until shutdown, and
    every transfer it would serve meanwhile hangs with no error."""
    stops = set(_STOP_TEST.findall(loop.text or ""))
    if not stops:
        return []
    out = []
    for s in walk(loop.body):
        if s.kind in ("def", "class"):
            continue
        for c in fn.calls(s):
            base, _, meth = (c.callee or "").rpartition(".")
            if meth == "wait" and base in stops and not c.args and not c.kwargs:
                path = (ctx.step(sp.spawner, sp.line, f"{sp.call} runs {short(fn.fqn)}"),
                        *steps(ctx, fn.fqn, [(loop.line, f"the serving loop runs while "
                                                         f"`{base}` is not set"),
                                             (c.line, "this wait returns only once it is "
                                                      "set")]))
                out.append(ctx.finding(
                    fn.fqn, c.line, f"`{base}.wait()` has no timeout, in the loop that runs "
                    f"until `{base}` is set: it returns only at shutdown, so the loop of "
                    f"{short(fn.fqn)} ({sp.call}) takes no further turn and every transfer "
                    "it would serve meanwhile hangs with no error. Give the wait a timeout "
                    "(the loop's polling interval), or wait on an event the work sets",
                    path=path, anchor=f"loop-stall:{base}"))
    return out


# ``while not self._stop.is_set():`` -> ``self._stop``
_STOP_TEST = re.compile(r"not\s+([A-Za-z_][\w.]*)\.is_set\(\)")


# the path step's note for the statement an escaping exception starts from
_ORIGIN_NOTES = {"raise": "this `raise` reaches the loop uncaught",
                 "assert": "this `assert` can fail: its AssertionError reaches the loop uncaught"}


def _raised_below(ctx: CheckContext, lc, fn, stmt, depth: int = 3
                  ) -> tuple[str, int, str] | None:
    """``(function, line, kind)`` of an explicit ``raise`` or ``assert`` of
    the analysed code that an exception of ``stmt`` can start from (the
    first one, callees in order, ``depth`` calls down): the line a reader
    wants to see next (``kind`` picks its note in ``_ORIGIN_NOTES``)."""
    if stmt is None or depth == 0:
        return None
    for call in fn.calls(stmt):
        for t in ctx.linker.calls.resolve(fn.ctx, call):
            callee = lc.functions.get(t.fqn)
            if callee is None or callee is fn:
                continue
            cfg = _cfg(ctx, lc, callee)
            for node in sorted(cfg.nodes, key=lambda x: (x.line, x.id)):
                st = node.stmt
                if st is None or node.kind != "stmt" or not leaves_function(cfg, node.id):
                    continue
                if st.kind in _ORIGIN_NOTES:
                    return t.fqn, node.line, st.kind
                deeper = _raised_below(ctx, lc, callee, st, depth - 1)
                if deeper:
                    return deeper
    return None


def _cfg(ctx: CheckContext, lc, fn):
    """The function's control flow, with the exception edges of every
    statement the lifecycle model says may raise."""
    return build_cfg(fn.fact.body, lambda s: lc.stmt_raises(fn, s, ctx.linker.calls))


def _serves(lc, fn, loop, serve_calls: tuple[str, ...], fed: set[str]) -> bool:
    """The loop body does something with request ids, takes work from a
    queue that other code fills (a transfer queue), or takes a peer's message
    (``sock.recv_multipart()``: a handshake listener every later transfer
    needs). ``fed``: the queues request work is put into (``_fed_queues``)."""
    for s in walk(loop.body):
        if any(e.kind in HANDLING or e.kind == "remove" for e in lc.effects.of(fn, s)):
            return True
        for c in fn.calls(s):
            base, _, meth = (c.callee or "").rpartition(".")
            if base and meth in serve_calls:
                return True
            if meth in ("get", "get_nowait") and base.startswith("self.") and \
                    base.rpartition(".")[2] in fed:
                return True
    return False


def _fed_queues(lc) -> set[str]:
    """Attribute names of queues some subject function puts request work
    into: the put names a request id, or the queue is request-keyed."""
    out = set()
    for fn in lc.functions.values():
        for s in fn.stmts:
            for c in fn.calls(s):
                base, _, meth = (c.callee or "").rpartition(".")
                if meth not in ("put", "put_nowait") or not base.startswith("self."):
                    continue
                attr = base.rpartition(".")[2]
                if attr in lc.state.keyed_attrs or lc.state.id_names_in(fn, s.names) or \
                        _names_ids(lc, fn, s) or _names_requests(lc, fn, s):
                    out.add(attr)
    return out


def _names_requests(lc, fn, s) -> bool:
    """The statement passes the request's data (a record, or a task object the
    function put ids into), in code that runs for the connector."""
    if not lc.connected(fn.fqn):
        return False
    ids = lc.state.of(fn.fqn)
    # a local the function filled with ids (``task.send_request[req_id] = meta``)
    carriers = {op.container.partition(".")[0].partition("[")[0] for op in fn.all_containers
                if lc.state.is_id(fn, op.key)}
    return any(n.partition(".")[0] in ids.records | carriers for n in s.names if n != "self")


def _names_ids(lc, fn, s) -> bool:
    """The statement passes a local that holds request ids (``request_ids``),
    or a request-keyed collection of an object (``self._q.put(self._make_task(
    metadata.save_intents))``: a task built from it)."""
    ids = lc.state.of(fn.fqn)
    return any(n in ids.colls or n in ids.ids or ("." in n and lc.state.is_coll(fn, n))
               for n in s.names)
