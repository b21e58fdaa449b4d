"""``paired``: what is acquired is released or handed over on every path.

Scope ``function`` (the default): for each acquisition in a target function
(an acquire call, or an entry added to a named container), search the
function's control-flow graph (branches, loops, early returns, ``raise``,
``assert``, ``try/except/else/finally``, ``with``, and an exception edge from
every statement that calls something) for a path to an exit on which the
resource is neither released nor handed over. Each acquisition with such a
path is one finding; its path lists the acquisition, the branches and
exception edges taken, and the exit. Called helpers count through summaries
(see ``_paired_summary``). Resources that live across methods (an id put into
a pending container by one hook and removed by another) are the ``reach``
kind's job; ``scope: class`` only checks that such a container is emptied by
some method (see ``_paired_class``).

What it does not do: track values through data structures other than local
aliases, containers and attributes (``paired`` is deliberately loose there: a
statement that mentions the resource by name is taken to act on it), or prove
that two branches are exclusive beyond ``x is None`` / ``not x`` tests.
"""

from __future__ import annotations

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds._paired_class import check_class
from kvflowmap.check.kinds._paired_model import FAILING, Edge, Resource
from kvflowmap.check.kinds._paired_sites import FunctionSites
from kvflowmap.check.kinds._paired_spec import READS, Options, Spec
from kvflowmap.check.kinds._paired_summary import Summaries
from kvflowmap.check.kinds._paired_text import clear_cache
from kvflowmap.check.kinds.spec import KindSpec
from kvflowmap.check.model import Finding, Step
from kvflowmap.facts import Stmt

__all__ = ["SPEC", "Options", "check"]

def check(ctx: CheckContext, spec: Spec) -> list[Finding]:
    """Findings of one ``paired`` rule over the rule's target functions."""
    clear_cache()
    summaries = Summaries(ctx, spec)
    if spec.scope == "class":
        return check_class(ctx, spec)
    return each_function(ctx, ctx.target_functions,
                         lambda fqn: _check_function(ctx, spec, summaries, fqn))


def _check_function(ctx: CheckContext, spec: Spec, summaries: Summaries,
                    fqn: str) -> list[Finding]:
    sites = summaries.sites(fqn)
    out: list[Finding] = []
    seen: dict[str, int] = {}
    for r in sorted(sites.acquires(), key=lambda r: (r.line, r.col, r.what)):
        trace = sites.trace(r)
        if r.released_on_failure:
            path = trace.exceptional
        else:
            path = (trace.normal if spec.on_return else None) or \
                   (trace.exceptional if spec.on_exception or r.held_on_entry else None)
        seen[r.what] = seen.get(r.what, 0) + 1
        if path is None:
            continue
        # Stable across unrelated edits: no line, an ordinal for repeats.
        anchor = f"{r.what}:{fqn}" + (f"#{seen[r.what]}" if seen[r.what] > 1 else "")
        line, col = (_failing_line(sites, path), 0) if r.released_on_failure else (r.line, r.col)
        out.append(ctx.finding(fqn, line, _message(spec, r, sites, path), column=col,
                               path=_steps(ctx, spec, fqn, sites, r, path), anchor=anchor))
    return out


def _failing_line(sites: FunctionSites, path: list[Edge]) -> int:
    """Where a failure exit misses the release: the ``except`` handler's
    return the path ends at, else its last raise or assert."""
    cfg = sites.cfg
    if path[-1][2] not in (cfg.exit, cfg.raise_exit):
        return cfg.nodes[path[-1][2]].line
    fails = [cfg.nodes[e[0]].line for e in path if e[1] in ("raise", "assert")
             and cfg.nodes[e[0]].kind == "stmt"]
    return fails[-1] if fails else cfg.nodes[path[-1][0]].line


def _raiser(sites: FunctionSites, node: int) -> str:
    """```callee``` of the first call of a node that may raise ('' if none)."""
    stmt = sites.cfg.nodes[node].stmt
    for i in sites.events(stmt, "call") if stmt is not None else ():
        if sites.call_may_raise(i):
            return f"`{sites.ff.calls[i].callee or 'a call'}`"
    return ""


def _how(sites: FunctionSites, path: list[Edge]) -> str:
    """How the path leaves: the exception that starts it going wrong (if
    any) and the exit (the return statement's line, not a finally copy's)."""
    cfg = sites.cfg
    origin = _origin(sites, path)
    if path[-1][2] == cfg.raise_exit:
        return f"{origin or 'an exception'} leaves the function"
    rets = [cfg.nodes[s] for s, _, _ in path if (st := cfg.nodes[s].stmt) is not None
            and st.kind == "return"]
    end = f"the function returns at line {rets[-1].line}" if rets else \
        f"the function ends after line {cfg.nodes[path[-1][0]].line}"
    return f"{origin.replace(' and its exception', '')} is caught and {end}" if origin else end


