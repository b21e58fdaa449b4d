"""The compatibility matrix: every connector class of a package against
every release's protocol surface."""

from __future__ import annotations

from kvflowmap.compat.checks import check_abstract, check_hooks, check_overrides
from kvflowmap.compat.checks_calls import check_base_calls
from kvflowmap.compat.checks_uses import (check_carriers, check_config, check_envs,
                                          check_imports, check_members)
from kvflowmap.compat.connector import ConnectorCode
from kvflowmap.compat.context import Run
from kvflowmap.compat.findings import Finding, Matrix
from kvflowmap.compat.guarded import check_guards
from kvflowmap.compat.model import Surface
from kvflowmap.compat.related import Canon
from kvflowmap.protocol import Protocol

CHECKS = (check_overrides, check_hooks, check_abstract, check_members, check_envs,
          check_imports, check_config, check_carriers, check_base_calls, check_guards)


def connector_classes(code: ConnectorCode, surfaces: list[Surface], canon: Canon,
                      protocol: Protocol) -> list[str]:
    """Connector classes that derive from a protocol base class with methods
    (the connector base, ``SupportsHMA``, the metrics bases) in some release."""
    bases = {k for s in surfaces for k, c in s.classes.items()
             if any(not m.startswith("__") for m in c.methods)}
    bases.add(protocol.base_class)
    return sorted(k for k in code.classes
                  if any(canon(b) in bases for b in code.external_bases(k)))


def build_matrix(code: ConnectorCode, surfaces: list[Surface], protocol: Protocol,
                 classes: list[str] | None = None) -> Matrix:
    """The matrix of ``classes`` (default: every connector class) × ``surfaces``."""
    canon = Canon(protocol.package, surfaces)
    classes = classes if classes is not None else connector_classes(code, surfaces, canon,
                                                                    protocol)
    matrix = Matrix([s.version for s in surfaces], classes)
    shared: dict = {}
    for cls in classes:
        for s in surfaces:
            run = Run(code, cls, s, [o for o in surfaces if o is not s], canon, protocol,
                      frozenset(classes), shared=shared)
            cell = matrix.cell(cls, s.version)
            if not run.contract:
                cell.findings.append(_missing_base(run))
                continue
            for check in CHECKS:
                cell.findings += check(run)
            cell.findings.sort(key=lambda f: (f.where, f.kind, f.message))
    return matrix


def _missing_base(run: Run) -> Finding:
    module = run.code.classes[run.cls].module
    line = run.code.classes[run.cls].fact.line
    names = ", ".join(b.rpartition(".")[2] for b in run.bases)
    return run.finding("error", "missing-base", f"its vLLM base ({names}) does not exist in "
                       f"vLLM {run.surface.version}", module, line)
