"""Names across a connector and a release: vLLM names as the connector
imports them (often through a re-exporting package) mapped to the FQNs of
the surface, and whether two annotation names may denote compatible values."""

from __future__ import annotations

from kvflowmap.compat.connector import ConnectorCode
from kvflowmap.compat.model import Surface

_NUMBERS = {"bool", "int", "float", "complex"}


class Canon:
    """Maps a vLLM FQN as a connector spells it to the surface's FQN."""

    def __init__(self, package: str, surfaces: list[Surface]) -> None:
        self.package = package
        self.by_short: dict[str, str] = {}
        for s in surfaces:
            for fqn in [*s.classes, *s.carriers, *s.configs, *s.states]:
                self.by_short.setdefault(fqn.rpartition(".")[2], fqn)
        self.known = set(self.by_short.values())

    def __call__(self, fqn: str) -> str:
        if fqn in self.known or not fqn.startswith(self.package + "."):
            return fqn
        return self.by_short.get(fqn.rpartition(".")[2], fqn)


class Related:
    """Whether annotation names ``x`` (the base's) and ``y`` (the override's)
    may denote compatible values, by the classes known on either side."""

    def __init__(self, surface: Surface, code: ConnectorCode, canon: Canon) -> None:
        self.surface, self.code, self.canon = surface, code, canon

    def _mro(self, name: str) -> list[str] | None:
        """The classes along ``name``'s MRO when it is fully known, else None."""
        if name in self.code.classes:
            out = self.code.ancestors(name)
            for b in self.code.external_bases(name):
                if self.canon(b) not in self.surface.classes and b not in ("ABC", "abc.ABC"):
                    return None
                out += self.surface.mro(self.canon(b))
            return out
        if name in self.surface.classes:
            return self.surface.mro(name)
        if name in self.surface.carriers:
            return [name]  # a dataclass of fields (``KVConnectorTransferResults``)
        return None

    def __call__(self, x: str, y: str) -> bool:
        x, y = self.canon(x), self.canon(y)
        if x == y or (x in _NUMBERS and y in _NUMBERS):
            return True
        if "None" in (x, y):
            return False
        if "." not in x and "." not in y:
            return False  # two different builtins
        mx, my = self._mro(x), self._mro(y)
        if mx is not None and my is not None:
            return y in mx or x in my
        if "." not in x and my is not None or "." not in y and mx is not None:
            return False  # a builtin against a fully known class that does not derive from it
        return True  # something we cannot see: cannot tell