def _origin(sites: FunctionSites, path: list[Edge]) -> str:
    """The exception that starts the path going wrong ('' if none)."""
    cfg = sites.cfg
    jump = next((e for e in path if e[1] in FAILING and cfg.nodes[e[0]].kind == "stmt"), None)
    if jump is None:
        return ""
    line = cfg.nodes[jump[0]].line
    return {"raise": f"the exception raised at line {line}",
            "assert": f"the assertion at line {line} fails and its exception",
            "exception": f"an exception from {_raiser(sites, jump[0]) or 'the call'} "
                         f"at line {line}"}[jump[1]]


def _held(r: Resource, sites: FunctionSites) -> str:
    """How the resource came to be held, for messages and the first step."""
    if r.released_on_failure:
        name = r.what.partition("(")[2].rstrip(")")
        how = "received in" if r.node == sites.cfg.entry else "bound to"
        return f"{how} `{name}`, released by `{r.what}` before the failure exit at line " \
               f"{r.released_on_failure}"
    if r.node == sites.cfg.entry:
        return f"received in parameter `{r.what}`"
    key = f"[{r.key}]" if r.kind == "container" and r.key else ""
    return f"{'added to' if r.kind == 'container' else 'acquired by'} `{r.what}{key}`"


def _message(spec: Spec, r: Resource, sites: FunctionSites, path: list[Edge]) -> str:
    if r.released_on_failure:
        end = path[-1][2]
        how = _how(sites, path) if end in (sites.cfg.exit, sites.cfg.raise_exit) else \
            f"{_origin(sites, path) or 'a failure'} is caught and the handler returns at " \
            f"line {sites.cfg.nodes[end].line}"
        return (f"`{r.what}` runs before the failure exit at line {r.released_on_failure}, but "
                f"not when {how}: the {spec.resource} the function releases when it gives up "
                f"there is lost here")
    return (f"{spec.resource} {_held(r, sites)} at line {r.line} is neither released "
            f"nor handed over when {_how(sites, path)}")


def _steps(ctx: CheckContext, spec: Spec, fqn: str, sites: FunctionSites, r: Resource,
           path: list[Edge]) -> tuple[Step, ...]:
    """The acquisition, each branch / loop / jump / exception taken, the exit."""
    cfg = sites.cfg
    steps = [ctx.step(fqn, r.line, f"{spec.resource} {_held(r, sites)}")]
    for src, label, dst in path:
        node, target = cfg.nodes[src], cfg.nodes[dst]
        note = "" if node.kind in ("entry", "with-exit") else _edge_note(node.stmt, label)
        if label == "exception" and node.kind == "stmt":
            note = f"{_raiser(sites, src) or 'a call'} raises"
        if target.kind == "with-exit":
            note = (note + "; " if note else "") + "leaves the `with` block (__exit__ runs)"
        step = ctx.step(fqn, node.line, note)
        if note and (steps[-1].line, steps[-1].note) != (step.line, step.note):
            steps.append(step)
    end = path[-1][2]
    if end not in (cfg.exit, cfg.raise_exit):  # a handler's return, a failure exit
        steps.append(ctx.step(fqn, cfg.nodes[end].line, f"the `except` handler returns still "
                              f"holding the {spec.resource}"))
        return tuple(steps)
    how = "by an exception" if end == cfg.raise_exit else "normally"
    steps.append(ctx.step(fqn, cfg.nodes[path[-1][0]].line,
                          f"leaves {fqn.rpartition('.')[2]}() {how} still holding the "
                          f"{spec.resource}"))
    return tuple(steps)


def _edge_note(stmt: Stmt | None, label: str) -> str:
    kind, text = (stmt.kind, stmt.text) if stmt is not None else ("", None)
    if label in ("true", "false") and kind in ("for", "while"):
        return f"enters the loop `{text}`" if label == "true" else f"leaves the loop `{text}`"
    if label in ("true", "false"):
        return f"`{text}` is {label}"
    notes = {"case": "takes a `case`", "no-match": "no `case` matches", "break": "break",
             "continue": "continue", "return": "returns", "raise": "raises",
             "assert": "the assertion fails"}
    return notes.get(label, "")


SPEC = KindSpec(Options, check, READS)
