"""The log markers page: every logging call in the flow's functions, with
its message, grouped by the protocol step that reaches it. These are the
strings to grep for in a live system's logs."""

from __future__ import annotations

from collections import defaultdict

from kvflowmap.docs import flowinfo
from kvflowmap.docs.context import DocContext
from kvflowmap.docs.markup import code, page, table
from kvflowmap.facts import LogFact

PAGE = "log-markers.md"


def flow_functions(ctx: DocContext) -> dict[str, str]:
    """Function -> step name for the functions of the flow: what the protocol
    methods of the subject connectors reach in their own package, then the
    other flow-marked connector code, then vLLM's flow code in the modules the
    protocol assigns to a side (vLLM's own connectors are left out)."""
    g, lk = ctx.g, ctx.lk
    out = flowinfo.steps_of(g, lk)
    for n, d in sorted(g.nodes(data=True)):
        in_flow = d.get("flow") or (d.get("connector") and d.get("subject"))
        if n in out or not in_flow or d.get("kind") != "function" or d.get("role") == "module":
            continue
        if d.get("subject"):
            out[n] = "other connector code in the flow"
        else:
            df = lk.model.defs.get(n)
            side = lk.protocol.side_of_module(df.module) if df is not None else None
            if side:
                out[n] = f"vLLM {side} side"
    return out


def log_markers(ctx: DocContext) -> dict[str, list[tuple[str, LogFact]]]:
    """Step -> [(function, log fact)] in step order, then by place."""
    lk = ctx.lk
    by_scope: dict[tuple[str, str], list[LogFact]] = defaultdict(list)
    for module, ff in lk.model.facts.items():
        for log in ff.logs:
            by_scope[(module, log.scope)].append(log)
    groups: dict[str, list[tuple[str, LogFact]]] = defaultdict(list)
    for fn, step in flow_functions(ctx).items():
        d = lk.model.defs.get(fn)
        if d is not None and not d.is_class:
            groups[step] += [(fn, log) for log in by_scope.get((d.module, d.fact.qualname), [])]
    order = [m for _, m in flowinfo.protocol_methods(lk)]
    ranked = sorted((s for s in groups if groups[s]),
                    key=lambda s: (order.index(s) if s in order else len(order), s))
    return {s: sorted(groups[s], key=lambda x: (x[0], x[1].line)) for s in ranked}


def logmarkers_page(ctx: DocContext) -> bytes:
    """Markdown of the log markers page."""
    markers = log_markers(ctx)
    total = sum(len(v) for v in markers.values())
    body = [f"{total} logging calls in the functions of the flow, grouped by the protocol "
            "method whose implementation reaches them (vLLM's own flow code last). "
            "`%s`-style placeholders are shown as written; grep for the fixed parts.", ""]
    side = {m: s for s, m in flowinfo.protocol_methods(ctx.lk)}
    titles = {s: f"{s} ({side[s]} side)" if s in side else s for s in markers}
    if markers:
        body += ["Steps: " + ", ".join(f"[{s}](#{_anchor(titles[s])})" for s in markers), ""]
    for step, items in markers.items():
        title = titles[step]
        rows = [[code(log.level), code(log.message), ctx.name(fn),
                 ctx.loc(_root(ctx, fn), _file(ctx, fn), log.line, PAGE)] for fn, log in items]
        body += [f"## {title}", "", *table(["Level", "Message", "Function", "Where"], rows), ""]
    return page("Log markers", body)


def _anchor(title: str) -> str:
    """GitHub's heading anchor for a step heading (as written by this page)."""
    return "".join(c for c in title.lower().replace(" ", "-") if c.isalnum() or c in "-_")


def _root(ctx: DocContext, fn: str) -> str:
    return str(ctx.g.nodes[fn].get("root") or "")


def _file(ctx: DocContext, fn: str) -> str:
    return str(ctx.g.nodes[fn].get("file") or "")
