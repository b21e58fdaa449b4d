"""One call from sources to the linked graph: ``analyse`` and ``build_graph``.

Indexing is lazy by default: every subject file is parsed, but context code
(vLLM) is parsed only from the protocol's entry modules outward along imports,
up to ``CONTEXT_IMPORT_DEPTH`` hops (2: measured on vLLM 0.33.0, enough to type the connector, the factory and the carriers; --all for everything). ``all_files=True`` parses everything.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kvflowmap.facts import FileFacts
from kvflowmap.index.cache import FactCache, default_cache_dir
from kvflowmap.index.runner import Indexer, IndexStats, Progress
from kvflowmap.problems import Problem
from kvflowmap.protocol import Protocol, load_protocol
from kvflowmap.request import Request, make_roots
from kvflowmap.sources.hosts import mark_hosts
from kvflowmap.sources.roots import ModuleTable, Root, build_table

if TYPE_CHECKING:
    import networkx as nx

    from kvflowmap.graph import build

CONTEXT_IMPORT_DEPTH = 2


@dataclass
class Analysis:
    """The result of analysing a set of roots."""

    graph: nx.MultiDiGraph
    linker: build.Linker
    roots: list[Root]
    stats: IndexStats
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    vllm_version: str | None = None
    # the same warnings as data (``warnings`` is their text)
    problems: list[Problem] = field(default_factory=list)

    @property
    def unresolved(self) -> list[build.Unresolved]:
        return self.linker.unresolved


def _package_prefix(root: Root) -> str:
    """``a.b`` when the one folder asked for is package ``a/b`` inside the
    import root (its modules are named ``a.b.*``); else empty."""
    if len(root.only) != 1 or not root.only[0].is_dir():
        return ""
    return ".".join(root.only[0].relative_to(root.path).parts)


def analyse(req: Request, progress: Progress | None = None) -> Analysis:
    """Index, link and build the graph for ``req``."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    protocol = load_protocol(req.protocol_path)
    roots = make_roots(req)
    table = build_table(roots)
    hosts = mark_hosts(table, protocol.package, protocol.base_class.rsplit(".", 2)[0])
    timings["list"] = time.perf_counter() - t0
    cache = FactCache((req.cache_dir or default_cache_dir()) if req.use_cache else None)
    stats = IndexStats()
    t0 = time.perf_counter()
    facts = _index(req, roots, table, protocol, cache, stats, progress)
    timings["index"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    from kvflowmap.graph import build
    from kvflowmap.model.core import Model

    model = Model(facts, table)
    lk = build.Linker(model, protocol)
    problems = [_problem(table, m, f) for m, f in sorted(facts.items()) if f.problem]
    problems += [Problem(f"folder not readable ({why}); the modules in it are not analysed",
                         path) for path, why in sorted(table.unreadable)]
    version = _vllm_version(roots, protocol.package)
    _link(lk, version)
    timings["link"] = time.perf_counter() - t0
    lk.graph.graph["roots"] = [{"label": r.label, "path": str(r.path), "subject": r.subject,
                                "prefix": _package_prefix(r)} for r in roots]
    lk.graph.graph["vllm_version"] = version
    lk.graph.graph["kv_states"] = list(protocol.kv_states)
    lk.graph.graph["connector_base"] = protocol.base_class
    lk.graph.graph["hosts"] = hosts
    problems += [Problem(w) for w in lk.warnings]
    return Analysis(lk.graph, lk, roots, stats, [p.text for p in problems], timings, version,
                    problems)


def _link(lk: build.Linker, version: str | None) -> None:
    from kvflowmap.graph import build, dataflow, paramstates, returnflow, returnstates

    build.add_definitions(lk)
    build.add_calls(lk)
    build.add_dispatch(lk)
    build.add_registry(lk)
    dataflow.add_states(lk)
    paramstates.add_param_states(lk)
    returnflow.add_return_producers(lk, dataflow.add_fields(lk))
    returnstates.add_return_states(lk)
    dataflow.add_bridges(lk)
    dataflow.check_protocol(lk, version)
    dataflow.check_carrier_fields(lk, version)
    dataflow.assign_sides(lk)
    dataflow.mark_flow(lk)


def build_graph(sources: Sequence[str], **kwargs) -> nx.MultiDiGraph:
    """Convenience for tests and scripts: the graph of ``sources``."""
    return analyse(Request(sources=sources, **kwargs)).graph


def _index(req: Request, roots: list[Root], table: ModuleTable, protocol: Protocol,
           cache: FactCache, stats: IndexStats, progress: Progress | None
           ) -> dict[str, FileFacts]:
    # The table already knows which files are subject: no second walk.
    depth = {m: 0 for m, sf in table.files.items() if sf.subject or req.all_files}
    for name in protocol.entry_modules():
        mod = _module_prefix(table, name)
        if mod and mod not in depth:
            depth[mod] = 1
    indexer = Indexer(cache, stats, jobs=req.jobs, progress=progress)
    indexer.add(table.files[m] for m in sorted(depth))
    indexer.start()
    # The linker's modules (networkx, the model) load while the workers parse.
    import kvflowmap.graph.build  # noqa: F401
    import kvflowmap.graph.dataflow  # noqa: F401
    facts: dict[str, FileFacts] = {}

    def follow(module: str) -> None:
        # A module's depth is its fewest context hops from the subject; facts
        # arrive in completion order, so a shorter way found later lowers the
        # depth and is followed again: the set indexed is the same every run.
        next_depth = depth[module] + (0 if table.files[module].subject else 1)
        if next_depth > CONTEXT_IMPORT_DEPTH and not req.all_files:
            return
        for dep in _imported_modules(module, facts[module], table):
            d = max(next_depth, 0 if table.files[dep].subject else 1)
            if dep not in depth:
                depth[dep] = d
                indexer.add([table.files[dep]])
            elif d < depth[dep]:
                depth[dep] = d
                if dep in facts:
                    follow(dep)

    for sf, ff in indexer.results():
        facts[sf.module] = ff
        follow(sf.module)
    return dict(sorted(facts.items()))


def _module_prefix(table: ModuleTable, name: str) -> str | None:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        cand = ".".join(parts[:i])
        if cand in table.files:
            return cand
    return None


def _imported_modules(module: str, ff: FileFacts, table: ModuleTable) -> list[str]:
    """Modules an import statement makes needed (and their parent packages)."""
    is_pkg = bool(table.files.get(module) and table.files[module].is_package)
    out: list[str] = []
    for imp in ff.imports:
        if imp.level:
            parts = module.split(".")
            base = parts if is_pkg else parts[:-1]
            base = base[: len(base) - (imp.level - 1)]
            absolute = ".".join([*base, imp.module] if imp.module else base)
        else:
            absolute = imp.module
        cands = [absolute]
        if imp.name and imp.name != "*":
            cands.append(f"{absolute}.{imp.name}")
        for c in cands:
            parts = c.split(".")
            for i in range(1, len(parts) + 1):
                p = ".".join(parts[:i])
                if p in table.files:
                    out.append(p)
    return out


def _problem(table: ModuleTable, module: str, ff: FileFacts) -> Problem:
    sf = table.files.get(module)
    path = str(sf.path) if sf else ff.path
    assert ff.problem is not None
    return Problem(ff.problem.reason, path, ff.problem.line)


def _vllm_version(roots: list[Root], package: str) -> str | None:
    from kvflowmap.sources.version import detect_version

    for r in roots:
        if (r.path / package).is_dir():
            v = detect_version(r.path, package)
            if v:
                return v
    return None
