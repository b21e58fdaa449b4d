"""``lifecycle`` mode ``asserted``: a hook does not assert that a request's
entry is still in a container another path takes entries out of
(``kvflowmap.lifecycle.asserted``).

``v = c.pop(req_id, None); assert v is not None`` crashes the hook, and with
it the engine and every request on it, for the request whose entry a
failure handler, a preemption arm or an abort already removed.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.lifecycle._shared import TEARDOWN, functions, lifecycle, short, steps
from kvflowmap.check.model import Finding
from kvflowmap.check.options import option
from kvflowmap.lifecycle.asserted import Asserted

READS = ("Reads: in every connected subject function but constructors and teardown, the "
         "`assert` statements whose test claims an entry of a request-keyed container is "
         "there (a local read from it with a default, `c.get(k)` or `c.pop(k, None)`, "
         "asserted truthy or not None; or `k in c`), the `del c[k]` and `c.pop(k)` with no "
         "default, and the removals (pops, `del`, "
         "discards, clears) other functions make from that container.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``asserted``."""

    teardown_methods: tuple[str, ...] = option(
        (*TEARDOWN, "*reset_cache"), "teardown methods (globs): their removals end every "
        "request at once (vLLM resets the connector's cache only with no request running)")


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """Per assert of an entry another function removes, one finding at the
    assert and one at each removal: a fix keeps the entry where it is
    removed, or lets the asserting code handle its absence, and either
    place is where a reader starts."""
    lc = lifecycle(ctx)
    wanted = set(functions(ctx, lc))
    by_fn: dict[str, list[tuple[str, Asserted]]] = {}
    found = lc.asserted(opts.teardown_methods)
    for a in found:
        if a.remover in wanted and a.claim != "del-unadded":
            by_fn.setdefault(a.remover, []).append(("remover", a))
    for a in {(a.fqn, a.line): a for a in found}.values():
        if a.fqn in wanted:
            by_fn.setdefault(a.fqn, []).append(("assert", a))

    def one(f: str) -> list[Finding]:
        out = []
        for role, a in by_fn[f]:
            label = a.container.label
            if a.claim == "del-unadded" and role == "assert":
                out.append(_unadded(ctx, f, a, [r for r in found if (r.fqn, r.line) ==
                                                 (a.fqn, a.line)]))
                continue
            if a.claim == "del":
                claims, error = f"removes the request's entry from {label} (no default), assuming it", \
                    "KeyError"
                step, other = "removes it (no default), assuming it is there", \
                    "removes that entry (no default) without checking it is there"
            else:
                claims, error = f"asserts that the request's entry in {label}", "AssertionError"
                step, other = "asserts it is there", "asserts that entry is still there"
            if role == "assert":
                removers = sorted({(r.remover, r.remover_line) for r in found
                                   if (r.fqn, r.line) == (a.fqn, a.line)})
                where = ", ".join(f"{short(g)} (line {ln})" for g, ln in removers)
                out.append(ctx.finding(
                    f, a.line,
                    f"{short(f)} {claims} is there, but "
                    f"{where} takes entries out of it: for a request that went that way this "
                    f"fails, and the {error} ends the hook (or the thread or task running it, "
                    "and every request it would serve). Handle the missing entry (skip it, "
                    "`pop(k, None)`, or report the request failed) instead of assuming it.",
                    path=steps(ctx, f, _claim_steps(a, label, step)) +
                    tuple(s for g, ln in removers
                          for s in steps(ctx, g, [(ln, f"removes entries of {label}")])),
                    anchor=f"asserted:{label}"))
                continue
            out.append(ctx.finding(
                f, a.remover_line,
                f"{short(f)} takes a request's entry out of {label} here, but "
                f"{short(a.fqn)} {other} (line {a.line}): for a "
                f"request that went this way that fails, and the {error} ends that hook (or "
                "the thread or task running it). Keep the entry until "
                "the asserting code is done with it (read it with .get() here), or make "
                "that code handle a missing entry instead of asserting it.",
                path=steps(ctx, f, [(a.remover_line, f"removes the entry from {label}")]) +
                steps(ctx, a.fqn, _claim_steps(a, label, step)),
                anchor=f"asserted-removal:{label}:{short(a.fqn)}"))
        return out

    return each_function(ctx, sorted(by_fn), one)


def _unadded(ctx: CheckContext, f: str, a: Asserted, adders: list[Asserted]) -> Finding:
    """The finding at a ``del`` where the request ends, of an entry only
    earlier hooks put in."""
    label = a.container.label
    where = ", ".join(sorted({f"{short(r.remover)} (line {r.remover_line})" for r in adders}))
    return ctx.finding(
        f, a.line,
        f"{short(f)} removes the request's entry from {label} with no default (`del` or "
        "`pop(<id>)`), assuming it is there, but "
        f"only {where} puts entries in, and the request ends here whether or not that ran "
        "(a request aborted while waiting, or one no earlier hook recorded): for it the "
        "KeyError ends the hook, and with it the scheduler. Remove it with "
        "`pop(<id>, None)` instead.",
        path=steps(ctx, f, [(a.line, "removes it (no default), assuming it is there")]) +
        tuple(s for r in adders
              for s in steps(ctx, r.remover, [(r.remover_line, f"puts an entry in {label} "
                                               "(only here)")])),
        anchor=f"asserted-unadded:{label}")


def _claim_steps(a: Asserted, label: str, step: str) -> list[tuple[int, str]]:
    """The read of the entry (when apart from the claim) and the claim."""
    read = [(a.fetch_line, f"reads the entry of {label}")] if a.fetch_line != a.line else []
    return [*read, (a.line, step)]
