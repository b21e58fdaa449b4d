"""``path`` through a base method's call on its own object: the dispatch
that follows reaches only classes that do not override that base method
(vLLM's default ``get_transfer_results`` calls ``get_finished``; a
connector that overrides ``get_transfer_results`` never gets there)."""

from __future__ import annotations

import networkx as nx

from kvflowmap.nav import paths


def _graph(super_call: bool = False) -> nx.MultiDiGraph:
    g = nx.MultiDiGraph()
    g.graph["mro"] = {"m.Base": ("m.Base",), "m.Own": ("m.Own", "m.Base"),
                      "m.Plain": ("m.Plain", "m.Base")}
    for n in ("m.Base.results", "m.Base.finished", "m.Own.results", "m.Own.finished",
              "m.Plain.finished", "m.runner"):
        g.add_node(n, kind="function", file="m.py", line=1, root="m")

    def edge(u: str, v: str, kind: str) -> None:
        g.add_edge(u, v, kind=kind, file="m.py", line=2, root="m")

    edge("m.runner", "m.Base.results", "call")
    edge("m.Base.results", "m.Own.results", "dispatch")
    edge("m.Base.results", "m.Base.finished", "call")  # self.finished()
    edge("m.Base.finished", "m.Own.finished", "dispatch")
    edge("m.Base.finished", "m.Plain.finished", "dispatch")
    if super_call:
        edge("m.Own.results", "m.Base.results", "call")  # super().results()
    return g


def test_an_override_of_the_calling_base_method_is_not_reached_through_it() -> None:
    found = paths.find_paths(_graph(), "m.runner", "m.Own.finished")
    assert isinstance(found, paths.NoPath) and found.overridden and not found.returned
    assert "overrides" in paths.paths_text(found)


def test_a_class_that_keeps_the_base_method_is_reached() -> None:
    found = paths.find_paths(_graph(), "m.runner", "m.Plain.finished")
    assert isinstance(found, paths.PathResult)
    assert [s.dst for s in found.paths[0]] == ["m.Base.results", "m.Base.finished",
                                               "m.Plain.finished"]


def test_an_override_that_calls_super_still_runs_the_base_method() -> None:
    assert isinstance(paths.find_paths(_graph(super_call=True), "m.runner", "m.Own.finished"),
                      paths.PathResult)
