"""``path`` keeps to objects that can meet at run time: a base method's call
on its own object dispatches only to classes that do not override that base
method (vLLM's default ``get_transfer_results`` calls ``get_finished``; a
connector that overrides ``get_transfer_results`` never gets there), and a
path does not join the objects of two connectors (NIXL's pull scheduler and
push worker)."""

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


def _two_connectors() -> nx.MultiDiGraph:
    """Two connectors of one base, each building its own worker; the
    metadata class is built by the shared base scheduler."""
    g = nx.MultiDiGraph()
    base = "m.Base"
    g.graph["connector_base"] = base
    g.graph["mro"] = {base: (base,), "m.PullConn": ("m.PullConn", base),
                      "m.PushConn": ("m.PushConn", base), "m.BaseSched": ("m.BaseSched",),
                      "m.PullSched": ("m.PullSched", "m.BaseSched"),
                      "m.PushSched": ("m.PushSched", "m.BaseSched"),
                      "m.PullWorker": ("m.PullWorker",), "m.PushWorker": ("m.PushWorker",),
                      "m.Meta": ("m.Meta",)}
    for n in ("m.PullConn.__init__", "m.PushConn.__init__", "m.PullSched.__init__",
              "m.PushSched.__init__", "m.PullWorker.__init__", "m.PushWorker.__init__",
              "m.PullSched.finish", "m.BaseSched.build", "m.Meta.__init__",
              "m.PullWorker.load", "m.PushWorker.load"):
        g.add_node(n, kind="function", file="m.py", line=1, root="m")
    g.add_node("m.Meta.reqs", kind="field", file="m.py", line=1, root="m")

    def edge(u: str, v: str, kind: str) -> None:
        g.add_edge(u, v, kind=kind, file="m.py", line=2, root="m")

    for side in ("Pull", "Push"):
        edge(f"m.{side}Conn.__init__", f"m.{side}Sched.__init__", "call")
        edge(f"m.{side}Conn.__init__", f"m.{side}Worker.__init__", "call")
        edge("m.Meta.reqs", f"m.{side}Worker.load", "consumes")
    edge("m.BaseSched.build", "m.Meta.__init__", "call")
    edge("m.PullSched.finish", "m.BaseSched.build", "call")
    edge("m.BaseSched.build", "m.Meta.reqs", "produces")
    return g


def test_a_path_stays_with_one_connectors_objects() -> None:
    g = _two_connectors()
    found = paths.find_paths(g, "m.PullSched.finish", "m.PullWorker.load")
    assert isinstance(found, paths.PathResult)
    crossed = paths.find_paths(g, "m.PullSched.finish", "m.PushWorker.load")
    assert isinstance(crossed, paths.NoPath) and crossed.crossed
    assert "two different connectors" in paths.paths_text(crossed)
    # the shared base's method serves both: no constraint from it alone
    assert isinstance(paths.find_paths(g, "m.BaseSched.build", "m.PushWorker.load"),
                      paths.PathResult)


def test_a_base_default_serves_only_connectors_that_do_not_override_it() -> None:
    """The base's ``results`` reads the metadata and fills the output vLLM
    reads; the pull connector overrides ``results`` (no ``super()``), so its
    metadata never takes that way, while the push connector's does."""
    g = _two_connectors()
    g.graph["mro"]["m.Engine"] = ("m.Engine",)
    for n in ("m.Base.results", "m.PullConn.results", "m.PushSched.finish", "m.Engine.update"):
        g.add_node(n, kind="function", file="m.py", line=1, root="m")
    g.add_node("m.Out.done", kind="field", file="m.py", line=1, root="m")

    def edge(u: str, v: str, kind: str) -> None:
        g.add_edge(u, v, kind=kind, file="m.py", line=3, root="m")

    edge("m.PushSched.finish", "m.BaseSched.build", "call")
    edge("m.Meta.reqs", "m.Base.results", "consumes")
    edge("m.Base.results", "m.Out.done", "produces")
    edge("m.Out.done", "m.Engine.update", "consumes")
    assert isinstance(paths.find_paths(g, "m.PushSched.finish", "m.Engine.update"),
                      paths.PathResult)
    found = paths.find_paths(g, "m.PullSched.finish", "m.Engine.update")
    assert isinstance(found, paths.NoPath) and found.crossed
    edge("m.PullConn.results", "m.Base.results", "call")  # super().results()
    assert isinstance(paths.find_paths(g, "m.PullSched.finish", "m.Engine.update"),
                      paths.PathResult)


