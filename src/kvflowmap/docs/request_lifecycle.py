"""The request-ids page: per connector package, the request-keyed containers
(where ids are added, removed and reset, and which report reads them), then
per class the hook functions and how the ids they see move.

The data is ``kvflowmap lifecycle``'s (``nav.lifecycle_summary``), built once
from the lifecycle model; this module only lays it out as Markdown with
source links. Long lists are capped: ``kvflowmap lifecycle`` prints them in
full.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kvflowmap.docs.context import DocContext
from kvflowmap.docs.markup import code, escape, page, table
from kvflowmap.nav.lifecycle_summary import (ClassRows, ContainerRow, FunctionRow, Hand,
                                             PackageLifecycle, SiteRow)

PAGE = "request-lifecycle.md"
TITLE = "Request ids in the connectors"
MAX_SITES = 6  # locations in one add/remove/reset cell
MAX_ITEMS = 6  # containers, hand-offs or reports in one cell
MAX_IDLE = 10  # names in a "moves no ids" list


def summary(ctx: DocContext) -> list[PackageLifecycle] | None:
    """``kvflowmap lifecycle``'s data for the analysis, or None when the
    lifecycle model cannot be built here (it is developed separately; the
    other pages must still be written)."""
    try:
        from kvflowmap.lifecycle.model import build_lifecycle
        from kvflowmap.nav.lifecycle_summary import summarise

        return summarise(build_lifecycle(ctx.analysis.linker))
    except Exception:  # noqa: BLE001 - any failure there only empties this page
        return None


def request_lifecycle_page(ctx: DocContext, packages: list[PackageLifecycle] | None) -> bytes:
    """Markdown of the page for ``packages`` (``summary(ctx)``)."""
    body = ["Where the connector code keeps request ids and how they move: per package the "
            "request-keyed containers (attributes holding request ids: sets, dicts, lists, "
            "queues) with the lines that add ids to them, take ids out and reset them, and "
            "the report functions (`get_finished` and the like) that read them; then, per "
            "class, the functions reached from the connector hooks with the containers they "
            "touch, the calls, threads or callers they hand ids to, and the reports that "
            "read the containers they add to. The lifecycle rules of `kvflowmap check` "
            "work on the same model.", "",
            f"Long lists are cut (at {MAX_SITES} locations, {MAX_ITEMS} items and "
            f"{MAX_IDLE} names); `kvflowmap lifecycle` prints everything, as text or JSON. "
            "The request states themselves are on [Request lifecycle](lifecycle.md); "
            "back to the [overview](README.md).", ""]
    if packages is None:
        body += ["_(The lifecycle model could not be built; run `kvflowmap lifecycle` where "
                 "it works.)_", ""]
    elif not packages:
        body += ["_(No request-keyed containers or hook functions found in the subject "
                 "code.)_", ""]
    for p in packages or ():
        body += _package(ctx, p)
    return page(TITLE, body)


def _package(ctx: DocContext, p: PackageLifecycle) -> list[str]:
    n_fns = sum(len(c.functions) for c in p.classes)
    n_moving = sum(1 for c in p.classes for f in c.functions if _moves(f))
    out = [f"## Package {code(p.package)}", "",
           f"{len(p.containers)} request-keyed containers; {n_fns} functions reached from "
           f"the hooks, {n_moving} of which move request ids.", "",
           f"### Containers ({len(p.containers)})", "",
           *table(["Container", "Module", "Ids added", "Ids removed", "Reset", "Read by report"],
                  [_container_row(ctx, c) for c in p.containers]), "",
           "### Hooks by class", ""]
    moving = [c for c in p.classes if any(_moves(f) for f in c.functions)]
    for cls in moving:
        out += _class(ctx, cls)
    idle = [c for c in p.classes if c not in moving]
    if idle:
        names = [f"{code(_short(c.owner) if c.is_class else c.owner)} ({len(c.functions)})"
                 for c in idle]
        out += [f"Classes and modules reached from the hooks whose functions move no ids "
                f"(number of functions in parentheses): {_capped(names, MAX_IDLE, ', ')}.", ""]
    if not p.classes:
        out += ["_(none)_", ""]
    return out


def _container_row(ctx: DocContext, c: ContainerRow) -> list[str]:
    cls = _short(c.owner)
    return [code(c.label), code(_module_of(ctx, c.owner)), _sites(ctx, c.adds, cls),
            _sites(ctx, c.removes, cls), _sites(ctx, c.resets, cls),
            _capped([code(r) for r in c.reported_by], MAX_ITEMS)]


def _sites(ctx: DocContext, rows: Sequence[SiteRow], cls: str) -> str:
    """``fn`` and its linked lines, one function a line; at most MAX_SITES
    locations, then how many more."""
    groups: dict[tuple[str, str], list[int]] = {}
    for r in rows:
        groups.setdefault((r.module, r.function), []).append(r.line)
    parts, shown = [], 0
    for (module, function), lines in groups.items():
        take = sorted(lines)[:max(0, MAX_SITES - shown)]
        if not take:
            break
        shown += len(take)
        locs = ", ".join(_site_loc(ctx, module, function, line) for line in take)
        parts.append(f"{code(function.removeprefix(cls + '.'))} {locs}")
    if len(rows) > shown:
        parts.append(f"(+{len(rows) - shown} more)")
    return "<br>".join(parts) or "-"


def _site_loc(ctx: DocContext, module: str, function: str, line: int) -> str:
    """The location of ``line`` in the file of ``module.function``."""
    fqn = f"{module}.{function}" if module else function
    d = ctx.g.nodes[fqn] if fqn in ctx.g else None
    if d is not None and d.get("file"):
        return ctx.loc(str(d.get("root") or ""), str(d["file"]), line, PAGE)
    sf = ctx.lk.model.source(module) if module else None
    return ctx.loc(sf.root.label, sf.rel, line, PAGE) if sf else f":{line}"


def _class(ctx: DocContext, cls: ClassRows) -> list[str]:
    short = _short(cls.owner)
    if cls.is_class:
        head = [f"#### {code(short)} ({code(_module_of(ctx, cls.owner))})", "",
                f"Defined at {ctx.node_loc(cls.owner, PAGE)}.", ""]
    else:
        head = [f"#### {code(cls.owner)} (module-level functions)", ""]
    strip = short + "."
    rows = [[f"{code(f.name)} {_fn_loc(ctx, cls.owner, f)}", escape(", ".join(f.sides)) or "-",
             _names(f.adds, strip), _names(f.removes, strip), _names(f.resets, strip),
             _hands(f.hands), _capped([code(r) for r in f.reports], MAX_ITEMS) if f.adds else "-"]
            for f in cls.functions if _moves(f)]
    out = head + table(["Function", "Side", "Adds ids to", "Removes ids from", "Resets",
                        "Hands ids to", "Reports reached"], rows) + [""]
    idle = [code(f.name) for f in cls.functions if not _moves(f)]
    if idle:
        out += [f"Reached from the hooks, moving no ids: {_capped(idle, MAX_IDLE, ', ')}.", ""]
    return out


def _fn_loc(ctx: DocContext, owner: str, f: FunctionRow) -> str:
    """A function's definition: its line in the file of its class or module."""
    d = ctx.g.nodes[owner] if owner in ctx.g else None
    if d is not None and d.get("file"):
        return ctx.loc(str(d.get("root") or ""), str(d["file"]), f.line, PAGE)
    sf = ctx.lk.model.source(owner)
    return ctx.loc(sf.root.label, sf.rel, f.line, PAGE) if sf else f":{f.line}"


