"""Turn SRC arguments into import roots and list their modules.

A root is a directory from which Python would import: its children are
top-level packages or modules. A package directory or a single file given as
SRC is mapped to the root above it (walking up while ``__init__.py`` exists),
and the files considered are restricted to what was given.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from kvflowmap.sources.errors import SourceError

SKIP_DIRS = {
    ".git", ".hg", ".svn", "__pycache__", ".tox", ".nox", ".venv", "venv",
    "node_modules", ".mypy_cache", ".pytest_cache", "build", "dist", ".eggs",
}


@dataclass(frozen=True)
class Root:
    """An import root and what part of it was asked for."""

    path: Path
    label: str
    subject: bool
    only: tuple[Path, ...] = ()  # restrict to these files/dirs (empty: all)
    exclude: tuple[str, ...] = ()


@dataclass(frozen=True)
class SourceFile:
    """One ``.py`` file with its module name from its root."""

    root: Root
    path: Path
    rel: str  # relative to the root, '/'-separated
    module: str
    is_package: bool  # an ``__init__.py``
    subject: bool = False  # under analysis (a subject root, within its ``only`` part)
    # vLLM's own connector driving the subject (``sources.hosts``): analysed as
    # subject, its findings not reported
    host: bool = False


@dataclass
class ModuleTable:
    """All modules found in all roots; first root wins on a name clash."""

    files: dict[str, SourceFile] = field(default_factory=dict)
    # folders that could not be listed: (path, reason); their modules are missing
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    # compiled extension modules found as ``.so``/``.pyd`` files while listing
    found_native: set[str] = field(default_factory=set)
    # the import roots listed, whose wheels' RECORD files ``native`` reads
    root_paths: list[Path] = field(default_factory=list)

    def add(self, sf: SourceFile) -> None:
        if sf.module not in self.files:
            self.files[sf.module] = sf

    @cached_property
    def native(self) -> frozenset[str]:
        """Compiled extension modules (``vllm._C``): they exist but have no
        source. Read on first use (only the import check asks), not at every
        start-up: a release's RECORD has thousands of lines."""
        out = set(self.found_native)
        for path in self.root_paths:
            out |= _native_modules(path)
        return frozenset(out)


def _release_label(base: Path, dotted: str) -> str:
    """``pegaflow-llm 0.25.1`` for a package of an installed or unpacked
    distribution (``lmcache 0.5.6 (lmcache.integration.vllm)`` for a part of
    one): what links, SARIF and headings call it. A plain checkout keeps the
    package's dotted name."""
    from kvflowmap.sources.version import distribution

    top = dotted.split(".")[0]
    dist = distribution(base, top)
    if dist is None:
        return dotted
    name, version = dist
    return f"{name} {version}" + ("" if dotted == top else f" ({dotted})")


def root_for(src: str, *, subject: bool, label: str | None = None,
             exclude: tuple[str, ...] = ()) -> Root:
    """The root for one SRC argument; raises SourceError when it is missing."""
    path = Path(src).expanduser()
    if not path.exists():
        raise SourceError(f"{src}: no such file or directory")
    path = path.resolve()
    if path.is_file():
        if path.suffix != ".py":
            raise SourceError(f"{src}: not a Python file (expected a .py file or a directory)")
        base = _climb(path.parent)
        return Root(base, label or base.name, subject, (path,), exclude)
    if (path / "__init__.py").exists():
        base = _climb(path)
        # The package's dotted name (``lmcache.integration.vllm``, not ``vllm``):
        # a folder name alone is ambiguous in links, SARIF and headings.
        dotted = ".".join(path.relative_to(base).parts) or path.name
        return Root(base, label or _release_label(base, dotted), subject, (path,), exclude)
    return Root(path, label or path.name, subject, (), exclude)


def _climb(pkg_dir: Path) -> Path:
    """The import root above a package directory."""
    cur = pkg_dir
    while (cur / "__init__.py").exists() and cur.parent != cur:
        cur = cur.parent
    return cur


def module_name(rel: Path) -> tuple[str, bool]:
    """Module name for a path relative to its root, and whether it is a package."""
    parts = list(rel.with_suffix("").parts)
    is_pkg = parts[-1] == "__init__"
    if is_pkg:
        parts = parts[:-1]
    return ".".join(parts), is_pkg


