"""What every page needs: the analysis, links, rules and shared lookups."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from kvflowmap.api import Analysis
from kvflowmap.docs import flowinfo
from kvflowmap.docs.markup import Links, code
from kvflowmap.graph.build import Linker
from kvflowmap.nav.states import StateMachine, state_machine


@dataclass
class DocContext:
    """Inputs of page generation, computed once."""

    analysis: Analysis
    links: Links
    rules: Sequence[Any] | None  # None: the rule engine could not be loaded
    svg: bool = True  # Graphviz available: write the SVG pictures
    connectors: list[str] = field(init=False)
    machine: StateMachine = field(init=False)

    def __post_init__(self) -> None:
        self.connectors = flowinfo.connector_classes(self.lk, self.g)
        self.machine = state_machine(self.lk)

    @property
    def g(self) -> nx.MultiDiGraph:
        return self.analysis.graph

    @property
    def lk(self) -> Linker:
        return self.analysis.linker

    def title(self) -> str:
        """``subject + context`` root labels."""
        subject = [r.label for r in self.analysis.roots if r.subject]
        context = [r.label for r in self.analysis.roots if not r.subject]
        return " + ".join(subject + context)

    def loc(self, site_root: str, file: str, line: int, page: str, text: str | None = None) -> str:
        """Markdown for a location seen from ``page``."""
        return self.links.md(site_root, file, line, page, text)

    def node_loc(self, node: str, page: str) -> str:
        """Markdown for where a node is defined."""
        d = self.g.nodes[node] if node in self.g else {}
        return self.loc(str(d.get("root") or ""), str(d.get("file") or ""),
                        int(d.get("line") or 0), page)

    def name(self, fqn: str) -> str:
        """``Class.method`` as code."""
        return code(flowinfo.qual(self.lk, fqn))


def connector_page(cls: str) -> str:
    """Page path of a connector class."""
    return f"connectors/{cls}.md"
