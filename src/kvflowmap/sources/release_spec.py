"""A pinned release named by the user: ``NAME==VERSION``, validated."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvflowmap.sources.errors import SourceError

# Only "==": a release in the cache must name exactly one version.
_SPEC_RE = re.compile(
    r"^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*==\s*"
    r"([A-Za-z0-9](?:[A-Za-z0-9.+!_-]*[A-Za-z0-9])?)\s*$")


@dataclass(frozen=True)
class ReleaseSpec:
    """A validated ``NAME==VERSION``."""

    name: str
    version: str

    @property
    def canonical(self) -> str:
        return canonical_name(self.name)

    def __str__(self) -> str:
        return f"{self.name}=={self.version}"


def canonical_name(name: str) -> str:
    """PEP 503 normalised project name (``Pegaflow_LLM`` -> ``pegaflow-llm``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_spec(spec: str) -> ReleaseSpec:
    """Validate ``NAME==VERSION``; raise SourceError saying what is expected."""
    m = _SPEC_RE.match(spec) if isinstance(spec, str) else None
    if m is None:
        raise SourceError(
            f"invalid release {spec!r}: expected NAME==VERSION with one exact "
            "version, e.g. 'vllm==0.33.0'")
    return ReleaseSpec(m.group(1), m.group(2))
