"""What ``trace`` needs of an analysis, as plain data: every logging call
(``Marker``), the functions with their calls and logging calls
(``Function``), and the protocol's names. Built once from ``Analysis``;
small enough to store with the run memo, so a second trace of another log
does not analyse the code again."""

from __future__ import annotations

import re
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kvflowmap.lifecycle.model import Lifecycle, build_lifecycle
from kvflowmap.trace.call_args import logging_args, needs_source
from kvflowmap.trace.ids import NONE, IdFlow, string_placeholders

if TYPE_CHECKING:
    import networkx as nx

    from kvflowmap.api import Analysis

LEVELS = {"debug": "DEBUG", "info": "INFO", "warning": "WARNING", "warn": "WARNING",
          "error": "ERROR", "exception": "ERROR", "critical": "CRITICAL", "fatal": "CRITICAL"}
_CALL_KINDS = ("call", "dispatch", "bridge")
STATE_NEAR = 12  # lines: a state written this shortly before a logging call is what it reports
HOOK_DEPTH = 4  # callers searched upwards for the protocol hook a function runs under


@dataclass(frozen=True)
class Marker:
    """One logging call, where it is and what it says about a request."""

    id: int
    module: str
    function: str  # full name of the enclosing function ("module" for module code)
    file: str  # relative to its root, '/'-separated
    root: str  # the root's label ("vllm 0.33.0")
    line: int
    level: str  # DEBUG, INFO, ...
    message: str
    nargs: int  # arguments after the message (-1: unknown)
    id_args: tuple[int, ...]  # placeholder positions whose argument is a request id
    related_args: tuple[int, ...]  # further id-like arguments (a remote request id)
    hooks: tuple[str, ...]  # protocol hooks it runs under (short names)
    states: tuple[str, ...]  # request states written next to it (member names)
    reports: tuple[str, ...]  # protocol reports it signals (finished_recving, ...)
    side: str  # scheduler, worker or ""
    id_how: str = ""  # how id_args were found: "flow" (data flow), "name", "" (none)
    # ``stacklevel=`` given: the line logs its caller's [file:LINE], not its own
    caller_place: bool = False


@dataclass(frozen=True)
class Function:
    """An analysed function: its calls in line order and its logging calls."""

    name: str
    file: str
    root: str
    line: int
    calls: tuple[tuple[str, int, str], ...]  # (callee, line, edge kind)
    logs: tuple[int, ...]  # marker ids
    hook: str  # the protocol hook it implements ("" when none)
    spawned: bool = False  # runs elsewhere: a thread/executor/callback target


@dataclass
class CodeIndex:
    """Everything ``trace`` reads of the analysed code."""

    markers: list[Marker]
    functions: dict[str, Function]
    states: tuple[str, ...]  # request state member names the code has
    parked_states: tuple[str, ...]  # states of the load view's commit stage
    commit_hooks: tuple[str, ...]  # hooks after which a request may wait for a load
    delay_free_hooks: tuple[str, ...]
    save_hooks: tuple[str, ...]  # hooks that send a finished request's KV cache
    report_kinds: tuple[str, ...]  # finished_recving, finished_sending, failed_recving, ...
    hook_stages: dict[str, str] = field(default_factory=dict)  # hook or vLLM function -> "load: probe"
    # report -> the hooks that make it (finished_recving -> get_finished, ...)
    report_hooks: dict[str, tuple[str, ...]] = field(default_factory=dict)
    roots: list[dict] = field(default_factory=list)  # label, path, subject, prefix
    vllm_version: str | None = None


def _short(name: str) -> str:
    return name.rpartition(".")[2]


def _words(text: str) -> set[str]:
    return {w for w in re.split(r"[^a-z0-9]+", text.lower()) if w}


def _adjacent(words: tuple[str, ...], text: str) -> bool:
    """Whether ``text`` says the words next to each other, in either order
    (four-letter stems: ``recv failed`` says ``failed_recving``)."""
    stems = [re.escape(w[:4]) + r"[a-z]*" for w in words]
    sep = r"[\s_\-]*"
    pattern = sep.join(stems) + "|" + sep.join(reversed(stems))
    return re.search(pattern, text.lower()) is not None


