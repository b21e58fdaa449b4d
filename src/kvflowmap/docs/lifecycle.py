"""The request lifecycle page: the extracted state machine as a mermaid
diagram (and an SVG), a table of transitions, and who reads each state."""

from __future__ import annotations

from kvflowmap.docs.context import DocContext
from kvflowmap.docs.markup import code, escape, page, table
from kvflowmap.nav.states import ANY, states_dot, states_mermaid, used_states
from kvflowmap.nav.where import edge_sites

PAGE = "lifecycle.md"
SVG = "lifecycle.svg"


def lifecycle_page(ctx: DocContext) -> bytes:
    """Markdown of the lifecycle page."""
    sm = ctx.machine
    enums = ", ".join(code(e) for e in sm.enums) or "no state enum found"
    body = [f"The states of {enums} and every write of one found in the analysed code. "
            "**From** is the state established by an enclosing or dominating test "
            "(`*`: the code does not establish it). The conditions on the way are source "
            "text and are left out of these pages: `kvflowmap states` prints them.", "",
            "```mermaid", states_mermaid(sm).rstrip(), "```", ""]
    if ctx.svg:
        body += [f"Also as a picture: [{SVG}]({SVG}).", ""]
    rows = [[escape(", ".join(r.from_states)), code(r.to_state), code(r.qualname),
             ctx.loc(r.root, r.file, r.line, PAGE)] for r in sm.rows]
    body += [f"## Transitions ({len(sm.rows)})", "",
             *table(["From", "To", "Function", "Where"], rows), ""]
    body += _readers(ctx) + _rules(ctx)
    return page("Request lifecycle", body)


def lifecycle_svg_dot(ctx: DocContext) -> str:
    """DOT of the state machine for the SVG (links, no guard text)."""
    def link(root: str, file: str, line: int) -> str | None:
        return ctx.links.url(root, file, line, SVG)
    return states_dot(ctx.machine, link=link, guards=False, title="Request lifecycle")


def _readers(ctx: DocContext) -> list[str]:
    """Functions that test each state: what moves a request on."""
    out = ["## Who tests each state", "",
           "A request leaves a state when a function that tests it runs; these are the "
           "comparisons with each state found in the code.", ""]
    rows = []
    for short in used_states(ctx.machine):
        node = next((f"{e}.{short}" for e in ctx.machine.enums
                     if f"{e}.{short}" in ctx.g), None)
        if node is None or short == ANY:
            continue
        for s in edge_sites(ctx.g, node, "out", ("reads_state",)):
            rows.append([code(short), ctx.name(s.node), ctx.loc(s.root, s.file, s.line, PAGE)])
    return out + table(["State", "Tested in", "Where"], rows) + [""]


def _rules(ctx: DocContext) -> list[str]:
    if not ctx.rules:
        return []
    ids = [r.id for r in ctx.rules if r.kind == "states"]
    if not ids:
        return []
    links = ", ".join(f"[{code(i)}](rules.md#{i})" for i in ids)
    return ["## Rules", "", f"The allowed transitions are checked by {links}.", ""]