def _names(items: Iterable[str], strip: str) -> str:
    return _capped([code(i.removeprefix(strip)) for i in items], MAX_ITEMS)


def _hands(hands: Sequence[Hand]) -> str:
    """``target`` (kind :lines) per target, the caller for returns; by first line."""
    lines: dict[tuple[str, str], list[int]] = {}
    for h in hands:
        lines.setdefault((h.kind, h.target), []).append(h.line)
    order = sorted(lines.items(), key=lambda kv: (min(kv[1]), kv[0]))
    parts = [f"{'caller' if kind == 'return' else code(target)} "
             f"({kind} :{','.join(str(x) for x in sorted(ls))})" for (kind, target), ls in order]
    return _capped(parts, MAX_ITEMS)


def _capped(items: Sequence[str], limit: int, sep: str = "<br>") -> str:
    """The first ``limit`` items joined, then how many more; ``-`` when empty."""
    if not items:
        return "-"
    more = [f"(+{len(items) - limit} more)"] if len(items) > limit else []
    return sep.join([*items[:limit], *more])


def _moves(f: FunctionRow) -> bool:
    """Same test as ``kvflowmap lifecycle``'s text: the function moves ids."""
    return bool(f.adds or f.removes or f.resets or f.hands)


def _short(owner: str) -> str:
    return owner.rpartition(".")[2]


def _module_of(ctx: DocContext, owner: str) -> str:
    """The module of a class owner; a module owner is its own module."""
    d = ctx.g.nodes[owner] if owner in ctx.g else {}
    return owner.rpartition(".")[0] if d.get("kind") == "class" else owner