def _signals(words: tuple[tuple[str, ...], ...], message: str, function: str,
             methods: tuple[str, ...]) -> bool:
    """Whether a logging call says a report happened: its message or its
    function's name says the report's (or its carrier's) words, or the
    function is the one hook that makes this report."""
    short = _short(function)
    if short in methods:
        return True
    return any(_adjacent(w, message) or _adjacent(w, short) for w in words)


def build_code_index(analysis: Analysis) -> CodeIndex:
    """The ``CodeIndex`` of an analysis."""
    lk = analysis.linker
    g = analysis.graph
    protocol = lk.protocol
    life = protocol.lifecycle or {}
    id_fields = {f.lower() for f in life.get("id_fields", ())}
    flow = IdFlow(_lifecycle(lk), lk.model, id_fields)
    reports_spec: dict = life.get("reports", {}) or {}
    report_kinds = tuple(sorted(reports_spec))
    method_users: dict[str, int] = defaultdict(int)
    for spec in reports_spec.values():
        for m in spec.get("methods", ()):
            method_users[m] += 1
    # A hook that makes one report only says that report by running.
    own_methods = {r: tuple(m for m in spec.get("methods", ()) if method_users[m] == 1)
                   for r, spec in reports_spec.items()}
    # the words that say a report: its name's, and its carrier field's
    # (failed_blocks travels as invalid_block_ids)
    report_words: dict[str, tuple[tuple[str, ...], ...]] = {}
    for r, spec in reports_spec.items():
        ws = [tuple(r.split("_"))]
        if not any(c.attr == r for c in protocol.carriers):
            for c in protocol.carriers:
                if {_short(x) for x in c.sources} & set(spec.get("methods", ())):
                    ws.append(tuple(w for w in c.attr.split("_") if w not in ("ids", "id")))
        report_words[r] = tuple(ws)
    hook_names = {m for ms in protocol.methods.values() for m in ms}
    implements = {n: _short(str(d["implements"])) for n, d in g.nodes(data=True)
                  if d.get("implements")}
    for n, d in g.nodes(data=True):
        if n in implements:
            continue
        if d.get("hook") or (d.get("subject") and d.get("kind") == "function"
                             and _short(n) in hook_names):
            # a connector half's method named for a hook runs for that hook
            implements[n] = _short(n)
    callers: dict[str, list[str]] = defaultdict(list)
    for u, v, d in g.edges(data=True):
        if d.get("kind") in ("call", "dispatch"):
            callers[v].append(u)
    near_states: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for u, v, d in g.edges(data=True):
        if d.get("kind") == "sets_state":
            near_states[u].append((int(d.get("line") or 0), _short(v)))

    def hooks_of(fn: str) -> tuple[str, ...]:
        if fn in implements:
            return (implements[fn],)
        if fn not in g or not g.nodes[fn].get("subject"):
            return ()  # vLLM's own code is a step of its own, not under a hook
        seen, found = {fn}, set()
        todo = deque([(fn, 0)])
        while todo:
            cur, depth = todo.popleft()
            for c in callers.get(cur, ()):
                if c in seen:
                    continue
                seen.add(c)
                if c in implements:
                    found.add(implements[c])
                elif depth + 1 < HOOK_DEPTH:
                    todo.append((c, depth + 1))
        return tuple(sorted(found))

    markers: list[Marker] = []
    logs_of: dict[str, list[int]] = defaultdict(list)
    for module in sorted(lk.model.facts):
        ff = lk.model.facts[module]
        if not ff.logs:
            continue
        calls_at = {(c.scope, c.line, c.col): c for c in ff.calls}
        sf = lk.model.source(module)
        # the arguments as written, where the index's chains lose what the flow reads
        lossy = {(log.line, log.col) for log in ff.logs
                 if (lcall := calls_at.get((log.scope, log.line, log.col))) is not None
                 and needs_source(lcall.args[1:], log.message,
                                 string_placeholders(log.message, len(lcall.args) - 1))}
        written = logging_args(sf.path, lossy) if lossy and sf is not None else {}
        for log in ff.logs:
            fn = f"{module}.{log.scope}" if log.scope else module
            node = g.nodes[fn] if fn in g else {}
            call = calls_at.get((log.scope, log.line, log.col))
            args = call.args[1:] if call is not None else ()
            idargs = flow.id_args(fn, log.message, written.get((log.line, log.col), args)) \
                if call is not None else NONE
            # a state written just before the logging call is what the line reports
            states = sorted({s for ln, s in near_states.get(fn, ())
                             if 0 <= log.line - ln <= STATE_NEAR})
            reports = tuple(r for r in report_kinds
                            if _signals(report_words[r], log.message, fn, own_methods.get(r, ())))
            m = Marker(
                id=len(markers), module=module, function=fn,
                file=str(node.get("file") or (sf.rel if sf else "")),
                root=str(node.get("root") or (sf.root.label if sf else "")),
                line=log.line, level=LEVELS.get(log.level, log.level.upper()),
                message=log.message, nargs=len(args) if call is not None else -1,
                id_args=idargs.ids, related_args=idargs.related,
                hooks=hooks_of(fn), states=tuple(states), reports=reports,
                side=str(node.get("side") or protocol.side_of_module(module) or ""),
                id_how=idargs.how,
                caller_place=call is not None and any(k == "stacklevel" for k, _ in call.kwargs))
            markers.append(m)
            logs_of[fn].append(m.id)
    functions: dict[str, Function] = {}
    spawned = _spawned_targets(g)
    for n, d in g.nodes(data=True):
        if d.get("kind") != "function":
            continue
        calls = sorted(((v, int(e.get("line") or 0), str(e.get("kind")))
                        for _, v, e in g.out_edges(n, data=True) if e.get("kind") in _CALL_KINDS),
                       key=lambda c: (c[1], c[0], c[2]))
        functions[n] = Function(n, str(d.get("file") or ""), str(d.get("root") or ""),
                                int(d.get("line") or 0), tuple(calls), tuple(logs_of.get(n, ())),
                                implements.get(n, ""), n in spawned)
    kv_states = g.graph.get("kv_states") or []
    all_states = sorted({_short(n) for n, d in g.nodes(data=True) if d.get("kind") == "state"})
    commit = str(life.get("commit") or "")
    delay = life.get("delay_free") or {}
    parked: set[str] = set()
    view_hooks: dict[str, set[str]] = defaultdict(set)
    hook_stages: dict[str, str] = {}
    for view in protocol.views.values():
        for stage in view.stages:
            view_hooks[view.name].update(stage.hooks)
            for h in (*stage.hooks, *stage.functions):
                hook_stages.setdefault(h, f"{view.name}: {stage.label}")
            if commit and commit in stage.hooks:
                parked.update(s for s in stage.states if "*" not in s)
    delay_hooks = {str(delay.get("method"))} if isinstance(delay, dict) and delay.get("method") else set()
    # The hooks only the save story runs (save_kv_layer, wait_for_save): a
    # request that reached one is being sent, and its blocks are freed late.
    save_hooks = view_hooks.get("save", set()) - set().union(
        *(h for v, h in view_hooks.items() if v != "save")) - delay_hooks
    return CodeIndex(
        markers=markers, functions=functions,
        states=tuple(all_states or kv_states), parked_states=tuple(sorted(parked)),
        commit_hooks=(commit,) if commit else (),
        delay_free_hooks=tuple(sorted(delay_hooks)),
        save_hooks=tuple(sorted(save_hooks)), report_kinds=report_kinds, hook_stages=hook_stages,
        report_hooks={r: tuple(spec.get("methods", ())) for r, spec in sorted(reports_spec.items())},
        roots=list(g.graph.get("roots") or []), vllm_version=analysis.vllm_version)


def _lifecycle(linker) -> Lifecycle:
    """The lifecycle model of the analysed code: which names hold request
    ids, by data flow."""
    return build_lifecycle(linker)


def _spawned_targets(g: nx.MultiDiGraph) -> set[str]:
    """Functions handed to a thread or an executor: a ``ref`` call edge
    (the function used as a value) from a function that also calls a
    spawner-looking name (``submit``, ``Thread``, ``create_task``...)."""
    out: set[str] = set()
    spawny = ("submit", "Thread", "create_task", "run_in_executor", "ensure_future",
              "add_done_callback", "call_soon_threadsafe", "run_coroutine_threadsafe")
    for n in g.nodes:
        edges = list(g.out_edges(n, data=True))
        if not any(_short(v) in spawny for _, v, _d in edges):
            continue
        for _, v, d in edges:
            if d.get("kind") == "call" and (d.get("ref") or any(
                    _short(w) in spawny and e.get("line") == d.get("line")
                    for _, w, e in edges)):
                out.add(v)
    return out
