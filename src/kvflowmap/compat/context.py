"""One connector class on one release, with what every ``compat`` check needs:
its protocol bases resolved on the release, its methods (those reported on
its row), and the other releases of the run to compare with."""

from __future__ import annotations

from dataclasses import dataclass, field

from kvflowmap.compat.connector import ConnectorCode
from kvflowmap.compat.findings import Finding
from kvflowmap.compat.model import Method, Surface
from kvflowmap.compat.related import Canon
from kvflowmap.protocol import Protocol


@dataclass
class Run:
    """One class on one release, with what every check needs."""

    code: ConnectorCode
    cls: str
    surface: Surface
    others: list[Surface]  # the other releases of the run
    canon: Canon
    protocol: Protocol
    rows: frozenset[str] = frozenset()  # the classes of the matrix
    memo: dict = field(default_factory=dict)  # what checks work out once per run
    shared: dict = field(default_factory=dict)  # once per matrix (the same releases)

    def __post_init__(self) -> None:
        self.bases = [self.canon(b) for b in self.code.external_bases(self.cls)]
        self.contract = [k for b in self.bases for k in self.surface.mro(b)]
        self.methods = self.code.methods(self.cls)
        # A method inherited from another row of the matrix is reported on that row.
        inherited = {m for k in self.code.ancestors(self.cls)[1:] if k in self.rows
                     for m in self.code.methods(k)}
        self.reported = {n: mf for n, mf in self.methods.items()
                         if n not in inherited or n in self._own()}

    def _own(self) -> set[str]:
        c = self.code.classes[self.cls]
        return {f.name for f in self.code.facts[c.module].functions
                if f.class_qualname == c.fact.qualname}

    def param_history(self, name: str, index: int) -> dict[str, str | None]:
        """Release -> annotation of parameter ``index`` of base method ``name``
        over the releases of the run that have it."""
        out: dict[str, str | None] = {}
        for s in [self.surface, *self.others]:
            for b in self.bases:
                m = next((s.method(k, name) for k in s.mro(b) if s.method(k, name)), None)
                if m is not None and index < len(m.params):
                    out[s.version] = m.params[index].annotation
                    break
        return out

    def finding(self, severity: str, kind: str, message: str, module: str, line: int,
                base_where: object = None) -> Finding:
        where = f"{self.code.display(module)}:{line}"
        return Finding(self.cls, self.surface.version, severity, kind, message, where,
                       str(base_where) if base_where else None)

    def base_of(self, name: str) -> Method | None:
        """The release's base method ``name`` nearest along the contract MRO."""
        for k in self.contract:
            m = self.surface.method(k, name)
            if m is not None:
                return m
        return None

    def elsewhere(self, name: str) -> list[str]:
        """The other releases whose contract classes have method ``name``."""
        return [s.version for s in self.others
                if any(s.method(self.canon(k), name) for b in self.bases for k in s.mro(b))]
