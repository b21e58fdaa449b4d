"""Version-guarded code of one connector method on one release: the release's
answers to the method's guards (``branches.Oracle``), the uses that fail on
it settled against the branch that runs, and a note for each guard that picks
another branch on another release of the run."""

from __future__ import annotations

import builtins
import re
from collections.abc import Iterable

from kvflowmap.check.kinds.conforms_contract import method_kind
from kvflowmap.compat.branches import Branches, Oracle, Problem, decide, resolve
from kvflowmap.compat.context import Run
from kvflowmap.compat.findings import Finding
from kvflowmap.compat.model import Method, Surface
from kvflowmap.facts import FunctionFact
from kvflowmap.model.version_tests import VLLM_VERSION_NAMES


def contract_method(run: Run, surface: Surface, name: str) -> Method | None:
    """Base method ``name`` of the class's contract in ``surface`` (any release of the run)."""
    for b in run.bases:
        for k in surface.mro(b):
            m = surface.method(k, name)
            if m is not None:
                return m
    return None


def _members(run: Run, surface: Surface) -> set[str]:
    return {n for b in run.bases for k in surface.mro(b)
            for n in (*surface.classes[k].methods, *surface.classes[k].members)}


def oracle(run: Run, surface: Surface, module: str, fn: FunctionFact) -> Oracle:
    """What ``surface`` answers to the guards of method ``fn``."""
    kind = method_kind(fn)
    params = [p.name for p in (fn.params if kind == "static" else fn.params[1:])]
    me = fn.params[0].name if fn.params and kind != "static" else "self"
    base = contract_method(run, surface, fn.name)
    names = run.code.names[module]
    envs = {local for local, fqn in names.table.items() if fqn == f"{run.protocol.package}.envs"}
    all_surfaces = [run.surface, *run.others]
    here = _members(run, surface) | run.code.members(run.cls)
    known = {n for s in all_surfaces for n in _members(run, s)}

    def heads_in(s: Surface, param: str) -> tuple[str, ...] | None:
        m = base if s is surface else contract_method(run, s, fn.name)
        if m is None or param not in params:
            return None
        i = params.index(param)
        return m.heads[i] if i < len(m.heads) else None

    def heads_of(param: str) -> tuple[str, ...] | None:
        return heads_in(surface, param)

    def isinstance_of(param: str, types: tuple[str, ...]) -> bool | None:
        heads = heads_of(param)
        if not heads:
            return None
        shorts = {t.rpartition(".")[2] for t in types}
        for h in heads:
            line = surface.mro(h) if h in surface.classes else [h]
            if any(k.rpartition(".")[2] in shorts for k in line):
                return True
        if _builtin(heads):
            return False  # a set is none of the connector's or vLLM's classes
        for t in types:  # a subclass of what the release passes: it may or may not be one
            fqn = names.fqn(t)
            if fqn in run.code.classes or "." in fqn and run.canon(fqn) not in surface.classes:
                return None
            if run.canon(fqn) in surface.classes and set(heads) & set(
                    surface.mro(run.canon(fqn))):
                return None
        return False

    def is_none(param: str) -> bool | None:
        """``param is None`` on the release: the base does not pass it (the
        override's default runs), or passes a value its annotation says is not None."""
        if param not in params or base is None:
            return None
        mine = next(p for p in (fn.params if kind == "static" else fn.params[1:])
                    if p.name == param)
        i = params.index(param)
        known = {p.name for p in base.params}
        if param not in known and i >= len(base.params) and mine.default == "None":
            return True
        heads = heads_of(param) if i < len(base.params) else None
        b = base.params[i] if heads else None
        if heads and "None" not in heads and b is not None and b.default is None:
            return False
        return None

    def present(name: str, here_: set[str], known_: Iterable[str]) -> bool | None:
        return True if name in here_ else (False if name in set(known_) else None)

    def hasattr_of(obj: str, name: str) -> bool | None:
        if obj in (me, "super()"):
            return present(name, here, known)
        if obj in envs and surface.envs:
            return present(name, set(surface.envs), (n for s in all_surfaces for n in s.envs))
        if obj in params:
            return _param_has(heads_of(obj), name,
                              [heads_in(s, obj) for s in all_surfaces if s is not surface])
        holder = _holder_class(run, obj)
        if holder is not None and holder in surface.configs:
            return present(name, set(surface.configs[holder]),
                           (n for s in all_surfaces for n in s.configs.get(holder, {})))
        return None

    def is_vllm_version(dotted: str) -> bool:
        fqn = names.fqn(dotted)
        if fqn in VLLM_VERSION_NAMES:
            return True
        low = dotted.lower()
        return "vllm" in low and "version" in low and not fqn.startswith(
            tuple(f"{m}." for m in run.code.facts))  # a connector's own version is not vLLM's

    return Oracle(surface.version, isinstance_of, hasattr_of, is_vllm_version, is_none)


