"""The protocol changes between two releases' surfaces: base methods added,
removed or changed (old and new signatures side by side), abstractness and
default behaviour, vLLM's call sites and keywords, carrier and config
fields, request states and ``vllm.envs`` names; each with its place in both
releases."""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.compat.model import CallSite, ClassSurface, Field, Method, Surface, Where


@dataclass(frozen=True)
class Change:
    """One difference between release A (old) and B (new)."""

    section: str  # method | member | call | carrier | state | env | config | class
    kind: str  # added | removed | changed
    subject: str  # ``KVConnectorBase_V1.handle_preemptions``, ``KVConnectorOutput.failed_recving``
    old: str | None = None
    new: str | None = None
    old_where: Where | None = None
    new_where: Where | None = None
    detail: str = ""

    def to_json(self) -> dict:
        """A JSON-ready dict."""
        return {"section": self.section, "kind": self.kind, "subject": self.subject,
                "old": self.old, "new": self.new, "detail": self.detail,
                "old_where": str(self.old_where) if self.old_where else None,
                "new_where": str(self.new_where) if self.new_where else None}


def diff_surfaces(a: Surface, b: Surface) -> list[Change]:
    """Every protocol change from ``a`` to ``b``, in a stable order."""
    out = _classes(a, b)
    out += _calls(a, b)
    for section, ta, tb in (("carrier", a.carriers, b.carriers), ("config", a.configs, b.configs),
                            ("state", a.states, b.states)):
        out += _tables(section, ta, tb)
    out += _fields("env", "vllm.envs", a.envs, b.envs)
    return out


def short(fqn: str) -> str:
    """``KVConnectorBase_V1.handle_preemptions`` for a dotted FQN of a class member."""
    cls, _, name = fqn.rpartition(".")
    return f"{cls.rpartition('.')[2]}.{name}" if cls else fqn


def _classes(a: Surface, b: Surface) -> list[Change]:
    out: list[Change] = []
    for fqn in sorted(set(a.classes) | set(b.classes)):
        ca, cb = a.classes.get(fqn), b.classes.get(fqn)
        name = fqn.rpartition(".")[2]
        if ca is None or cb is None:
            where = (cb or ca).where  # type: ignore[union-attr]
            out.append(Change("class", "added" if ca is None else "removed", name,
                              old_where=None if ca is None else where,
                              new_where=where if ca is None else None))
        ma, mb = (ca.methods if ca else {}), (cb.methods if cb else {})
        for m in sorted(set(ma) | set(mb)):
            out += _method(f"{name}.{m}", ma.get(m), mb.get(m))
        if ca is not None and cb is not None:
            out += _members(name, ca, cb)
    return out


def _members(name: str, ca: ClassSurface, cb: ClassSurface) -> list[Change]:
    """Attributes of a base class (class body or ``self.X`` its methods assign)
    that one release has and the other lacks: ``self._kv_cache_manager``,
    ``_cache_hit_source``."""
    fa = set(ca.members) - set(ca.methods)
    fb = set(cb.members) - set(cb.methods)
    out: list[Change] = []
    for m in sorted(fa ^ fb):
        added = m in fb
        out.append(Change("member", "added" if added else "removed", f"{name}.{m}",
                          old_where=None if added else ca.where,
                          new_where=cb.where if added else None))
    return out


def _method(subject: str, ma: Method | None, mb: Method | None) -> list[Change]:
    if ma is None and mb is not None:
        return [Change("method", "added", subject, None, mb.signature, None, mb.where,
                       "abstract" if mb.abstract else f"default: {mb.default}")]
    if mb is None and ma is not None:
        return [Change("method", "removed", subject, ma.signature, None, ma.where, None)]
    assert ma is not None and mb is not None
    out: list[Change] = []
    if _shape(ma) != _shape(mb):
        out.append(Change("method", "changed", subject, ma.signature, mb.signature,
                          ma.where, mb.where, _how(ma, mb)))
    if ma.abstract != mb.abstract:
        out.append(Change("method", "changed", subject, ma.signature, mb.signature, ma.where,
                          mb.where, "now abstract" if mb.abstract else "no longer abstract"))
    elif ma.default != mb.default and not mb.abstract and \
            not (ma.default.startswith("runs ") and mb.default.startswith("runs ")):
        out.append(Change("method", "changed", subject, ma.default, mb.default, ma.where,
                          mb.where, "default behaviour"))
    if ma.doc and mb.doc and _words(ma.doc) != _words(mb.doc):
        old, new = doc_change(ma.doc, mb.doc)
        out.append(Change("method", "changed", subject, old, new, ma.where, mb.where,
                          "docstring (the contract as written)"))
    return out


