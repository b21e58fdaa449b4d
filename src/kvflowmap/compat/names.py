"""Files and names of an import root without a linked analysis: which file
holds a module, and what FQN a name used in a file stands for (its imports,
its own classes). Enough for the few modules a protocol surface needs."""

from __future__ import annotations

from pathlib import Path

from kvflowmap.check.kinds.conforms_signatures import normalise_fqn
from kvflowmap.facts import FileFacts
from kvflowmap.model.classes import base_name

_BUILTINS = {"set", "frozenset", "list", "dict", "tuple", "str", "int", "float", "bool",
             "bytes", "type", "complex", "object", "None"}


def module_file(root: Path, module: str) -> Path | None:
    """The file of ``module`` under import root ``root`` (module or package)."""
    base = root.joinpath(*module.split("."))
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def module_of(root: Path, path: Path) -> str:
    """The dotted module name of ``path`` under ``root``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


class Names:
    """Resolves the names used in one module to FQNs."""

    def __init__(self, module: str, facts: FileFacts, is_package: bool = False) -> None:
        self.module = module
        self.table: dict[str, str] = {}
        package = module if is_package else module.rpartition(".")[0]
        for imp in facts.imports:
            if imp.scope:
                continue  # function-level imports do not name module-level annotations
            src = _absolute(package, imp.module, imp.level)
            if imp.name is None:
                local = imp.asname or imp.module.split(".")[0]
                self.table[local] = imp.module if imp.asname else local
            elif imp.name != "*":
                self.table[imp.asname or imp.name] = f"{src}.{imp.name}" if src else imp.name
        for c in facts.classes:
            if "." not in c.qualname:
                self.table[c.qualname] = f"{module}.{c.qualname}"

    def fqn(self, dotted: str) -> str:
        """The FQN ``dotted`` stands for; a builtin or unknown name stays as written."""
        head, _, rest = dotted.partition(".")
        if head in self.table:
            return f"{self.table[head]}.{rest}" if rest else self.table[head]
        return dotted

    def base(self, written: str) -> str:
        """The FQN of a class base as written: ``A[...]`` and ``mod.A[...]``
        stand for ``A``; ``Generic[...]`` and ``Protocol[...]`` stay as written."""
        head = base_name(written)
        if head != written and head.rpartition(".")[2] in ("Generic", "Protocol"):
            return written
        return self.fqn(head)

    def annotation(self, dotted: str) -> str | None:
        """An annotation name as ``annotation_heads`` compares it (None: any)."""
        head = dotted.partition(".")[0]
        if head not in self.table and head not in _BUILTINS and "." not in dotted:
            return None  # a name we cannot see (a star import, a type variable)
        return normalise_fqn(self.fqn(dotted))


def _absolute(package: str, module: str, level: int) -> str:
    """The absolute module of ``from <level dots><module> import ...``."""
    if level == 0:
        return module
    parts = package.split(".") if package else []
    base = parts[:len(parts) - (level - 1)] if level > 1 else parts
    return ".".join([*base, module] if module else base)
