"""Sequence pages: the async KV load and the KV save, as mermaid
``sequenceDiagram``s with a table linking every arrow to its line.

The order of the steps is the protocol's story (below, one tuple per page);
every name in it is looked up in the protocol file and the graph, so the
callers, implementations, delegates and lines all come from the code. A step
whose method or carrier the analysed vLLM does not have is listed as missing
instead of drawn.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvflowmap.docs import flowinfo
from kvflowmap.docs.context import DocContext
from kvflowmap.docs.markup import code, escape, page, table
from kvflowmap.graph import select
from kvflowmap.nav.where import Site, edge_sites


@dataclass(frozen=True)
class Spec:
    """One step of the story: a hook call, a carrier crossing, a state write."""

    kind: str  # hook | carrier | state
    name: str  # method name, carrier attribute or state member
    side: str = ""  # hook: scheduler | worker
    note: str = ""
    from_state: str | None = None  # state: only writes from this state


LOAD = (
    Spec("hook", "get_num_new_matched_tokens", "scheduler", "probe: how many tokens can be "
         "loaded, and asynchronously? May be asked again; commits nothing"),
    Spec("hook", "update_state_after_alloc", "scheduler", "commit point: blocks allocated"),
    Spec("state", "WAITING_FOR_REMOTE_KVS", note="async load: the request is parked"),
    Spec("hook", "build_connector_meta", "scheduler", "this step's load plan"),
    Spec("carrier", "kv_connector_metadata", note="the plan travels to each worker"),
    Spec("hook", "bind_connector_metadata", "worker", "the worker half gets the plan"),
    Spec("hook", "start_load_kv", "worker", "loads start"),
    Spec("hook", "wait_for_layer_load", "worker", "per layer, before attention runs"),
    Spec("hook", "get_transfer_results", "worker", "collect finished transfers"),
    Spec("hook", "get_finished", "worker", "ids of finished loads (and saves)"),
    Spec("hook", "get_block_ids_with_load_errors", "worker", "blocks whose load failed"),
    Spec("carrier", "finished_recving", note="finished loads go back to the scheduler"),
    Spec("carrier", "invalid_block_ids", note="failed blocks go back to the scheduler"),
    Spec("hook", "update_connector_output", "scheduler", "the scheduler half sees the report"),
    Spec("state", "WAITING", note="parked request released", from_state="WAITING_FOR_REMOTE_KVS"),
    Spec("state", "PREEMPTED", note="released, was preempted", from_state="WAITING_FOR_REMOTE_KVS"),
)

SAVE = (
    Spec("hook", "update_state_after_alloc", "scheduler", "the connector learns the blocks"),
    Spec("hook", "build_connector_meta", "scheduler", "this step's save plan"),
    Spec("carrier", "kv_connector_metadata", note="the plan travels to each worker"),
    Spec("hook", "bind_connector_metadata", "worker", "the worker half gets the plan"),
    Spec("hook", "save_kv_layer", "worker", "per layer, after the forward pass writes it"),
    Spec("hook", "wait_for_save", "worker", "end of the step: saves done or safely queued"),
    Spec("hook", "clear_connector_metadata", "worker", "the step's plan is dropped"),
    Spec("hook", "request_finished", "scheduler", "may delay freeing the blocks until saved"),
    Spec("hook", "get_transfer_results", "worker", "collect finished transfers"),
    Spec("hook", "get_finished", "worker", "ids of finished saves (and loads)"),
    Spec("carrier", "finished_sending", note="finished saves go back; blocks can be freed"),
    Spec("hook", "update_connector_output", "scheduler", "the scheduler half sees the report"),
)

PAGES = (("kv-load.md", "Async KV load", LOAD), ("kv-save.md", "KV save", SAVE))


@dataclass
class Arrow:
    """One drawn message (or note) and the places that make it."""

    num: int
    src: str
    dst: str
    label: str
    style: str  # call | data | note
    note: str
    sites: list[tuple[str, Site]] = field(default_factory=list)


@dataclass
class _Diagram:
    ctx: DocContext
    conn: str
    participants: dict[str, tuple[str, str]] = field(default_factory=dict)  # key -> (id, title)
    arrows: list[Arrow] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    side_callers: dict[str, str] = field(default_factory=dict)  # side -> first vLLM caller

    def pid(self, key: str, title: str) -> str:
        if key not in self.participants:
            self.participants[key] = (f"P{len(self.participants) + 1}", title)
        return self.participants[key][0]

    def add(self, src: str, dst: str, label: str, style: str, note: str,
            sites: list[tuple[str, Site]]) -> None:
        self.arrows.append(Arrow(len(self.arrows) + 1, src, dst, label, style, note, sites))


def main_connector(ctx: DocContext) -> str:
    """The connector drawn: the one the flow picture shows (the subject
    connector overriding the most hooks); the base class when none."""
    chosen = [c for c in select.choose_connectors(ctx.g) if c in ctx.connectors]
    return chosen[0] if chosen else ctx.lk.protocol.base_class


def sequence_page(ctx: DocContext, path: str, title: str, specs: tuple[Spec, ...]) -> bytes:
    """One sequence page."""
    d = _Diagram(ctx, main_connector(ctx))
    for spec in specs:
        {"hook": _hook, "carrier": _carrier, "state": _state}[spec.kind](d, spec)
    others = [c for c in ctx.connectors if c != d.conn]
    body = [f"Drawn for {code(flowinfo.qual(ctx.lk, d.conn))}, from the protocol file and the "
            "call graph. Numbers match the table below, which links each step to its line."]
    if others:
        body[0] += (" Other connectors: see their pages under [connectors/](README.md"
                    "#connector-classes).")
    body += ["", "```mermaid", *_mermaid(d), "```", "", "## Steps", ""]
    body += table(["#", "Step", "Meaning", "Where"], _rows(d, path))
    if d.missing:
        body += ["", "Not found in the analysed code (not drawn): "
                 + ", ".join(code(m) for m in d.missing) + "."]
    return page(title, body)


def _class_of(d: _Diagram, fn: str) -> str:
    """Participant of a function: its class, or the function itself."""
    lk = d.ctx.lk
    if fn.startswith(lk.protocol.base_class + "."):
        return ""  # base-class default code runs inside the connector
    df = lk.model.defs.get(fn)
    owner = getattr(df.fact, "class_qualname", None) if df is not None else None
    key = f"{df.module}.{owner}" if df is not None and owner else fn
    # a nested function keeps its enclosing one (``maybe_transfer_kv_layer.wrapper``)
    title = key.rsplit(".", 1)[-1] if owner or df is None else \
        str(getattr(df.fact, "qualname", "") or key.rsplit(".", 1)[-1])
    return d.pid(key, title)


def _conn(d: _Diagram, side: str) -> str:
    return d.pid(f"connector:{side}", f"{flowinfo.qual(d.ctx.lk, d.conn)} ({side})")


def _side_default(d: _Diagram, side: str) -> str:
    """The vLLM participant already drawn for ``side``, else a generic one."""
    return d.side_callers.get(side) or d.pid(f"vllm:{side}", f"vLLM {side}")


def _hook(d: _Diagram, spec: Spec) -> None:
    ctx, lk = d.ctx, d.ctx.lk
    if flowinfo.base_method(lk, spec.name) not in lk.model.defs:
        d.missing.append(f"{flowinfo.qual(lk, lk.protocol.base_class)}.{spec.name}")
        return
    impl = flowinfo.implementation(lk, d.conn, spec.name)
    callers = flowinfo.vllm_callers(ctx.g, lk, spec.name, impl)
    caller = flowinfo.preferred_caller(lk, spec.side, callers)
    src = (_class_of(d, caller.node) or _conn(d, spec.side)) if caller else \
        _side_default(d, spec.side)
    if caller and _class_of(d, caller.node):
        d.side_callers.setdefault(spec.side, src)
    sites = [("called from " + flowinfo.qual(lk, s.node), s) for s in callers]
    label = spec.name
    if impl and impl in ctx.g:
        nd = ctx.g.nodes[impl]
        sites.append(("implemented in " + flowinfo.qual(lk, impl),
                      Site(impl, "def", str(nd.get("file")), int(nd.get("line") or 0),
                           str(nd.get("root")))))
        if not flowinfo.overrides(lk, d.conn, spec.name):
            label += " (base default)"
    note = spec.note + ("" if callers else "; no vLLM caller found in the analysed code")
    d.add(src, _conn(d, spec.side), label, "call", note, sites)
    if impl and flowinfo.overrides(lk, d.conn, spec.name):
        _delegation(d, spec, impl)


def _delegation(d: _Diagram, spec: Spec, impl: str) -> None:
    """Facade connectors forward to a half in another class: draw that call."""
    lk, g = d.ctx.lk, d.ctx.g
    own = impl.rpartition(".")[0]
    outside = [s for s in flowinfo.delegates(g, impl) if g.nodes[s.node].get("subject")
               and g.nodes[s.node].get("kind") == "function"
               and not s.node.startswith(own + ".")]
    same_name = [s for s in outside if s.node.rsplit(".", 1)[-1] == spec.name]
    for s in (same_name or outside)[:2]:
        d.add(_conn(d, spec.side), _class_of(d, s.node), s.node.rsplit(".", 1)[-1], "call",
              "delegates to " + flowinfo.qual(lk, s.node), [("call", s)])


def _carrier(d: _Diagram, spec: Spec) -> None:
    ctx, lk = d.ctx, d.ctx.lk
    c = next((c for c in lk.protocol.carriers if c.attr == spec.name), None)
    if c is None or c.field not in ctx.g:
        d.missing.append(spec.name)
        return
    owner = d.pid(c.owner, c.owner.rsplit(".", 1)[-1])
    # The carrier crosses from one process to the other: producers on the
    # sending side, consumers on the side of its declared targets.
    to_side = next((ctx.g.nodes[t].get("side") for t in c.targets if t in ctx.g), None)
    producers = _on_side(ctx, edge_sites(ctx.g, c.field, "in", ("produces",)), to_side, False)
    consumers = _on_side(ctx, edge_sites(ctx.g, c.field, "out", ("consumes",)), to_side, True)
    prod = _pick(producers, _entry_points(d))
    cons = _pick(consumers, [*c.targets, *_entry_points(d)])
    src = _class_of(d, prod.node) if prod else owner
    d.add(src or owner, owner, spec.name, "data", spec.note,
          [("set in " + flowinfo.qual(lk, s.node), s) for s in ([prod] if prod else [])])
    if cons:
        d.add(owner, _class_of(d, cons.node) or owner, "read: " + spec.name, "data",
              "read by " + flowinfo.qual(lk, cons.node), [("read in " + flowinfo.qual(
                  lk, cons.node), cons)])


def _on_side(ctx: DocContext, sites: tuple[Site, ...], side: str | None,
             same: bool) -> tuple[Site, ...]:
    """Sites whose function is (``same``) or is not on ``side``; all of them
    when the side is unknown or nothing matches."""
    if side is None:
        return sites
    kept = tuple(s for s in sites if (ctx.g.nodes[s.node].get("side") == side) == same)
    return kept or sites


def _entry_points(d: _Diagram) -> list[str]:
    """Functions preferred as producers: the protocol's vLLM entry points."""
    return [n for ns in d.ctx.lk.protocol.entry_points.values() for n in ns]