def _words(doc: str) -> list[str]:
    """A docstring's words without case and punctuation (a full stop added is no change)."""
    return [w for w in ("".join(c for c in x if c.isalnum()).lower() for x in doc.split()) if w]


def doc_change(a: str, b: str, context: int = 4, limit: int = 160) -> tuple[str, str]:
    """The words around the first to the last difference of two docstrings
    (whitespace already collapsed), ``…`` where cut."""
    wa, wb = a.split(), b.split()
    shortest = min(len(wa), len(wb))
    pairs = zip(wa, wb, strict=False)
    first = next((i for i, (x, y) in enumerate(pairs) if x != y), shortest)
    ends = zip(reversed(wa), reversed(wb), strict=False)
    back = next((i for i, (x, y) in enumerate(ends) if x != y), shortest)
    back = min(back, len(wa) - first, len(wb) - first)

    def cut(words: list[str]) -> str:
        lo, hi = max(first - context, 0), min(len(words) - back + context, len(words))
        text = " ".join(words[lo:hi])
        text = text if len(text) <= limit else text[:limit - 1] + "…"
        return ("…" if lo else "") + text + ("…" if hi < len(words) else "")
    return cut(wa), cut(wb)


def _norm(text: str | None) -> str | None:
    return None if text is None else "".join(c for c in text if c not in "\"' ")


def _shape(m: Method) -> tuple:
    return (m.kind, m.is_async, _norm(m.returns),
            tuple((p.name, p.kind, p.default is not None, _norm(p.annotation)) for p in m.params))


def _how(ma: Method, mb: Method) -> str:
    """The parameter-level differences, in words."""
    pa, pb = {p.name: p for p in ma.params}, {p.name: p for p in mb.params}
    renamed = [(x, y) for x, y in zip(ma.params, mb.params, strict=False) if x.name != y.name
               and x.kind == y.kind and x.name not in pb and y.name not in pa]
    notes = [f"{x.name}: {x.annotation} -> {y.name}: {y.annotation} (same position)"
             for x, y in renamed]
    pa = {n: p for n, p in pa.items() if n not in {x.name for x, _ in renamed}}
    pb = {n: p for n, p in pb.items() if n not in {y.name for _, y in renamed}}
    notes += [f"+{n}" + ("" if pb[n].default is not None or pb[n].kind in ("vararg", "kwarg")
                        else " (required)") for n in pb if n not in pa]
    notes += [f"-{n}" for n in pa if n not in pb]
    notes += [f"{n}: {pa[n].annotation} -> {pb[n].annotation}" for n in pa
              if n in pb and _norm(pa[n].annotation) != _norm(pb[n].annotation)]
    if [p.name for p in ma.params if p.name in pb] != [p.name for p in mb.params if p.name in pa]:
        notes.append("parameters reordered")
    if _norm(ma.returns) != _norm(mb.returns):
        notes.append(f"returns {ma.returns} -> {mb.returns}")
    if ma.kind != mb.kind or ma.is_async != mb.is_async:
        notes.append("method kind")
    return "; ".join(notes) or "defaults or parameter kinds"


