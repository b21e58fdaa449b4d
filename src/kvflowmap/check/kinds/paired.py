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

from kvflowmap.check.cfg import CFG
from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds._paired_class import check_class
from kvflowmap.check.kinds._paired_model import Edge, Resource
from kvflowmap.check.kinds._paired_spec import PARAMS, Spec
from kvflowmap.check.kinds._paired_summary import Summaries
from kvflowmap.check.kinds._paired_text import clear_cache
from kvflowmap.check.model import Finding, Step

__all__ = ["PARAMS", "check"]

_EXIT_NOTES = {
    "return": "returns", "end": "reaches the end of the function",
    "raise": "raises", "exception": "a call raises", "assert": "the assertion fails",
}


def check(ctx: CheckContext) -> list[Finding]:
    """Findings of one ``paired`` rule over the rule's target functions."""
    spec = Spec.from_params(ctx.rule.params)
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
        path = (trace.normal if spec.on_return else None) or \
               (trace.exceptional if spec.on_exception else None)
        seen[r.what] = seen.get(r.what, 0) + 1
        if path is None:
            continue
        anchor = f"{r.what}:{fqn}" + (f"#{seen[r.what]}" if seen[r.what] > 1 else "")
        out.append(ctx.finding(fqn, r.line, _message(spec, r, sites.cfg, path),
                               column=r.col, path=_steps(ctx, spec, fqn, sites.cfg, r, path),
                               anchor=anchor))
    return out


def _how(cfg: CFG, path: list[Edge]) -> str:
    """How the path leaves: the exception that starts it going wrong (if
    any) and the exit (the return statement's line, not a finally copy's)."""
    jump = next((e for e in path if e[1] in ("raise", "exception", "assert")
                 and cfg.nodes[e[0]].kind == "stmt"), None)
    origin = {"raise": "the exception raised at line {}",
              "exception": "an exception from the call at line {}",
              "assert": "the assertion at line {} fails and its exception"}
    if path[-1][2] == cfg.raise_exit:
        src, label, _ = jump or path[-1]
        return origin.get(label, "an exception from line {}").format(cfg.nodes[src].line) + \
            " leaves the function"
    rets = [cfg.nodes[s] for s, _, _ in path if cfg.nodes[s].stmt is not None
            and cfg.nodes[s].stmt.kind == "return"]
    end = f"the function returns at line {rets[-1].line}" if rets else \
        f"the function ends after line {cfg.nodes[path[-1][0]].line}"
    if jump is None:
        return end
    caught = origin[jump[1]].format(cfg.nodes[jump[0]].line).replace(" and its exception", "")
    return f"{caught} is caught and {end}"


def _message(spec: Spec, r: Resource, cfg: CFG, path: list[Edge]) -> str:
    verb = "added to" if r.kind == "container" else "acquired by"
    key = f"[{r.key}]" if r.kind == "container" and r.key else ""
    return (f"{spec.resource} {verb} `{r.what}{key}` at line {r.line} is neither released "
            f"nor handed over when {_how(cfg, path)}")


def _steps(ctx: CheckContext, spec: Spec, fqn: str, cfg: CFG, r: Resource,
           path: list[Edge]) -> tuple[Step, ...]:
    verb = "added to" if r.kind == "container" else "acquired by"
    steps = [ctx.step(fqn, r.line, f"{spec.resource} {verb} `{r.what}`")]
    for src, label, dst in path:
        node, target = cfg.nodes[src], cfg.nodes[dst]
        note = _edge_note(node.stmt.kind if node.stmt else "", node.stmt.text if node.stmt else
                          None, label, node.kind)
        if target.kind == "with-exit":
            note = (note + "; " if note else "") + "leaves the `with` block (__exit__ runs)"
        if note and node.kind != "entry":
            step = ctx.step(fqn, node.line, note)
            if not steps or (steps[-1].line, steps[-1].note) != (step.line, step.note):
                steps.append(step)
    last = path[-1]
    exit_line = cfg.nodes[last[0]].line
    how = "by an exception" if last[2] == cfg.raise_exit else "normally"
    steps.append(ctx.step(fqn, exit_line, f"leaves {fqn.rpartition('.')[2]}() {how} "
                                          f"still holding the {spec.resource}"))
    return tuple(steps)


def _edge_note(kind: str, text: str | None, label: str, node_kind: str) -> str:
    if node_kind == "with-exit":
        return ""
    if label in ("true", "false") and kind in ("for", "while") :
        return (f"enters the loop `{text}`" if label == "true" else f"leaves the loop `{text}`")
    if label in ("true", "false"):
        return f"`{text}` is {label}"
    if label == "case":
        return "takes a `case`"
    if label == "no-match":
        return "no `case` matches"
    if label in ("break", "continue"):
        return label
    return _EXIT_NOTES.get(label, "")