def test_a_call_that_names_the_base_method_dispatches_to_the_override() -> None:
    """vLLM calls ``connector.load()`` on the base type: the base method on
    the path is the call's name for the override, not code that runs."""
    g = _two_connectors()
    g.graph["mro"]["m.Engine"] = ("m.Engine",)
    for n in ("m.Engine.step", "m.Base.load", "m.PullConn.load"):
        g.add_node(n, kind="function", file="m.py", line=1, root="m")
    g.add_edge("m.Engine.step", "m.Base.load", kind="call", file="m.py", line=4, root="m")
    g.add_edge("m.Base.load", "m.PullConn.load", kind="dispatch", file="m.py", line=4, root="m")
    assert isinstance(paths.find_paths(g, "m.Engine.step", "m.PullConn.load"), paths.PathResult)


def _extended_build() -> nx.MultiDiGraph:
    """A base ``build`` that reads a container and an override (in ``Push``)
    that extends it with ``super().build()``, as vLLM 0.34's NIXL push
    scheduler does; the override writes a field the base does not."""
    g = nx.MultiDiGraph()
    g.graph["mro"] = {"m.Base": ("m.Base",), "m.Push": ("m.Push", "m.Base")}
    for n in ("m.Base.build", "m.Push.build", "m.Push.alloc", "m.Push.finish"):
        g.add_node(n, kind="function", file="m.py", line=1, root="m")
    for n in ("m.Base._batch", "m.Meta.push_blocks"):
        g.add_node(n, kind="field", file="m.py", line=1, root="m")

    def edge(u: str, v: str, kind: str) -> None:
        g.add_edge(u, v, kind=kind, file="m.py", line=2, root="m")

    edge("m.Push.alloc", "m.Base._batch", "produces")
    edge("m.Base._batch", "m.Base.build", "consumes")  # the base reads it
    edge("m.Base.build", "m.Push.build", "dispatch")
    edge("m.Push.build", "m.Base.build", "call")  # super().build()
    edge("m.Push.build", "m.Meta.push_blocks", "produces")
    edge("m.Push.finish", "m.Push.build", "call")
    return g


def test_a_base_method_that_reads_a_value_does_not_dispatch_it_on() -> None:
    """The base's body read the batch: it runs, it is no name a call
    dispatches from, so the override's field is not where the batch goes."""
    found = paths.find_paths(_extended_build(), "m.Push.alloc", "m.Meta.push_blocks")
    assert isinstance(found, paths.NoPath) and found.overridden


def test_a_super_call_does_not_dispatch_to_a_sibling() -> None:
    """``Push.build`` calls ``super().build()`` on a ``Push`` object: the
    base's ``build`` runs there and dispatches to no other override."""
    g = _extended_build()
    g.graph["mro"]["m.Pull"] = ("m.Pull", "m.Base")
    g.add_node("m.Pull.build", kind="function", file="m.py", line=1, root="m")
    g.add_node("m.Meta.pull_blocks", kind="field", file="m.py", line=1, root="m")
    g.add_edge("m.Base.build", "m.Pull.build", kind="dispatch", file="m.py", line=3, root="m")
    g.add_edge("m.Pull.build", "m.Meta.pull_blocks", kind="produces", file="m.py", line=4,
               root="m")
    g.add_node("m.step", kind="function", file="m.py", line=1, root="m")
    g.add_edge("m.step", "m.Push.build", kind="call", file="m.py", line=5, root="m")
    found = paths.find_paths(g, "m.step", "m.Meta.pull_blocks")
    assert isinstance(found, paths.NoPath) and found.overridden