def _calls(a: Surface, b: Surface) -> list[Change]:
    """Hooks vLLM starts or stops calling, the modules and functions it calls
    them from, the keywords and positional arguments it passes."""
    out: list[Change] = []
    for name in sorted({c.method for c in a.calls} | {c.method for c in b.calls}):
        ca, cb = a.calls_of(name), b.calls_of(name)
        wa, wb = (ca[0].where if ca else None), (cb[0].where if cb else None)
        if not ca or not cb:
            out.append(Change("call", "added" if not ca else "removed", name, old_where=wa,
                              new_where=wb, detail=f"{len(cb or ca)} call site(s)"))
            continue
        fa, fb = {c.where.file for c in ca}, {c.where.file for c in cb}
        if fa != fb:  # e.g. get_finished: from the workers in 0.29, only via the base in 0.30
            gone, new = sorted(fa - fb), sorted(fb - fa)
            site = next((c for c in cb if c.where.file in new), cb[0])
            out.append(Change("call", "changed", name, ", ".join(sorted(fa)),
                              ", ".join(sorted(fb)), wa, site.where,
                              "; ".join(part for part in (
                                  f"no longer called from {', '.join(gone)}" if gone else "",
                                  f"now called from {', '.join(sorted({c.caller for c in cb if c.where.file in new}))}"
                                  if new else "") if part)))
        else:
            out += _callers(name, ca, cb)
        ka, kb = {k for c in ca for k in c.keywords}, {k for c in cb for k in c.keywords}
        pa, pb = max(c.positional for c in ca), max(c.positional for c in cb)
        for kw in sorted(kb - ka):
            site = next(c for c in cb if kw in c.keywords)
            out.append(Change("call", "changed", name, None, f"{kw}=", wa, site.where,
                              f"vLLM now passes keyword {kw}="))
        for kw in sorted(ka - kb):
            site = next(c for c in ca if kw in c.keywords)
            out.append(Change("call", "changed", name, f"{kw}=", None, site.where, wb,
                              f"vLLM no longer passes keyword {kw}="))
        if pb != pa:
            site = next(c for c in (cb if pb > pa else ca) if c.positional == max(pa, pb))
            out.append(Change("call", "changed", name, f"{pa} positional", f"{pb} positional",
                              wa if pb > pa else site.where, site.where if pb > pa else wb,
                              f"vLLM passes {'more' if pb > pa else 'fewer'} positional "
                              "arguments"))
    return out


def _callers(name: str, ca: list[CallSite], cb: list[CallSite]) -> list[Change]:
    """Callers of a hook that come or go within the same modules (a new step
    that calls ``wait_for_save``, a caller renamed)."""
    fa, fb = {c.caller: c for c in ca}, {c.caller: c for c in cb}
    new, gone = sorted(set(fb) - set(fa)), sorted(set(fa) - set(fb))
    if not new and not gone:
        return []
    parts = [f"now called from {', '.join(n.rpartition('.')[2] for n in new)}" if new else "",
             f"no longer from {', '.join(g.rpartition('.')[2] for g in gone)}" if gone else ""]
    old = fa[gone[0]].where if gone else ca[0].where
    site = fb[new[0]].where if new else cb[0].where
    return [Change("call", "changed", name, ", ".join(g.rpartition(".")[2] for g in gone) or None,
                   ", ".join(n.rpartition(".")[2] for n in new) or None, old, site,
                   "; ".join(p for p in parts if p))]


def _tables(section: str, ta: dict[str, dict[str, Field]],
            tb: dict[str, dict[str, Field]]) -> list[Change]:
    out: list[Change] = []
    for cls in sorted(set(ta) | set(tb)):
        short = cls.rpartition(".")[2]
        if (cls in ta) != (cls in tb) and section in ("carrier", "config"):
            fields = (tb if cls in tb else ta)[cls]
            where = next(iter(fields.values())).where if fields else None
            detail = f"class with fields {', '.join(fields)}" if section == "carrier" else \
                f"{len(fields)} fields"
            out.append(Change(section, "added" if cls in tb else "removed", short,
                              old_where=None if cls in tb else where,
                              new_where=where if cls in tb else None, detail=detail))
            if section == "config":  # the class, not each field; a carrier's fields too
                continue
        out += _fields(section, short, ta.get(cls, {}), tb.get(cls, {}))
    return out


def _fields(section: str, owner: str, fa: dict[str, Field], fb: dict[str, Field]) -> list[Change]:
    out: list[Change] = []
    for n in sorted(set(fa) | set(fb)):
        a, b = fa.get(n), fb.get(n)
        subject = f"{owner}.{n}"
        if a is None and b is not None:
            out.append(Change(section, "added", subject, None, b.annotation, None, b.where))
        elif b is None and a is not None:
            out.append(Change(section, "removed", subject, a.annotation, None, a.where, None))
        elif a and b and _norm(a.annotation) != _norm(b.annotation):
            out.append(Change(section, "changed", subject, a.annotation, b.annotation,
                              a.where, b.where))
    return out
