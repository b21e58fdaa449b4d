"""``kvflowmap states``: the request state machine found in the code.

The transitions come from :func:`kvflowmap.graph.transitions.extract_transitions`
(each write of a protocol state enum, with the states its enclosing or
dominating tests establish). This module shapes them for people: short state
names, ``Class.method`` function names, and text, JSON, mermaid and DOT/SVG.

In the diagrams, ``*`` (the code does not establish the state before the
write) is drawn as its own "any state" node, except in a constructor, where
the write sets the initial state and is drawn from mermaid's ``[*]``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass

from kvflowmap.graph.build import Linker
from kvflowmap.graph.transitions import extract_transitions
from kvflowmap.render.dot import esc

ANY = "*"
LinkFn = Callable[[str, str, int], "str | None"]  # (root, file, line) -> URL


@dataclass(frozen=True)
class Row:
    """One transition, with short names for display."""

    from_states: tuple[str, ...]  # member names, or ("*",)
    to_state: str
    function: str  # fully qualified
    qualname: str  # ``Class.method`` inside its module
    file: str
    line: int
    root: str
    guard: str

    @property
    def initial(self) -> bool:
        """A constructor's write from an unknown state: the initial state."""
        return self.from_states == (ANY,) and self.qualname.endswith("__init__")


@dataclass(frozen=True)
class StateMachine:
    """Every transition, and the members of the state enums in order."""

    enums: tuple[str, ...]
    states: tuple[str, ...]
    rows: tuple[Row, ...]


def state_machine(lk: Linker) -> StateMachine:
    """The state machine of the analysed code (rows sorted by place)."""
    rows = []
    for t in extract_transitions(lk):
        d = lk.model.defs.get(t.function)
        qual = d.fact.qualname if d is not None else ".".join(t.function.split(".")[-2:])
        rows.append(Row(tuple(_short(s) for s in t.from_states), _short(t.to_state), t.function,
                        qual, t.file, t.line, t.root, t.guard))
    enums = tuple(e for e in lk.protocol.state_enums if lk.classes.class_fact(e) is not None)
    states: list[str] = []
    for e in enums:
        fact = lk.classes.class_fact(e)
        states += [m for m in fact.members if not m.startswith("_")] if fact else []
    rows.sort(key=lambda r: (r.root, r.file, r.line, r.to_state, r.from_states))
    return StateMachine(enums, tuple(dict.fromkeys(states)), tuple(rows))


def _short(state: str) -> str:
    return state if state == ANY else state.rpartition(".")[2]


def used_states(sm: StateMachine) -> list[str]:
    """States that appear in some transition, in enum order (others after)."""
    seen = {s for r in sm.rows for s in (*r.from_states, r.to_state) if s != ANY}
    order = [s for s in sm.states if s in seen]
    return order + sorted(seen - set(order))


def states_json(sm: StateMachine) -> str:
    """Stable JSON: enums, states and transitions (with guards)."""
    data = {"enums": list(sm.enums), "states": list(sm.states),
            "transitions": [asdict(r) for r in sm.rows]}
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def states_text(sm: StateMachine, width: int | None = None) -> str:
    """A rich table rendered to plain text. Without ``width`` (a file, a pipe,
    ``--wide``) the from/to/function/where columns never wrap and the guard
    column is 60 wide, guards whole. With ``width`` (a terminal) the output
    fits it: the same table with each guard shortened to its last conditions
    (the ones nearest the assignment) when the fixed columns leave the guard
    room, else one block per transition."""
    from rich.console import Console
    from rich.table import Table

    cells = [(", ".join(r.from_states), r.to_state, r.qualname, f"{r.file}:{r.line}",
              r.guard or "-") for r in sm.rows]
    fixed = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in
             enumerate(("from", "to", "function", "where"))]
    title = f"{len(sm.rows)} transitions of {', '.join(sm.enums) or 'no state enum'}"
    frame = 3 * 4 + 4  # the separators of five columns and the two borders
    if width is not None:
        room = width - sum(fixed) - frame
        if room < _MIN_GUARD:
            return _blocks(title, cells, width)
        cells = [(*c[:4], shorten_guard(c[4], room * _GUARD_LINES)) for c in cells]
    width = width or sum(fixed) + frame + 60
    table = Table(title=title, show_lines=True, expand=False)
    for col, w in zip(("from", "to", "function", "where"), fixed, strict=True):
        table.add_column(col, no_wrap=True, min_width=w)
    table.add_column("guard", overflow="fold", ratio=1)
    for row in cells:
        table.add_row(*row)
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None, force_terminal=False,
            highlight=False).print(table)
    return buf.getvalue()


