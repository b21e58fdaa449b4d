"""``lifecycle`` mode ``parked_recorded``: a request the probe asks to load
is recorded by the commit hook.

When ``get_num_new_matched_tokens`` answers ``load_kv_async=True``, vLLM
parks the request in ``WAITING_FOR_REMOTE_KVS`` and calls
``update_state_after_alloc`` with its blocks; only what that hook records
(for the metadata the workers load from) ever leads to ``finished_recving``.
A commit hook that records the request on no path at all, in a class whose
probe can ask for a load (``True``, or a token count that is not a literal
0), parks every async load forever, and leaves a synchronous one unloaded.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.lifecycle._shared import functions, lifecycle, short
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option
from kvflowmap.lifecycle.effects import HANDLING

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
    probe_name, commit_name, idx = lc.spec.probe, lc.spec.commit, lc.spec.async_element
    out = []
    classes = sorted({fn.cls for f, fn in lc.functions.items() if f in wanted and fn.cls})
    for cls in classes:
        probe = ctx.classes.find_member(cls, probe_name)
        commit = ctx.classes.find_member(cls, commit_name)
        if commit is None or probe is None or commit.rpartition(".")[0] != cls:
            continue  # judged once, in the class that defines the commit hook
        if commit not in lc.functions or probe not in lc.functions:
            continue
        parks = _async_returns(lc, probe, idx, opts.never_async)
        if not parks:
            continue
        if _records(lc, commit) or _records(lc, probe):
            continue  # the commit hook records; or the design records in the probe
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
    fn = lc.functions[fqn]
    return any(e.kind in HANDLING and e.kind != "return"
               for s in fn.stmts for e in lc.effects.of(fn, s))


def _async_returns(lc, probe: str, idx: int, never: tuple[str, ...]) -> list[int]:
    """Lines where the probe returns a tuple that asks for a load: its async
    element is not a literal 'no' (``return n, True``), or its token count is
    not a literal nothing (``return hit - computed, False``: a synchronous load
    the commit hook must record just the same)."""
    fn = lc.functions[probe]
    lines = []
    for r in fn.all_returns:
        if not r.elements or idx >= len(r.elements):
            continue
        count = r.elements[0].strip() if idx != 0 else ""
        if r.elements[idx].strip() not in never or count not in ("0", "None", ""):
            lines.append(r.line)
    return lines