def _pick(sites: tuple[Site, ...], preferred: list[str]) -> Site | None:
    """Preferred functions first (in their order), then by place."""
    ranked = sorted(sites, key=lambda s: (s.node not in preferred,
                                          preferred.index(s.node) if s.node in preferred else 0,
                                          s.root, s.file, s.line))
    return ranked[0] if ranked else None


def _state(d: _Diagram, spec: Spec) -> None:
    rows = [r for r in d.ctx.machine.rows if r.to_state == spec.name and
            (spec.from_state is None or spec.from_state in r.from_states)]
    if not rows:
        d.missing.append(f"{spec.from_state or '*'} -> {spec.name}")
        return
    first = rows[0]
    where = _class_of(d, first.function) or _side_default(d, "scheduler")
    sites = [(f"{r.qualname}", Site(r.function, "sets_state", r.file, r.line, r.root))
             for r in rows]
    label = f"{spec.from_state} → {spec.name}" if spec.from_state else f"→ {spec.name}"
    d.add(where, where, label, "note", spec.note, sites)


def _mermaid(d: _Diagram) -> list[str]:
    out = ["sequenceDiagram"]
    out += [f"  participant {pid} as {title}" for pid, title in d.participants.values()]
    for a in d.arrows:
        if a.style == "note":
            out.append(f"  Note over {a.src}: {a.num}. {a.label}")
        else:
            arrow = "->>" if a.style == "call" else "-->>"
            out.append(f"  {a.src}{arrow}{a.dst}: {a.num}. {a.label}")
    return out


def _rows(d: _Diagram, path: str) -> list[list[str]]:
    rows = []
    for a in d.arrows:
        where = "<br>".join(f"{escape(what)}: {d.ctx.loc(s.root, s.file, s.line, path)}"
                            for what, s in a.sites) or "-"
        rows.append([str(a.num), code(a.label), escape(a.note), where])
    return rows
