"""Render ``kvflowmap lifecycle`` (see ``nav.lifecycle_summary``) as text or JSON.

Both are deterministic: sorted, no colour, no terminal width (lists wrap at
a fixed width).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict

from kvflowmap.nav.lifecycle_summary import (ClassRows, ContainerRow, FunctionRow, Hand,
                                             PackageLifecycle, SiteRow)

WIDTH = 100


def lifecycle_json(packages: list[PackageLifecycle]) -> str:
    """``{"packages": [...]}`` with sorted keys, two-space indent."""
    return json.dumps({"packages": [asdict(p) for p in packages]}, indent=2,
                      sort_keys=True) + "\n"


def lifecycle_text(packages: list[PackageLifecycle]) -> str:
    """A readable listing: containers, then the hook functions by class."""
    if not packages:
        return "no request-keyed containers or hook functions found in the subject code\n"
    out: list[str] = []
    for p in packages:
        out += _package(p)
    return "\n".join(out).rstrip("\n") + "\n"


def _short(owner: str) -> str:
    return owner.rpartition(".")[2]


def _module(owner: str) -> str:
    return owner.rpartition(".")[0]


def _field(label: str, items: Iterable[str], indent: int) -> list[str]:
    """``label  a, b, c`` wrapped under itself between items; ``-`` when empty."""
    head = " " * indent + f"{label:<9}"
    lines: list[str] = []
    cur = ""
    for item in items:
        if cur and len(head) + len(cur) + len(item) + 2 > WIDTH:
            lines.append(cur + ",")
            cur = item
        else:
            cur = f"{cur}, {item}" if cur else item
    lines.append(cur or "-")
    return [head + lines[0]] + [" " * len(head) + x for x in lines[1:]]


def _package(p: PackageLifecycle) -> list[str]:
    n_fns = sum(len(c.functions) for c in p.classes)
    title = (f"{p.package}: {len(p.containers)} request-keyed containers, "
             f"{n_fns} functions reached from hooks")
    out = [title, "=" * len(title), "", "Containers (where ids are added, removed, reset, "
           "and the reports that read them)", ""]
    for c in p.containers:
        out += _container(c)
    if not p.containers:
        out.append("  (none)")
    out += ["", "Hooks (per function: the containers it touches, where it hands ids, "
            "the reports they reach)", ""]
    for cls in p.classes:
        out += _class(cls)
    out.append("")
    return out


def _sites(rows: tuple[SiteRow, ...], cls: str) -> list[str]:
    """``meth:12,40`` per function; the class prefix dropped when it is ``cls``."""
    lines: dict[str, list[int]] = {}
    for r in rows:
        name = r.function.removeprefix(cls + ".")
        lines.setdefault(name, []).append(r.line)
    return [f"{n}:{','.join(str(x) for x in sorted(ls))}" for n, ls in sorted(lines.items())]


def _container(c: ContainerRow) -> list[str]:
    cls = _short(c.owner)
    out = [f"  {c.label}   ({_module(c.owner)})"]
    out += _field("add", _sites(c.adds, cls), 4)
    out += _field("remove", _sites(c.removes, cls), 4)
    if c.resets:
        out += _field("reset", _sites(c.resets, cls), 4)
    out += _field("report", c.reported_by, 4)
    return out


def _hands(hands: tuple[Hand, ...]) -> list[str]:
    """``callee (handover :12,30)`` per callee, ``caller (return :40)``; by first line."""
    lines: dict[tuple[str, str], list[int]] = {}
    for h in hands:
        lines.setdefault((h.kind, h.target), []).append(h.line)
    order = sorted(lines.items(), key=lambda kv: (min(kv[1]), kv[0]))
    return [f"{'caller' if kind == 'return' else target} "
            f"({kind} :{','.join(str(x) for x in sorted(ls))})" for (kind, target), ls in order]


def _moves(f: FunctionRow) -> bool:
    return bool(f.adds or f.removes or f.resets or f.hands)


def _class(cls: ClassRows) -> list[str]:
    short = _short(cls.owner)
    out = [f"  {short}   ({_module(cls.owner)})" if cls.is_class
           else f"  {cls.owner}   (module-level functions)"]
    strip = short + "."
    for f in cls.functions:
        if not _moves(f):
            continue
        out.append(f"    {f.name}:{f.line}   [{', '.join(f.sides)}]")
        for label, items in (("adds", f.adds), ("removes", f.removes), ("resets", f.resets)):
            if items:
                out += _field(label, (i.removeprefix(strip) for i in items), 6)
        if f.hands:
            out += _field("hands", _hands(f.hands), 6)
        if f.adds:
            out += _field("reports", f.reports, 6)
    idle = [f.name for f in cls.functions if not _moves(f)]
    if idle:
        out += _field("no ids", idle, 4)
    return out
