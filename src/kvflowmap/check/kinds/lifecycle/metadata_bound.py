"""``lifecycle`` mode ``metadata_bound``: a hook the analysed vLLM may call
with no step metadata bound tests it before reading it
(``kvflowmap.lifecycle.metadata_bound``).

Up to vLLM 0.12 the attention layers called ``save_kv_layer`` and
``wait_for_layer_load`` testing only the attention metadata; a
speculative-decoding drafter runs them after the step's connector metadata
is cleared, and ``_get_connector_metadata()`` asserts. LMCache 0.3.6 and
uc-manager 0.5.0 added the test; vLLM 0.13 added it to the caller.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.lifecycle._shared import lifecycle, short
from kvflowmap.check.model import Finding
from kvflowmap.lifecycle.metadata_bound import (UnboundCall, UnguardedRead, binds,
                                                unbound_calls, unguarded_reads)
from kvflowmap.lifecycle.view import FnView, view

READS = ("Reads: the protocol's entry points in the analysed vLLM (their calls of the "
         "hooks, and whether they, or their class, bind the step metadata or test it "
         "first: the protocol's `metadata` names); every connector class's implementation "
         "of a hook called unbound, and the call and dispatch edges from it into the "
         "subject, four deep; the calls of the metadata reader there and the `if` tests "
         "of a guard on the way.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``metadata_bound`` (the names come
    from the protocol's ``lifecycle.metadata``)."""


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per read of the step metadata, reached from a hook vLLM
    may call with none bound, that no function on the way tests first."""
    spec = lifecycle(ctx).spec
    model = ctx.model
    views: dict[str, FnView | None] = {}

    def fn_of(fqn: str) -> FnView | None:
        if fqn not in views:
            views[fqn] = view(model, fqn)
        return views[fqn]

    entries = [v for side in ctx.protocol.entry_points.values() for f in side
               if (v := fn_of(f)) is not None]
    methods: dict[str, list[str]] = {}
    for fqn, d in model.defs.items():
        if not d.is_class:
            methods.setdefault(fqn.rpartition(".")[0], []).append(fqn)

    def binds_in_class(cls: str) -> bool:
        return any((v := fn_of(m)) is not None and binds(v, spec.metadata_binder)
                   for k in ctx.classes.mro(cls) for m in methods.get(k, ()))

    unbound = unbound_calls(entries, spec.hooks, spec.metadata_binder, spec.metadata_guards,
                            binds_in_class)
    if not unbound:
        return []
    base = ctx.protocol.base_class
    starts: dict[str, UnboundCall] = {}
    for cls in sorted(ctx.classes.all_subclasses(base)):
        for hook, call in unbound.items():
            impl = ctx.classes.find_member(cls, hook)
            if impl and impl.rpartition(".")[0] != base:
                starts.setdefault(impl, call)
    graph = ctx.graph

    def callees(f: str) -> list[str]:
        if f not in graph:
            return []
        return sorted({g for _, g, d in graph.out_edges(f, data=True)
                       if d.get("kind") in ("call", "dispatch")})

    def is_subject(f: str) -> bool:
        d = model.defs.get(f)
        sf = model.source(d.module) if d is not None else None
        return bool(sf and sf.subject)

    reads = unguarded_reads(starts, callees, fn_of, is_subject, spec.metadata_reader,
                            spec.metadata_guards)
    return [_finding(ctx, r, spec.metadata_reader, spec.metadata_guards[0]) for r in reads]


def _finding(ctx: CheckContext, r: UnguardedRead, reader: str, guard: str) -> Finding:
    c = r.call
    via = "" if r.fqn == r.hook else f" (from {short(r.hook)})"
    msg = (f"{short(r.fqn)} reads the step metadata with `{reader}()`{via}, but the "
           f"analysed vLLM calls `{c.hook}` in {short(c.caller)} with no metadata bound or "
           f"tested: a forward pass outside the step (a speculative-decoding drafter's "
           f"layers run after the metadata is cleared) raises there, inside the model. "
           f"Return early when `self.{guard}()` is False")
    path = (ctx.step(c.caller, c.line, f"vLLM calls `{c.hook}` with nothing bound or tested"),
            *(ctx.step(f, _line(ctx, f), "on the way") for f in r.chain[:-1]),
            ctx.step(r.fqn, r.line, f"`{reader}()` asserts the metadata is bound"))
    return ctx.finding(r.fqn, r.line, msg, path=path, anchor=f"metadata-unbound:{c.hook}")


def _line(ctx: CheckContext, fqn: str) -> int:
    d = ctx.model.defs.get(fqn)
    return d.fact.line if d is not None else 0