# A guard column narrower than this is unreadable: the blocks layout instead.
_MIN_GUARD = 24
# Lines a shortened guard may take in a terminal.
_GUARD_LINES = 3


def shorten_guard(guard: str, limit: int) -> str:
    """``guard`` cut to at most ``limit`` characters, keeping its end (the
    conditions nearest the assignment) from a whole ``and``/``or`` on:
    ``… and not (new_blocks is None) and load_kv_async``."""
    if len(guard) <= limit:
        return guard
    cut = len(guard) - (limit - 2)
    joins = [i for j in (" and ", " or ") if (i := guard.find(j, cut)) >= 0]
    if joins:
        return "… " + guard[min(joins) + 1:]
    return "…" + guard[len(guard) - (limit - 1):]


def _blocks(title: str, cells: list[tuple[str, str, str, str, str]], width: int) -> str:
    """One block per transition, every line within ``width``: ``from -> to``,
    then the function and where, then the shortened guard."""
    import textwrap

    def wrap(text: str, indent: str) -> list[str]:
        return textwrap.wrap(text, width=width, initial_indent=indent,
                             subsequent_indent=indent + "  ", break_on_hyphens=False) or [indent]

    out = [*wrap(title + " (--wide: whole guards)", ""), ""]
    room = max(width - 6, 20)
    for frm, to, fn, where, guard in cells:
        out += wrap(f"{frm} -> {to}", "")
        out += wrap(f"{fn}  {where}", "    ")
        if guard != "-":
            out += wrap("if " + shorten_guard(guard, room * 2), "    ")
        out.append("")
    return "\n".join(out)


def edge_label(r: Row) -> str:
    """Short label of a transition: ``Class.method L123``."""
    return f"{r.qualname} L{r.line}"


def states_mermaid(sm: StateMachine) -> str:
    """A mermaid ``stateDiagram-v2``; labels hold names and lines only."""
    lines = ["stateDiagram-v2", "  direction LR"]
    if any(ANY in r.from_states and not r.initial for r in sm.rows):
        lines.append('  state "* (not established)" as ANY_STATE')
    for s in used_states(sm):
        lines.append(f"  {s}")
    for r in sm.rows:
        for f in r.from_states:
            src = "[*]" if r.initial else ("ANY_STATE" if f == ANY else f)
            lines.append(f"  {src} --> {r.to_state} : {edge_label(r)}")
    return "\n".join(lines) + "\n"


def states_dot(sm: StateMachine, *, link: LinkFn | None = None, guards: bool = True,
               title: str | None = None) -> str:
    """Deterministic DOT text; edge tooltips hold the guard when ``guards``."""
    out = ["digraph states {",
           '  graph [rankdir="LR", fontname="Helvetica", nodesep="0.4", ranksep="0.9"'
           + (f', label="{esc(title)}", labelloc="t"' if title else "") + "];",
           '  node [shape="ellipse", style="filled", fillcolor="#b8e0b0", color="#2e7d32", '
           'fontname="Helvetica", fontsize="11"];',
           '  edge [fontname="Helvetica", fontsize="9", color="#1a7f37"];']
    if any(r.initial for r in sm.rows):
        out.append('  "__initial__" [shape="point", width="0.15", label=""];')
    if any(ANY in r.from_states and not r.initial for r in sm.rows):
        out.append('  "__any__" [label="* (not established)", style="dashed", '
                   'fillcolor="#ffffff"];')
    out += [f'  "{esc(s)}";' for s in used_states(sm)]
    for r in sm.rows:
        for f in r.from_states:
            src = "__initial__" if r.initial else ("__any__" if f == ANY else f)
            attrs = [f'label="{esc(r.qualname)}\\nL{r.line}"']
            url = link(r.root, r.file, r.line) if link else None
            if url:
                attrs.append(f'URL="{esc(url)}"')
            tip = f"{r.file}:{r.line}" + (f"\n{r.guard}" if guards and r.guard else "")
            attrs.append(f'tooltip="{esc(tip)}"')
            out.append(f'  "{esc(src)}" -> "{esc(r.to_state)}" [{", ".join(attrs)}];')
    out.append("}")
    return "\n".join(out) + "\n"
