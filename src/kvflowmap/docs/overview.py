"""The overview page (``README.md``): what was analysed, the connector
classes, where to start reading, the flow picture, and the other pages."""

from __future__ import annotations

from collections import Counter

import networkx as nx

from kvflowmap.docs import flowinfo
from kvflowmap.docs.context import DocContext, connector_page
from kvflowmap.docs.markup import code, escape, page, table
from kvflowmap.graph import select

PAGE = "README.md"
START_HERE = 15  # functions in the "start reading here" list


def overview_page(ctx: DocContext, pages: list[tuple[str, str]]) -> bytes:
    """The overview; ``pages`` lists (path, title) of the other pages."""
    body = _analysed(ctx) + _connectors(ctx) + _start_here(ctx)
    shown = ", ".join(code(flowinfo.qual(ctx.lk, c)) for c in select.choose_connectors(ctx.g))
    body += ["## The flow", "",
             "Scheduler process, worker process and connector package in one picture"
             + (f" (connector: {shown})" if shown else "")
             + "; bridges (dashed red) are data carried between the processes.", ""]
    body += ["![KV-transfer flow](flow.svg)", ""] if ctx.svg else \
        ["_(Graphviz `dot` was not available: run `kvflowmap graph --out flow.svg`.)_", ""]
    body += ["## Pages", ""] + [f"- [{escape(t)}]({p})" for p, t in pages] + [""]
    body += _warnings(ctx)
    return page(f"KV-cache flow: {ctx.title()}", body)


def _analysed(ctx: DocContext) -> list[str]:
    lk = ctx.lk
    modules: Counter[str] = Counter()
    functions: Counter[str] = Counter()
    for module in lk.model.facts:
        sf = lk.model.source(module)
        label = sf.root.label if sf else ""
        modules[label] += 1
        functions[label] += len(lk.model.facts[module].functions)
    rows = [[escape(r.label), "subject" if r.subject else "context", str(modules[r.label]),
             str(functions[r.label])] for r in ctx.analysis.roots]
    proto = lk.protocol
    n_sched = len(proto.methods.get("scheduler", ()))
    n_work = len(proto.methods.get("worker", ()))
    out = ["## What was analysed", "",
           "Generated from the code by `kvflowmap docs`; regenerate with the same command and "
           "check in CI with `kvflowmap docs --check`. Locations are `file:line` in each root.",
           "", *table(["Root", "Role", "Modules indexed", "Functions"], rows), "",
           f"- vLLM version: {code(ctx.analysis.vllm_version or 'unknown')}",
           f"- Protocol: {code(proto.name)} ({n_sched} scheduler-side and {n_work} worker-side "
           f"methods of {code(flowinfo.qual(lk, proto.base_class))}, "
           f"{len(proto.carriers)} carriers across the process boundary)", ""]
    return out


def _connectors(ctx: DocContext) -> list[str]:
    rows = []
    for cls in ctx.connectors:
        n = sum(flowinfo.overrides(ctx.lk, cls, m) for _, m in flowinfo.protocol_methods(ctx.lk))
        reg = (ctx.g.nodes[cls].get("registered_names") or [None])[0]
        rows.append([f"[{escape(flowinfo.qual(ctx.lk, cls))}]({connector_page(cls)})",
                     code(cls), code(reg) if reg else "-", ctx.node_loc(cls, PAGE), str(n)])
    out = ["## Connector classes", "",
           *table(["Class", "Full name", "Registered as", "Defined at", "Hooks overridden"], rows),
           ""]
    context = flowinfo.connector_classes(ctx.lk, ctx.g, subject=False)
    if context:
        names = ", ".join(code(flowinfo.qual(ctx.lk, c)) for c in context)
        out += [f"Connector classes in the context code (indexed, not documented here): "
                f"{names}.", ""]
    return out


def centrality(g: nx.MultiDiGraph) -> list[tuple[str, float]]:
    """Functions of the flow ranked by betweenness centrality on the flow
    subgraph: the connector-independent flow plus the subject connectors'
    hook implementations and what they delegate to. Built in sorted order,
    so ties and float sums are stable."""
    flow = sorted(n for n, d in g.nodes(data=True)
                  if d.get("flow") or (d.get("connector") and d.get("subject")))
    simple = nx.DiGraph()
    simple.add_nodes_from(flow)
    keep = set(flow)
    simple.add_edges_from(sorted({(u, v) for u, v in g.edges() if u in keep and v in keep}))
    scores = nx.betweenness_centrality(simple)
    funcs = [n for n in flow if g.nodes[n].get("kind") == "function"
             and g.nodes[n].get("role") != "module"]
    return sorted(((n, round(scores[n], 6)) for n in funcs), key=lambda x: (-x[1], x[0]))


def _start_here(ctx: DocContext) -> list[str]:
    ranked = [x for x in centrality(ctx.g) if x[1] > 0][:START_HERE]
    rows = [[str(i), ctx.name(n), code(n), escape(str(ctx.g.nodes[n].get("side") or "-")),
             ctx.node_loc(n, PAGE), f"{score:.4f}"] for i, (n, score) in enumerate(ranked, 1)]
    return ["## Start reading here", "",
            "The functions most paths of the flow go through (betweenness centrality on the "
            "flow subgraph: calls, dispatch, bridges and data steps), most central first.", "",
            *table(["#", "Function", "Full name", "Side", "Defined at", "Centrality"], rows), ""]


def _warnings(ctx: DocContext) -> list[str]:
    proto_warnings = [w for w in ctx.analysis.warnings if "not found in" in w
                      or "protocol" in w]
    if not proto_warnings:
        return []
    return ["## Protocol names not found", "",
            *[f"- {escape(w)}" for w in sorted(proto_warnings)], ""]
