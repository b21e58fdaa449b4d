"""Request ids known by their declared type: ``request_id: ReqId``,
``self._reqs: dict[ReqId, Meta]``, ``failed: list[ReqId] = []``.

Connectors that name their id type (the protocol's ``lifecycle.id_types``)
state in their annotations what the data flow would otherwise have to find:
a parameter that is an id, a collection or dict keyed by ids, a container
whose values are keyed by ids (``dict[EngineId, dict[ReqId, Meta]]``)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from kvflowmap.facts import ClassFact
from kvflowmap.index.text import split_commas
from kvflowmap.lifecycle.ids import IdState
from kvflowmap.lifecycle.view import FnView

# ``Optional[X]`` and ``X | None`` say the same of X as X does
_OPTIONAL = re.compile(r"^(?:typing\.)?Optional\[(.*)\]$")
_GENERIC = re.compile(r"^([\w.]+)\[(.*)\]$")
# subscripted types whose first argument is what iterating them yields or what
# keys them; a tuple is a record of fields, not a collection
_RECORDS = frozenset({"tuple", "Tuple", "typing.Tuple", "Callable", "typing.Callable",
                      "Literal", "typing.Literal", "type", "Type"})


def _strip(ann: str) -> str:
    ann = ann.replace(" ", "").strip("\"'")
    parts = [p for p in ann.split("|") if p != "None"] if "[" not in ann else [ann]
    if len(parts) == 1:
        ann = parts[0]
    if ann.endswith("|None"):
        ann = ann[: -len("|None")]
    m = _OPTIONAL.match(ann)
    return m.group(1) if m else ann


def annotation_kind(ann: str | None, id_types: Iterable[str]) -> str | None:
    """``"id"`` when ``ann`` is an id type, ``"coll"`` when it is a collection
    of ids or a container keyed by them, ``"coll_valued"`` when its values are
    such collections under other keys; None otherwise."""
    if not ann:
        return None
    types = frozenset(id_types)
    if not types:
        return None
    ann = _strip(ann)
    if ann.rpartition(".")[2] in types:
        return "id"
    m = _GENERIC.match(ann)
    if m is None or m.group(1) in _RECORDS:
        return None
    args = split_commas(m.group(2))
    if not args:
        return None
    if annotation_kind(args[0], types) == "id":
        return "coll"
    if len(args) == 2 and annotation_kind(args[1], types) == "coll":
        return "coll_valued"
    return None


def seed_annotated(state: IdState, fn: FnView) -> None:
    """Parameters and assignments of ``fn`` annotated with an id type."""
    types = state.spec.id_types
    if not types:
        return
    mine = state.of(fn.fqn)
    for p in fn.fact.params:
        kind = annotation_kind(p.annotation, types)
        if kind == "id":
            mine.ids.add(p.name)
        elif kind == "coll":
            mine.colls.add(p.name)
        elif p.annotation and _strip(p.annotation).rpartition(".")[2] in state.record_types:
            mine.records.add(p.name)  # ``task: WriteTask``: one request's record
    for s in fn.stmts:
        for a in fn.assigns(s):
            kind = annotation_kind(a.annotation, types)
            if kind is None:
                continue
            if "." in a.target:
                _attr(state, a.target.rpartition(".")[2], kind)
            elif kind == "id":
                mine.ids.add(a.target)
            elif kind == "coll":
                mine.colls.add(a.target)


def seed_class_fields(state: IdState, classes: Iterable[ClassFact]) -> None:
    """Fields declared in class bodies (dataclasses, msgspec structs, typed
    metadata): ``req_blocks: dict[ReqId, ...]`` makes ``req_blocks`` keyed,
    ``d_req_id: ReqId`` makes ``<record>.d_req_id`` an id."""
    types = state.spec.id_types
    if not types:
        return
    for c in classes:
        for name, ann in c.attributes:
            kind = annotation_kind(ann, types)
            if kind is not None:
                _attr(state, name, kind)
            if kind == "id":
                state.record_types.add(c.name)


def _attr(state: IdState, name: str, kind: str) -> None:
    if kind == "id":
        state.id_attrs.add(name)
    elif kind == "coll":
        state.keyed_attrs.add(name)
    elif kind == "coll_valued":
        state.coll_valued.add(name)