def _builtin(heads: tuple[str, ...] | None) -> bool:
    return bool(heads) and all("." not in h and hasattr(builtins, h) for h in heads or ())


def _param_has(heads: tuple[str, ...] | None, name: str,
               elsewhere: list[tuple[str, ...] | None]) -> bool | None:
    """``hasattr(param, name)`` where the release passes ``heads``: a builtin
    answers for itself; an object where another release passes a builtin
    without ``name`` has it (the test tells the two forms apart); else unknown."""
    if heads and _builtin(heads):
        return all(hasattr(getattr(builtins, h), name) for h in heads)
    if heads and any(_builtin(h) and not _param_has(h, name, []) for h in elsewhere):
        return True
    return None


def _holder_class(run: Run, obj: str) -> str | None:
    """The config class ``obj`` holds (``vllm_config.kv_transfer_config`` ->
    ``KVTransferConfig``)."""
    return config_holders(run).get(obj.rpartition(".")[2])


def config_holders(run: Run) -> dict[str, str]:
    """Field name -> config class it holds (``kv_transfer_config`` ->
    ``KVTransferConfig``), from the config classes' annotations in any release."""
    memo = run.shared.get("holders")
    if memo is not None:
        return memo
    out: dict[str, str] = {}
    for s in (run.surface, *run.others):
        shorts = {k.rpartition(".")[2]: k for k in s.configs}
        for fields in s.configs.values():
            for f in fields.values():
                for short, fqn in shorts.items():
                    if re.search(rf"\b{short}\b", f.annotation or ""):
                        out.setdefault(f.name, fqn)
    run.shared["holders"] = out
    return out


def branches(run: Run, module: str, fn: FunctionFact) -> Branches:
    """The guards of ``fn`` decided for the run's release (memoised on the run)."""
    key = (module, fn.qualname)
    memo = run.memo.setdefault("branches", {})
    if key not in memo:
        memo[key] = decide(fn, oracle(run, run.surface, module, fn))
    return memo[key]


def settle(run: Run, module: str, fn: FunctionFact, problems: list[Problem]) -> list[Finding]:
    """The findings of ``problems`` (uses of ``fn`` that fail on the release):
    an error each, unless a guard keeps it from running (then a guarded note)."""
    out: list[Finding] = []
    b = branches(run, module, fn)

    def same_line(p: Problem) -> bool:
        text = run.code.source_line(module, p.line)
        return bool(p.member) and ("hasattr(" in text or "getattr(" in text) and \
            any(f"{q}{p.member}{q}" in text for q in "\"'")
    for p, why in resolve(b, problems, same_line):
        if why is None:
            out.append(run.finding(p.severity, p.kind, p.message, module, p.line, p.base_where))
        else:
            out.append(run.finding("guarded", "guarded", f"{p.message}; accepted: {why}",
                                   module, p.line, p.base_where))
    return out


def guard_notes(run: Run, module: str, fn: FunctionFact) -> list[Finding]:
    """A guarded note for each guard of ``fn`` that takes one branch on this
    release and another on another release of the run."""
    mine = branches(run, module, fn)
    if not mine.guards:
        return []
    others = [decide(fn, oracle(run, s, module, fn)) for s in run.others]
    out: list[Finding] = []
    for g in mine.guards:
        if g.kind == "isinstance":
            continue  # said with the parameter's annotations (checks._guarded_change)
        there = [x.taken for o in others for x in o.guards if x.line == g.line]
        if not any(t is not None and t != g.taken for t in there):
            continue
        base = run.base_of(fn.name)
        out.append(run.finding("guarded", "guarded", f"{fn.name}: "
                               f"{g.describe(run.surface.version)}", module, g.line,
                               base.where if base else None))
    return out


def check_guards(run: Run) -> list[Finding]:
    """The guards (``hasattr``, version tests) of the class's methods that take
    another branch on another release of the run: which one runs on this one."""
    out: list[Finding] = []
    for _, (module, fn) in sorted(run.reported.items()):
        out += guard_notes(run, module, fn)
    return out
