"""One page per connector class: each protocol method with its side, the
vLLM functions calling it, what it delegates to, the state and containers it
touches, and the rules covering it; then the base methods left to their
defaults and the abstract methods it does not implement."""

from __future__ import annotations

from kvflowmap.docs import flowinfo
from kvflowmap.docs.context import DocContext, connector_page
from kvflowmap.docs.markup import code, escape, page, table
from kvflowmap.nav.where import Site


def connector_pages(ctx: DocContext) -> dict[str, bytes]:
    """``connectors/<fqn>.md`` for every subject connector class."""
    return {connector_page(cls): _page(ctx, cls) for cls in ctx.connectors}


def _page(ctx: DocContext, cls: str) -> bytes:
    path = connector_page(cls)
    body = _header(ctx, cls, path) + _methods(ctx, cls, path) + _touches(ctx, cls, path)
    body += _defaults(ctx, cls, path) + _abstract(ctx, cls, path) + _class_rules(ctx, cls)
    return page(f"Connector {flowinfo.qual(ctx.lk, cls)}", body)


def _header(ctx: DocContext, cls: str, path: str) -> list[str]:
    lk, nd = ctx.lk, ctx.g.nodes[cls]
    mro = [c for c in lk.classes.mro(cls)[1:] if c != cls]
    reg = (nd.get("registered_names") or [None])[0]
    out = [f"- Full name: {code(cls)}", f"- Defined at: {ctx.node_loc(cls, path)}",
           f"- Bases, in method resolution order: {', '.join(code(c) for c in mro) or '-'}",
           f"- Registered with the connector factory as: {code(reg) if reg else '-'}",
           "- Back to the [overview](../README.md)", ""]
    return out


def _methods(ctx: DocContext, cls: str, path: str) -> list[str]:
    lk, rows = ctx.lk, []
    for side, m in flowinfo.protocol_methods(lk):
        if flowinfo.base_method(lk, m) not in lk.model.defs:
            continue
        impl = flowinfo.implementation(lk, cls, m)
        own = flowinfo.overrides(lk, cls, m)
        where = (f"{ctx.name(impl)} {ctx.node_loc(impl, path)}" if impl and own
                 else "base default")
        callers = flowinfo.vllm_callers(ctx.g, lk, m, impl)
        dels = flowinfo.delegates(ctx.g, impl) if impl and own else []
        rows.append([code(m), side, where, _sites(ctx, callers, path),
                     _sites(ctx, dels, path), _rule_links(ctx, cls, m)])
    return ["## Protocol methods", "",
            "Each method of the protocol, the process it runs in, the definition this class "
            "uses, the vLLM functions that call it, what it calls, and the rules that look "
            "at it.", "",
            *table(["Method", "Side", "Implemented in", "Called from (vLLM)", "Calls",
                    "Rules"], rows), ""]


def _sites(ctx: DocContext, sites: list[Site], path: str) -> str:
    """Distinct functions, each with its first line linked (and a count)."""
    firsts: dict[str, tuple[Site, int]] = {}
    for s in sites:
        first, n = firsts.get(s.node, (s, 0))
        firsts[s.node] = (first, n + 1)
    parts = []
    for node, (s, n) in firsts.items():
        more = f" (+{n - 1})" if n > 1 else ""
        parts.append(f"{ctx.name(node)} {ctx.loc(s.root, s.file, s.line, path)}{more}")
    return "<br>".join(parts) or "-"


def _rule_links(ctx: DocContext, cls: str, method: str) -> str:
    if not ctx.rules:
        return "-"
    ids = [r.id for r in ctx.rules
           if flowinfo.rule_applies(r, ctx.lk, cls) and flowinfo.rule_mentions(r, method)]
    return "<br>".join(f"[{code(i)}](../rules.md#{i})" for i in ids) or "-"


def _touches(ctx: DocContext, cls: str, path: str) -> list[str]:
    """Per overridden method: its own touches and those of what it calls in
    the subject code (one hop, where facade connectors keep their state)."""
    lk, g = ctx.lk, ctx.g
    out = ["## State and containers each override touches", "",
           "Request states set or tested, carrier fields produced or consumed, and "
           "`self.` containers written, by the override and by the subject functions it "
           "calls directly.", ""]
    for _side, m in flowinfo.protocol_methods(lk):
        if not flowinfo.overrides(lk, cls, m):
            continue
        impl = flowinfo.implementation(lk, cls, m)
        assert impl is not None
        fns = [impl] + sorted({s.node for s in flowinfo.delegates(g, impl)
                               if g.nodes[s.node].get("subject")
                               and g.nodes[s.node].get("kind") == "function"} - {impl})
        rows = [[ctx.name(fn), escape(t.kind), code(_short_target(t.node)),
                 ctx.loc(t.root, t.file, t.line, path)]
                for fn in fns for t in flowinfo.touches(g, lk, fn)]
        out += [f"### {m}", "", *table(["In", "What", "Target", "Where"], rows), ""]
    return out


def _short_target(node: str) -> str:
    """States and fields by their last two parts; containers as written."""
    return node if node.startswith("self.") else ".".join(node.split(".")[-2:])


def _base_methods(ctx: DocContext) -> list[str]:
    """Public methods defined directly in the protocol's base class (private
    helpers such as ``_get_connector_metadata`` are not meant to be overridden)."""
    base = ctx.lk.protocol.base_class
    d = ctx.lk.model.defs.get(base)
    if d is None:
        return []
    return sorted(f"{base}.{f.name}" for f in ctx.lk.model.facts[d.module].functions
                  if f.class_qualname == d.fact.qualname and not f.name.startswith("_"))


def _defaults(ctx: DocContext, cls: str, path: str) -> list[str]:
    lk, rows = ctx.lk, []
    for fqn in _base_methods(ctx):
        name = fqn.rsplit(".", 1)[-1]
        if flowinfo.implementation(lk, cls, name) == fqn:
            rows.append([code(name), lk.protocol.side_of_method(name) or "-",
                         ctx.node_loc(fqn, path)])
    return ["## Base methods left to their defaults", "",
            *table(["Method", "Side", "Default at"], rows), ""]


def _abstract(ctx: DocContext, cls: str, path: str) -> list[str]:
    lk = ctx.lk
    missing = [fqn for fqn in _base_methods(ctx)
               if getattr(lk.model.defs[fqn].fact, "abstract", False)
               and flowinfo.implementation(lk, cls, fqn.rsplit(".", 1)[-1]) == fqn]
    lines = [f"- {code(f.rsplit('.', 1)[-1])} ({ctx.node_loc(f, path)})" for f in missing]
    subs = [c for c in lk.classes.all_subclasses(cls) if c in ctx.connectors]
    if lines and subs:  # an intermediate base: its subclasses may fill the gap
        lines += ["", "Subclasses analysed here: "
                  + ", ".join(f"[{code(flowinfo.qual(lk, c))}](../{connector_page(c)})"
                              for c in subs) + "."]
    return ["## Abstract methods not implemented", "",
            *(lines or ["None: every abstract method of the base class is implemented."]), ""]


def _class_rules(ctx: DocContext, cls: str) -> list[str]:
    if ctx.rules is None:
        return ["## Rules", "", "_(The rule engine could not be loaded.)_", ""]
    rows = [[f"[{code(r.id)}](../rules.md#{r.id})", escape(r.severity), escape(r.title)]
            for r in ctx.rules if flowinfo.rule_applies(r, ctx.lk, cls)]
    return ["## Rules that apply to this class", "", *table(["Rule", "Severity", "Title"], rows),
            ""]
