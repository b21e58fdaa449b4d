"""Classes: resolved bases, MRO, subclasses and member look-up."""

from __future__ import annotations

from collections import defaultdict
from typing import cast

from kvflowmap.facts import ClassFact
from kvflowmap.model.core import Def, Model
from kvflowmap.model.cycles import CycleGuard


def base_name(written: str) -> str:
    """The class a base expression names: a subscripted generic ``A[...]``
    or ``mod.A[...]`` stands for ``A`` or ``mod.A``; any other base is
    returned as written."""
    head, bracket, _ = written.partition("[")
    head = head.strip()
    if bracket and written.rstrip().endswith("]") and all(p.isidentifier() for p in head.split(".")):
        return head
    return written


class ClassIndex:
    """Bases, MRO and subclasses of every analysed class."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.bases: dict[str, tuple[str, ...]] = {}
        self.subclasses: dict[str, set[str]] = defaultdict(set)
        self._mro: dict[str, tuple[str, ...]] = {}
        self._cycles = CycleGuard()
        for fqn, d in sorted(model.defs.items()):
            if d.is_class:
                self.bases[fqn] = tuple(self._resolve_base(d, b)
                                       for b in cast(ClassFact, d.fact).bases)
        for fqn, bases in self.bases.items():
            for b in bases:
                self.subclasses[b].add(fqn)

    def _resolve_base(self, d: Def, text: str) -> str:
        first, _, rest = base_name(text).partition(".")  # Base[T] -> Base, Generic[T] -> Generic
        target = self.model.lookup(d.module, first)
        if target is None:
            # A class nested in the same class body or module scope.
            scope = d.fact.qualname.rpartition(".")[0]
            if scope and f"{d.module}.{scope}.{first}" in self.model.defs:
                target = f"{d.module}.{scope}.{first}"
            else:
                target = first
        full = f"{target}.{rest}" if rest else target
        return self.model.canonical(full)

    def is_class(self, fqn: str) -> bool:
        return fqn in self.bases

    def mro(self, fqn: str) -> tuple[str, ...]:
        """C3 linearisation; external bases appear by name, ``object`` omitted."""
        found = self._mro.get(fqn)
        if found is not None:
            return found
        return self._cycles.memoised(self._mro, fqn, lambda: self._compute_mro(fqn), (fqn,))

    def _compute_mro(self, fqn: str) -> tuple[str, ...]:
        parents = [b for b in self.bases.get(fqn, ()) if b not in ("object", "<builtin>.object")]
        seqs = [list(self.mro(b)) if b in self.bases else [b] for b in parents]
        result = _c3([[fqn], *seqs, list(parents)])
        if result is None:  # inconsistent hierarchy: fall back to depth-first
            result = [fqn] + [c for s in seqs for c in s]
            result = list(dict.fromkeys(result))
        return tuple(result)

    def related(self, a: str, b: str) -> bool:
        """One class is the other or derives from it (a ``self.x`` of both is
        the same attribute)."""
        return a == b or b in self.mro(a) or a in self.mro(b)

    def all_subclasses(self, fqn: str) -> list[str]:
        """Every analysed subclass, transitively, sorted."""
        seen: set[str] = set()
        stack = [fqn]
        while stack:
            for sub in self.subclasses.get(stack.pop(), ()):
                if sub not in seen:
                    seen.add(sub)
                    stack.append(sub)
        return sorted(seen)

    def find_member(self, cls: str, name: str, *, after: str | None = None) -> str | None:
        """FQN of the first definition of ``name`` along the MRO of ``cls``
        (starting after class ``after`` when given, as ``super()`` does)."""
        chain = self.mro(cls)
        if after is not None and after in chain:
            chain = chain[chain.index(after) + 1:]
        for k in chain:
            cand = f"{k}.{name}"
            if cand in self.model.defs:
                return cand
        return None

    def external_bases(self, cls: str) -> list[str]:
        """Bases along the MRO that are not analysed classes."""
        return [k for k in self.mro(cls) if k not in self.bases]

    def overrides(self, method_fqn: str) -> list[str]:
        """Overrides of a method in analysed subclasses of its class."""
        cls, _, name = method_fqn.rpartition(".")
        out = []
        for sub in self.all_subclasses(cls):
            cand = f"{sub}.{name}"
            if cand in self.model.defs:
                out.append(cand)
        return out

    def is_enum(self, cls: str) -> bool:
        """True when some base along the MRO is an ``enum`` class."""
        return any(k.split(".")[-1] in ("Enum", "IntEnum", "StrEnum", "Flag", "IntFlag")
                   for k in self.mro(cls))

    def class_fact(self, cls: str) -> ClassFact | None:
        d = self.model.defs.get(cls)
        return cast(ClassFact, d.fact) if d is not None and d.is_class else None


def _c3(seqs: list[list[str]]) -> list[str] | None:
    result: list[str] = []
    seqs = [s[:] for s in seqs if s]
    while seqs:
        for seq in seqs:
            head = seq[0]
            if not any(head in s[1:] for s in seqs):
                break
        else:
            return None
        result.append(head)
        for s in seqs:
            if s and s[0] == head:
                s.pop(0)
        seqs = [s for s in seqs if s]
    return result
