"""A connector package as ``compat`` reads it: its modules' facts, its
classes with bases resolved to FQNs, and the classes that subclass a vLLM
protocol base (directly or through the connector's own classes)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from kvflowmap.compat.model import depth_first
from kvflowmap.compat.names import Names, module_of
from kvflowmap.facts import ClassFact, FileFacts, FunctionFact

Parse = Callable[[Path, str], FileFacts]

_SKIP_DIRS = {"tests", "test", "__pycache__", "build", "dist", ".git", ".venv", "node_modules"}


@dataclass(frozen=True)
class ConnectorClass:
    """A class of the connector package."""

    fqn: str
    module: str
    fact: ClassFact
    bases: tuple[str, ...]  # resolved FQNs (vLLM names as the connector imports them)


class ConnectorCode:
    """The modules and classes of the connector sources under ``roots``."""

    def __init__(self, sources: Iterable[Path], parse: Parse) -> None:
        self.facts: dict[str, FileFacts] = {}
        self.names: dict[str, Names] = {}
        self.lines: dict[str, list[str]] = {}
        self.files: dict[str, Path] = {}
        for root, path in _files(sources):
            module = module_of(root, path)
            display = path.relative_to(root).as_posix()
            self.facts[module] = parse(path, display)
            self.files[module] = path
            self.names[module] = Names(module, self.facts[module], path.name == "__init__.py")
        self.classes: dict[str, ConnectorClass] = {}
        for module, ff in sorted(self.facts.items()):
            for c in ff.classes:
                if "." not in c.qualname:
                    fqn = f"{module}.{c.qualname}"
                    self.classes[fqn] = ConnectorClass(
                        fqn, module, c, tuple(self.names[module].base(b) for b in c.bases))

    def display(self, module: str) -> str:
        """The file of ``module`` as findings name it."""
        return self.facts[module].path

    def source_line(self, module: str, line: int) -> str:
        """Line ``line`` of ``module``'s file ('' when unreadable)."""
        if module not in self.lines:
            try:
                self.lines[module] = self.files[module].read_text("utf-8", "replace").splitlines()
            except OSError:
                self.lines[module] = []
        lines = self.lines[module]
        return lines[line - 1] if 0 < line <= len(lines) else ""

    def ancestors(self, fqn: str) -> list[str]:
        """``fqn`` and its connector-side bases, depth first (a simple MRO)."""
        return depth_first(fqn, lambda k: self.classes[k].bases if k in self.classes else None)

    def external_bases(self, fqn: str) -> list[str]:
        """The bases outside the connector along ``fqn``'s connector-side MRO."""
        return [b for k in self.ancestors(fqn) for b in self.classes[k].bases
                if b not in self.classes]

    def methods(self, fqn: str) -> dict[str, tuple[str, FunctionFact]]:
        """Method name -> (module, fact), nearest definition first along the MRO."""
        out: dict[str, tuple[str, FunctionFact]] = {}
        for k in self.ancestors(fqn):
            cls = self.classes[k]
            for f in self.facts[cls.module].functions:
                if f.class_qualname == cls.fact.qualname:
                    out.setdefault(f.name, (cls.module, f))
        return out

    def members(self, fqn: str) -> set[str]:
        """Names the connector side of ``fqn``'s MRO defines (methods, class
        attributes, ``self.X`` assignments anywhere in its methods)."""
        out: set[str] = set()
        for k in self.ancestors(fqn):
            cls = self.classes[k]
            out.update(cls.fact.members, dict(cls.fact.attributes))
            ff = self.facts[cls.module]
            out.update(f.name for f in ff.functions if f.class_qualname == cls.fact.qualname)
            out.update(a.target.split(".")[1] for a in ff.assigns
                       if a.scope.startswith(f"{cls.fact.qualname}.")
                       and a.target.startswith("self.") and a.target.count(".") >= 1)
        return out

    def subclasses(self, fqn: str) -> list[str]:
        """Connector classes that have ``fqn`` along their MRO (itself excluded)."""
        return [k for k in self.classes if k != fqn and fqn in self.ancestors(k)]

    def reachable(self, module: str) -> list[str]:
        """``module`` and the connector modules it imports, transitively."""
        seen: list[str] = []
        todo = [module]
        while todo:
            m = todo.pop()
            if m in seen or m not in self.facts:
                continue
            seen.append(m)
            names = self.names[m]
            for imp in self.facts[m].imports:
                target = names.fqn(imp.asname or imp.name or imp.module.split(".")[0])
                todo += [target, target.rpartition(".")[0]]
        return sorted(seen)

    def fills(self, module: str, name: str, holders: set[str]) -> bool:
        """Whether the code reachable from ``module`` fills carrier field
        ``name``: passes it to a holder class
        (``KVConnectorTransferResults(failed_recving=...)``), or writes it on
        another object (``output.failed_recving = ...``,
        ``output.failed_recving.add(...)``). A local variable or the
        connector's own metadata field of the same name is not a fill."""
        for ff in (self.facts[m] for m in self.reachable(module)):
            if any(k == name and (c.callee or "").rpartition(".")[2] in holders
                   for c in ff.calls for k, _ in c.kwargs):
                return True
            chains = [a.target for a in ff.assigns] + [c.container for c in ff.containers]
            if any(ch.endswith(f".{name}") and not ch.startswith("self.") for ch in chains):
                return True
        return False


def _files(sources: Iterable[Path]) -> list[tuple[Path, Path]]:
    """(import root, file) of every ``.py`` file of the sources: a package
    directory's root is its parent, a plain directory is a root itself."""
    out: list[tuple[Path, Path]] = []
    for src in sources:
        src = src.resolve()
        if src.is_file():
            out.append((src.parent, src))
            continue
        root = src.parent if (src / "__init__.py").is_file() else src
        for path in sorted(src.rglob("*.py")):
            if not _SKIP_DIRS & set(path.relative_to(src).parts[:-1]):
                out.append((root, path))
    return out
