"""The protocol surface of one vLLM release, as plain data (JSON-serialisable,
so a surface is cached once per release and loads in milliseconds)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field

from kvflowmap.facts import Param


@dataclass(frozen=True)
class Where:
    """A place in a release: file relative to its import root, and line."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Method:
    """A method of a protocol base class."""

    name: str
    where: Where
    signature: str  # ``def name(self, a: T, ...) -> R``
    params: tuple[Param, ...]  # without self / cls
    heads: tuple[tuple[str, ...] | None, ...]  # resolved annotation alternatives per param
    returns: str | None
    kind: str  # instance | class | static | property
    is_async: bool
    abstract: bool
    default: str  # what the base does: "no-op", "returns None", "raises NotImplementedError"...
    ret_heads: tuple[str, ...] | None = None  # resolved alternatives of the return annotation
    doc: str = ""  # the docstring, whitespace collapsed (its contract, as written)


@dataclass(frozen=True)
class ClassSurface:
    """A protocol base class (the connector base, its siblings, the metrics bases)."""

    fqn: str
    where: Where
    bases: tuple[str, ...]  # resolved FQNs
    methods: dict[str, Method]
    members: tuple[str, ...]  # class-body names and ``self.X`` the base's methods assign


@dataclass(frozen=True)
class CallSite:
    """A call vLLM makes to a hook: how many positional arguments, which keywords."""

    method: str
    where: Where
    caller: str  # module.function
    positional: int
    keywords: tuple[str, ...]
    read: bool = False  # an attribute read (a property hook), not a call


@dataclass(frozen=True)
class Field:
    """A field of a carrier or config class, an enum member, or an envs name."""

    name: str
    where: Where
    annotation: str | None = None


def depth_first(cls: str, bases: Callable[[str], Iterable[str] | None]) -> list[str]:
    """``cls`` and its bases, depth first, each once: a simple MRO over the
    classes ``bases`` knows (it returns None for any other)."""
    out: list[str] = []
    todo = [cls]
    while todo:
        k = todo.pop(0)
        found = bases(k)
        if k in out or found is None:
            continue
        out.append(k)
        todo[:0] = list(found)
    return out


@dataclass
class Surface:
    """Everything a connector depends on in one vLLM release."""

    version: str
    classes: dict[str, ClassSurface] = field(default_factory=dict)
    calls: list[CallSite] = field(default_factory=list)
    carriers: dict[str, dict[str, Field]] = field(default_factory=dict)  # class -> fields
    states: dict[str, dict[str, Field]] = field(default_factory=dict)  # enum -> members
    envs: dict[str, Field] = field(default_factory=dict)
    configs: dict[str, dict[str, Field]] = field(default_factory=dict)  # class -> fields
    modules: list[str] = field(default_factory=list)  # files parsed, for the record

    def method(self, cls: str, name: str) -> Method | None:
        """Method ``name`` of class ``cls`` when the release has both."""
        c = self.classes.get(cls)
        return c.methods.get(name) if c else None

    def mro(self, cls: str) -> list[str]:
        """``cls`` and its surface bases, depth first, each once."""
        return depth_first(cls, lambda k: self.classes[k].bases if k in self.classes else None)

    def calls_of(self, name: str) -> list[CallSite]:
        """Call sites of hook ``name``."""
        return [c for c in self.calls if c.method == name]

    def to_json(self) -> dict:
        """A JSON-ready dict (``from_json`` reads it back)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Surface:
        """The surface ``to_json`` wrote."""
        def where(d: dict) -> Where:
            return Where(d["file"], d["line"])

        def fld(d: dict) -> Field:
            return Field(d["name"], where(d["where"]), d.get("annotation"))

        def method(d: dict) -> Method:
            return Method(d["name"], where(d["where"]), d["signature"],
                          tuple(Param(*p) for p in d["params"]),
                          tuple(None if h is None else tuple(h) for h in d["heads"]),
                          d["returns"], d["kind"], d["is_async"], d["abstract"], d["default"],
                          None if d.get("ret_heads") is None else tuple(d["ret_heads"]),
                          d.get("doc", ""))

        def table(d: dict) -> dict[str, dict[str, Field]]:
            return {k: {n: fld(f) for n, f in v.items()} for k, v in d.items()}

        return cls(
            version=data["version"],
            classes={k: ClassSurface(v["fqn"], where(v["where"]), tuple(v["bases"]),
                                     {n: method(m) for n, m in v["methods"].items()},
                                     tuple(v["members"])) for k, v in data["classes"].items()},
            calls=[CallSite(c["method"], where(c["where"]), c["caller"], c["positional"],
                            tuple(c["keywords"]), c.get("read", False)) for c in data["calls"]],
            carriers=table(data["carriers"]), states=table(data["states"]),
            envs={n: fld(f) for n, f in data["envs"].items()}, configs=table(data["configs"]),
            modules=list(data["modules"]))
