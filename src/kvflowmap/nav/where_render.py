"""Text and JSON output of ``kvflowmap where``."""

from __future__ import annotations

import json
from dataclasses import asdict

from kvflowmap.nav.where import Ambiguous, Site, WhereResult

TITLES = {
    "callers": "called by", "callees": "calls", "setters": "set by", "sets": "sets state",
    "readers": "read by", "reads": "reads state", "producers": "produced by",
    "produces": "produces field", "consumers": "consumed by", "consumes": "consumes field",
    "deciders": "decided by (its return value is tested where the state is set)",
    "decides": "decides state (its return value is tested where the state is set)",
    "members": "methods",
    "writers": "written by (assignments, puts)",
    "removers": "taken out of by",
    "fed": "fed by (puts the ids into state that a producer above returns)",
}


def where_text(result: WhereResult | Ambiguous) -> str:
    """Human-readable text; ends with a newline."""
    if isinstance(result, Ambiguous):
        return _ambiguous_text(result)
    r = result
    if r.kind == "attribute":
        head = [r.node, "  attribute declared in a class body (no node of the graph: "
                "nothing here follows it)"]
    elif r.kind == "instance attribute":
        head = [r.node, "  attribute its methods set on self (no request ids flow through it "
                "that the graph follows: its uses, from the facts)"]
    else:
        head = [r.node, f"  {r.kind}" + (f" ({'subject' if r.subject else 'context'})"
                                          if r.kind != "external" else "")]
    for a in r.aliases:
        head.append(f"  {a.node.rpartition('.')[2]} is an alias of it: {a.node}"
                    + (f" at {a.file}:{a.line}" if a.file else ""))
    if r.file:
        head.append(f"  defined at {r.file}:{r.line}" + (f"  [{r.root}]" if r.root else ""))
    if r.side:
        head.append(f"  side: {r.side}")
    if r.signature:
        head.append(f"  {r.signature}")
    if r.doc:
        head.append(f"  \"{r.doc.splitlines()[0]}\"")
    blocks = ["\n".join(head)]
    groups = list(r.relations) + ([("members", r.members)] if r.members else [])
    for rel, sites in groups:
        title = TITLES.get(rel, rel)
        blocks.append(_sites_block(title, sites))
    if not groups and r.kind not in ("attribute", "instance attribute"):
        blocks.append("  nothing calls it, and it calls or touches nothing in the graph")
    return "\n\n".join(blocks) + "\n"


def _sites_block(title: str, sites: tuple[Site, ...]) -> str:
    locs = [f"{s.file}:{s.line}" if s.file else "-" for s in sites]
    width = max(len(x) for x in locs)
    kwidth = max(len(s.kind) for s in sites)
    lines = [f"{title} ({len(sites)}):"]
    for loc, s in zip(locs, sites, strict=True):
        note = f"  ({s.note})" if s.note else ""
        lines.append(f"  {loc:<{width}}  {s.kind:<{kwidth}}  {s.node}{note}")
    return "\n".join(lines)


def _ambiguous_text(a: Ambiguous) -> str:
    lines = [f"{a.name!r} matches {len(a.candidates)} nodes; give more of the name, "
             "e.g. 'Class.method', or the full id:"]
    width = max(len(c.node) for c in a.candidates)
    kwidth = max(8, *(len(c.kind) for c in a.candidates))
    for c in a.candidates:
        loc = f"{c.file}:{c.line}" if c.file else ""
        lines.append(f"  {c.node:<{width}}  {c.kind:<{kwidth}}  {loc}".rstrip())
    return "\n".join(lines) + "\n"


def where_json(result: WhereResult | Ambiguous) -> str:
    """Stable JSON: ``{"ambiguous": ...}`` or the node with its relations."""
    if isinstance(result, Ambiguous):
        data: dict = {"name": result.name, "ambiguous": [asdict(c) for c in result.candidates]}
    else:
        data = asdict(result)
        if not result.aliases:
            del data["aliases"]  # the usual case: the name is the node's own
        data["relations"] = {rel: [asdict(s) for s in sites] for rel, sites in result.relations}
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
