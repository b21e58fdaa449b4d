"""The workers' side of an announced request: worker code that takes the ids
of a metadata field the scheduler's builder fills from an announcing
container into a container of its own (``for req_id in
metadata.reqs_in_batch: self._reqs_to_process.add(req_id)``). When
``request_finished`` ends an announced request without a word
(``announced.unannounced``), this is where its entry stays, and where a fix
(a not-processed set the worker removes by) lands as often as in the
scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.lifecycle.announced import Unannounced
from kvflowmap.lifecycle.containers import ADD_OPS, self_attr
from kvflowmap.lifecycle.effects import Effects
from kvflowmap.lifecycle.ids import loop_targets
from kvflowmap.lifecycle.view import FnView, walk


@dataclass(frozen=True)
class Intake:
    """Worker code that takes the ids of metadata field ``field`` (fed from
    the scheduler's ``self.<u.attr>``) into its own ``self.<attr>`` at
    ``line``: where an unannounced request's entry stays."""

    fqn: str
    line: int
    attr: str
    field: str
    u: Unannounced


def intakes(fns: dict[str, FnView], eff: Effects, u: Unannounced,
            sides: dict[str, frozenset[str]]) -> list[Intake]:
    """The worker-side loops over a metadata field the builder fills from
    ``self.<u.attr>`` that add each id to a ``self`` container: the workers'
    entry that ``u``'s path leaves unpaired."""
    builder = fns[u.builder]
    fields = metadata_fields(fns, eff, builder, u.attr)
    kinds = _metadata_classes(builder)
    out = []
    worker = frozenset({"worker"})
    for f, fn in sorted(fns.items()):
        if sides.get(f) != worker or not _knows(fn, kinds):
            continue
        for s in fn.stmts:
            if s.kind != "for":
                continue
            names, _ = loop_targets(s.text)
            base = _iterable_base(s.text)
            field = base.rpartition(".")[2]
            if not names or "." not in base or field not in fields:
                continue
            for t in walk(s.body):
                for op in fn.containers(t):
                    x = self_attr(op.container)
                    if x and op.op in ADD_OPS and op.key == names[0]:
                        out.append(Intake(f, op.line, x, field, u))
    return out


def _metadata_classes(builder: FnView) -> set[str]:
    """Short names of the classes the builder makes what it returns from
    (``meta = NixlConnectorMetadata()``)."""
    back = {(r.value or "").strip() for r in builder.all_returns}
    return {a.value[:-2].rpartition(".")[2] for a in builder.all_assigns
            if a.target in back and a.value and a.value.endswith("()")}


def _knows(fn: FnView, kinds: set[str]) -> bool:
    """``fn``'s module defines or imports one of the metadata classes: it
    is the worker of the same connector (another connector in the package
    reads fields of the same names from metadata of its own)."""
    return bool(kinds) and (any(c.name in kinds for c in fn.facts.classes)
                            or any((i.asname or i.name) in kinds for i in fn.facts.imports))


def metadata_fields(fns: dict[str, FnView], eff: Effects, builder: FnView, attr: str) -> set[str]:
    """Fields of the metadata the builder fills from ``self.<attr>``:
    ``meta.f = self.X``, ``Meta(f=self.X)``, ``meta.f[rid] = ...`` in a loop
    over it, or the fields a metadata method called in that loop fills
    (``meta.add_new_req(rid, ...)`` writing ``self.reqs_to_send[rid]``)."""
    out: set[str] = set()
    mine = f"self.{attr}"
    for a in builder.all_assigns:
        if a.value == mine and "." in a.target and not a.target.startswith("self."):
            out.add(a.target.rpartition(".")[2])
    for c in builder.all_calls:
        out.update(k for k, v in c.kwargs if v == mine and k)
    for s in builder.stmts:
        if s.kind != "for" or self_attr(_iterable_base(s.text)) != attr:
            continue
        for t in walk(s.body):
            for op in builder.containers(t):
                head, _, rest = op.container.partition(".")
                if head != "self" and rest and op.op in ADD_OPS:
                    out.add(rest.removesuffix("[]").rpartition(".")[2])
            for c in builder.calls(t):
                if (c.callee or "").startswith(("self.", "super()")):
                    continue
                for target in eff.calls.resolve(builder.ctx, c):
                    callee = fns.get(target.fqn)
                    for op in callee.all_containers if callee else ():
                        x = self_attr(op.container)
                        if x and op.op in ADD_OPS:
                            out.add(x)
    return out


def _iterable_base(text: str | None) -> str:
    """``self._x`` of ``for k, v in self._x.items()``."""
    _, iterable = loop_targets(text)
    base = iterable.removesuffix("()")
    return base.rsplit(".", 1)[0] if base.endswith((".items", ".keys", ".values")) else base
