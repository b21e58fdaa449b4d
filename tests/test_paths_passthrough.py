"""``path`` through a function that reads and writes the same fields (vLLM's
``KVOutputAggregator.aggregate`` merges each worker's output field by field):
what it read of one field leaves only into that field."""

from __future__ import annotations

import networkx as nx

from kvflowmap.nav import paths


def _graph() -> nx.MultiDiGraph:
    g = nx.MultiDiGraph()
    for n in ("m.hook", "m.agg", "m.on_failed", "m.on_blocks"):
        g.add_node(n, kind="function", file="m.py", line=1, root="m")
    for n in ("m.Out.blocks", "m.Out.failed"):
        g.add_node(n, kind="field", file="m.py", line=1, root="m")

    def edge(u: str, v: str, kind: str) -> None:
        g.add_edge(u, v, kind=kind, file="m.py", line=2, root="m")

    edge("m.hook", "m.Out.blocks", "produces")
    for f in ("m.Out.blocks", "m.Out.failed"):
        edge(f, "m.agg", "consumes")
        edge("m.agg", f, "produces")
    edge("m.Out.failed", "m.on_failed", "consumes")
    edge("m.Out.blocks", "m.on_blocks", "consumes")
    return g


def test_a_pass_through_function_keeps_the_field_it_read() -> None:
    g = _graph()
    assert isinstance(paths.find_paths(g, "m.hook", "m.on_blocks"), paths.PathResult)
    # blocks read by the aggregator do not become the merged output's failures
    assert isinstance(paths.find_paths(g, "m.hook", "m.on_failed"), paths.NoPath)


def test_a_function_that_only_transforms_still_links_its_fields() -> None:
    g = _graph()
    g.remove_edge("m.agg", "m.Out.blocks")  # reads blocks, writes failures: a transformer
    assert isinstance(paths.find_paths(g, "m.hook", "m.on_failed"), paths.PathResult)