def list_files(root: Root, table: ModuleTable) -> list[SourceFile]:
    """Every ``.py`` file of a root (restricted to ``root.only``), in sorted order."""
    found: list[SourceFile] = []
    starts = root.only or (root.path,)
    for start in starts:
        if start.is_file():
            found.extend(_source(root, start, table))
            continue
        for file in _walk(start, table.unreadable):
            if file.suffix == ".py":
                found.extend(_source(root, file, table))
            else:
                table.found_native.add(_native_name(file.relative_to(root.path).as_posix()))
    found.sort(key=lambda s: s.rel)
    return found


def _source(root: Root, file: Path, table: ModuleTable) -> list[SourceFile]:
    rel = file.relative_to(root.path)
    rel_posix = rel.as_posix()
    if any(fnmatch.fnmatch(rel_posix, pat) or fnmatch.fnmatch(file.name, pat)
           for pat in root.exclude):
        return []
    name, is_pkg = module_name(rel)
    if not name or not all(p.isidentifier() for p in name.split(".")):
        return []  # not importable (scripts with dashes, top-level __init__)
    return [SourceFile(root, file, rel_posix, name, is_pkg)]


def _walk(start: Path, unreadable: list[tuple[str, str]]):
    """Walk following symlinked directories, ending symlink loops; folders
    that cannot be listed go to ``unreadable`` as (path, reason)."""
    seen: set[str] = set()

    def skipped(exc: OSError) -> None:
        where = str(exc.filename or start)
        if (where, exc.strerror or str(exc)) not in unreadable:
            unreadable.append((where, exc.strerror or str(exc)))

    for dirpath, dirnames, filenames in os.walk(start, followlinks=True, onerror=skipped):
        real = os.path.realpath(dirpath)
        if real in seen:
            dirnames[:] = []
            continue
        seen.add(real)
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS
                             and not d.endswith((".dist-info", ".egg-info")))
        for name in sorted(filenames):
            if name.endswith((".py", *_NATIVE_SUFFIXES)):
                yield Path(dirpath) / name


def merge_roots(roots: list[Root]) -> list[Root]:
    """Roots over the same import root, of the same kind, as one root whose
    ``only`` holds all their parts. Two SRCs inside one package
    (``offloading_connector.py`` and ``offloading/``) are both the subject:
    kept apart, the second root's files would be listed again and lose to
    the first's entries (``ModuleTable`` keeps one per module), as context."""
    out: list[Root] = []
    for r in roots:
        at = next((i for i, o in enumerate(out) if (o.path, o.subject, o.exclude) ==
                   (r.path, r.subject, r.exclude)), None)
        if at is None:
            out.append(r)
            continue
        o = out[at]
        only = () if not o.only or not r.only else tuple(dict.fromkeys((*o.only, *r.only)))
        label = o.label
        if only and r.label != o.label:  # the package both parts are in
            common = Path(os.path.commonpath([p if p.is_dir() else p.parent for p in only]))
            dotted = ".".join(common.relative_to(o.path).parts) if common != o.path else ""
            label = _release_label(o.path, dotted) if dotted else o.path.name
        out[at] = replace(o, only=only, label=label)
    return out


def build_table(roots: list[Root]) -> ModuleTable:
    """List every module of every root (whole roots, not only the ``only`` part):
    resolution needs to know what exists even where nothing is parsed yet."""
    table = ModuleTable()
    for root in roots:
        whole = Root(root.path, root.label, root.subject, (), root.exclude)
        for sf in list_files(whole, table):
            subject = root.subject and in_only(root, sf.path)
            table.add(SourceFile(root, sf.path, sf.rel, sf.module, sf.is_package, subject))
        table.root_paths.append(root.path)
    return table


_NATIVE_SUFFIXES = (".so", ".pyd")


def _native_modules(path: Path) -> set[str]:
    """Compiled extension modules a wheel's RECORD lists under import root
    ``path`` (an unpacked release keeps only the sources)."""
    out: set[str] = set()
    try:
        records = sorted(path.glob("*.dist-info/RECORD"))
        for record in records:
            for row in record.read_text(encoding="utf-8", errors="replace").splitlines():
                name = row.split(",", 1)[0]
                if name.endswith(_NATIVE_SUFFIXES):
                    out.add(_native_name(name))
    except OSError:
        return out  # unreadable metadata: natives unknown, as for a checkout
    return out


def _native_name(rel: str) -> str:
    """``vllm/_C.abi3.so`` -> ``vllm._C``."""
    *parts, file = rel.split("/")
    return ".".join([*parts, file.split(".", 1)[0]])


def in_only(root: Root, path: Path) -> bool:
    """Whether ``path`` is inside the part of ``root`` that was asked for."""
    return not root.only or any(path == o or o in path.parents for o in root.only)
