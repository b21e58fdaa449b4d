"""Concurrent work: the functions handed to threads, executors, tasks and
callbacks, and the loops in them that serve requests.

A spawn is a call matching one of the protocol's spawners
(``threading.Thread(target=self._loop)``, ``pool.submit(self._load, ...)``,
``loop.run_in_executor(None, fn)``, ``fut.add_done_callback(cb)``); its
target is resolved to analysed functions. A serving loop is a ``while``
loop in such a target.
"""

from __future__ import annotations

import fnmatch
from collections import deque
from dataclasses import dataclass

from kvflowmap.model.cfg import CFG
from kvflowmap.facts import CallFact, Stmt
from kvflowmap.lifecycle.spec import Spawner
from kvflowmap.lifecycle.view import FnView, walk

RAISING = ("exception", "raise", "assert")


@dataclass(frozen=True)
class Spawn:
    """``spawner`` (a function) starts ``target`` concurrently at ``line``."""

    spawner: str
    target: str
    line: int
    call: str


def spawn_target(call: CallFact, spawners: tuple[Spawner, ...]) -> str | None:
    """The chain of the callable a spawning call runs, if it is one."""
    for sp in spawners:
        if not fnmatch.fnmatch(call.callee or "", sp.call):
            continue
        if sp.target:
            found = dict(call.kwargs).get(sp.target)
            if found:
                return found
        if sp.arg is not None and sp.arg < len(call.args):
            arg = call.args[sp.arg]
            # ``create_task(self._work(x))``: the coroutine's function
            return arg[:-2] if sp.called and arg and arg.endswith("()") else arg
    return None


def spawns(fns: dict[str, FnView], spawners: tuple[Spawner, ...], calls) -> list[Spawn]:
    """Every spawn in the subject whose target is an analysed function."""
    out = []
    for fqn, fn in fns.items():
        for c in fn.all_calls:
            target = spawn_target(c, spawners)
            if not target:
                continue
            for t in calls.reference(fn.ctx, target):
                if t.fqn in fns:
                    out.append(Spawn(fqn, t.fqn, c.line, c.callee or ""))
    return sorted(set(out), key=lambda s: (s.target, s.spawner, s.line))


# Queue and event operations that raise nothing a serving loop has to survive
# (``Empty``/``Full`` are what the loop waits on).
QUEUE_OPS = frozenset({"get", "get_nowait", "put", "put_nowait", "task_done", "qsize", "empty",
                       "wait", "set", "clear", "is_set", "notify", "notify_all",
                       # a pause raises nothing but the cancellation that ends the loop
                       "sleep"})


def escaping_raise(cfg: CFG, loop: Stmt, fn: FnView) -> int | None:
    """The first node of ``loop``'s body whose exception leaves the loop (no
    ``except`` inside the loop catches it), or None when every one is caught.
    Queue gets and puts raise only ``Empty``/``Full``, which the loop handles
    or waits out: they are not counted."""
    body = {id(s) for s in walk(loop.body)}
    inside = {n.id for n in cfg.nodes if n.stmt is not None and id(n.stmt) in body}
    for n in sorted(inside, key=lambda i: (cfg.nodes[i].line, i)):
        st = cfg.nodes[n].stmt
        callees = [(c.callee or "").rpartition(".")[2] for c in fn.calls(st)] if st else []
        if callees and all(c in QUEUE_OPS for c in callees):
            continue
        for d, lab in cfg.successors(n):
            if lab in RAISING and escapes(cfg, d, inside):
                return n
    return None


def explicit_raises(cfg: CFG, loop: Stmt) -> list[int]:
    """The ``raise`` statements of ``loop``'s body (a re-raise in a handler
    too) whose exception leaves the loop: each ends the thread by design,
    and is where a fix lands (log and fail the one request instead)."""
    body = {id(s) for s in walk(loop.body)}
    inside = {n.id for n in cfg.nodes if n.stmt is not None and id(n.stmt) in body}
    return [n for n in sorted(inside, key=lambda i: (cfg.nodes[i].line, i))
            if cfg.nodes[n].kind == "stmt" and (st := cfg.nodes[n].stmt) is not None
            and st.kind == "raise"
            and any(lab in RAISING and escapes(cfg, d, inside) for d, lab in cfg.successors(n))]


def leaves_function(cfg: CFG, start: int) -> bool:
    """An exception raised at ``start`` leaves the function: no ``except``
    on the way (any handler is taken to catch it)."""
    inside = {n.id for n in cfg.nodes} - {cfg.exit, cfg.raise_exit}
    return any(lab in RAISING and escapes(cfg, d, inside) for d, lab in cfg.successors(start))


def escapes(cfg: CFG, start: int, inside: set[int]) -> bool:
    """An exception arriving at ``start`` reaches outside the loop uncaught."""
    seen, queue = {start}, deque([start])
    while queue:
        n = queue.popleft()
        node = cfg.nodes[n]
        if node.stmt is not None and node.stmt.kind == "except" and n in inside:
            continue  # caught inside the loop: the loop goes on
        if n not in inside:
            return True
        for d, lab in cfg.successors(n):
            if d not in seen and (lab in RAISING or node.kind == "with-exit"
                                  or lab in ("next", "end")):
                seen.add(d)
                queue.append(d)
    return False


# Bases whose ``start()`` runs the subclass's ``run`` in a new thread or process.
_THREAD_BASES = ("threading.Thread", "multiprocessing.Process", "multiprocessing.context.Process")


def thread_body(classes, cls: str) -> list[str]:
    """``[Cls.run]`` for a class deriving from ``threading.Thread`` (or a
    process): creating one is how its ``run`` comes to run."""
    if not classes.is_class(cls) or not any(b in _THREAD_BASES for b in classes.mro(cls)):
        return []
    run = classes.find_member(cls, "run")
    return [run] if run else []
