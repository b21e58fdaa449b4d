"""The KV connector protocol file: load it, and check it against the code."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from kvflowmap.sources.errors import SourceError

PROTOCOL_DIR = Path(__file__).parent / "rules" / "protocol"
DEFAULT_PROTOCOL = PROTOCOL_DIR / "vllm-kv-connector.yaml"


@dataclass(frozen=True)
class Carrier:
    """A field that carries data across the process boundary."""

    field: str
    sources: tuple[str, ...]
    targets: tuple[str, ...]

    @property
    def owner(self) -> str:
        return self.field.rpartition(".")[0]

    @property
    def attr(self) -> str:
        return self.field.rpartition(".")[2]


@dataclass(frozen=True)
class Stage:
    """One column of a story picture: the hooks, vLLM functions and request
    states a request meets at that step."""

    label: str
    hooks: tuple[str, ...] = ()  # connector hook short names
    functions: tuple[str, ...] = ()  # full names of vLLM functions
    states: tuple[str, ...] = ()  # request state member globs


@dataclass(frozen=True)
class View:
    """A story ``graph --view NAME`` draws: stages left to right, and the
    carrier fields (short names) whose bridges it shows."""

    name: str
    title: str
    stages: tuple[Stage, ...]
    carriers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Protocol:
    """What the protocol file declares."""

    path: Path
    name: str
    package: str
    base_class: str
    register: str
    create: str
    state_enums: tuple[str, ...]
    methods: dict[str, tuple[str, ...]]
    entry_points: dict[str, tuple[str, ...]]
    side_modules: dict[str, tuple[str, ...]]
    carriers: tuple[Carrier, ...] = field(default_factory=tuple)
    # The ``lifecycle`` section as written; ``kvflowmap.lifecycle.spec`` reads it.
    lifecycle: dict = field(default_factory=dict)
    # name (a method's short name or a full name) -> the first vLLM version known to
    # have it: an older vLLM without it is expected, not a rename to warn about
    since: dict[str, str] = field(default_factory=dict)
    # classes whose fields cross the process boundary -> their fields that are not
    # carriers; any other field the analysed vLLM has is one the file does not declare
    carrier_classes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # request states (member names, globs) the KV-cache lifecycle goes through:
    # the default picture draws only these (empty: every state)
    kv_states: tuple[str, ...] = ()
    # name -> the last vLLM release known to have it: a newer vLLM without it
    # is expected (the name was removed), not a rename to warn about
    until: dict[str, str] = field(default_factory=dict)
    # the stories ``graph --view`` draws, by name
    views: dict[str, View] = field(default_factory=dict)
    # platform plugins released in step with vLLM (vllm-ascend X.Y for vLLM
    # X.Y): a test of their version gates code to that vLLM release
    aligned_plugins: tuple[str, ...] = ()

    def expected_in(self, name: str, version: str | None) -> bool:
        """Whether ``name`` should exist in vLLM ``version``: False when the
        file says it came later (``since``) or went away earlier (``until``),
        or when the version is unknown and it has either bound at all (nothing
        to compare with)."""
        short = name.rpartition(".")[2]
        first = self.since.get(name) or self.since.get(short)
        last = self.until.get(name) or self.until.get(short)
        if first is None and last is None:
            return True
        if version is None:
            return False
        key = version_key(version)
        return (first is None or key >= version_key(first)) and \
            (last is None or key <= version_key(last))

    def side_of_method(self, name: str) -> str | None:
        for side, names in self.methods.items():
            if name in names:
                return side
        return None

    def side_of_module(self, module: str) -> str | None:
        for side, pats in self.side_modules.items():
            if any(fnmatch.fnmatch(module, p) or module == p.rstrip(".*") for p in pats):
                return side
        return None

    def entry_modules(self) -> list[str]:
        """Modules that hold the protocol's names (seeds for lazy indexing)."""
        names = [self.base_class, self.register, self.create, *self.state_enums]
        names += [n for ns in self.entry_points.values() for n in ns]
        names += [c.field for c in self.carriers]
        names += [n for c in self.carriers for n in (*c.sources, *c.targets)]
        return sorted(set(names))

    def all_names(self) -> list[tuple[str, str]]:
        """(key, fully qualified name) of every name the file declares."""
        out = [("base_class", self.base_class), ("registry.register", self.register),
               ("registry.create", self.create)]
        out += [("state_enums", n) for n in self.state_enums]
        out += [(f"methods.{s}", f"{self.base_class}.{m}") for s, ms in self.methods.items()
                for m in ms]
        out += [(f"entry_points.{s}", n) for s, ns in self.entry_points.items() for n in ns]
        for c in self.carriers:
            out.append(("carriers.field", c.field))
            out += [("carriers.from", n) for n in c.sources]
            out += [("carriers.to", n) for n in c.targets]
        out += [(f"views.{v.name}", n) for v in self.views.values() for st in v.stages
                for n in st.functions]
        return out


def load_protocol(path: Path = DEFAULT_PROTOCOL) -> Protocol:
    """Read and validate a protocol file; errors name the file and the key."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise SourceError(f"{path}: cannot read protocol file: {exc}") from exc
    if not isinstance(data, dict):
        raise SourceError(f"{path}: expected a mapping at the top level")
    errors: list[str] = []

    def need(key: str, kind: type, default=None):
        value = data.get(key, default)
        if not isinstance(value, kind):
            errors.append(f"{path}: key '{key}' must be a {kind.__name__}")
            return kind() if default is None else default
        return value

    registry = need("registry", dict)
    carriers = []
    for i, c in enumerate(need("carriers", list, [])):
        if not isinstance(c, dict) or not isinstance(c.get("field"), str):
            errors.append(f"{path}: carriers[{i}] needs 'field' (str), 'from' and 'to' (lists)")
            continue
        carriers.append(Carrier(c["field"], tuple(c.get("from") or ()), tuple(c.get("to") or ())))
    proto = Protocol(
        path=path, name=str(data.get("name", path.stem)), package=str(data.get("package", "vllm")),
        base_class=str(need("base_class", str)), register=str(registry.get("register", "")),
        create=str(registry.get("create", "")),
        state_enums=tuple(need("state_enums", list, [])),
        methods={k: tuple(v) for k, v in need("methods", dict).items()},
        entry_points={k: tuple(v) for k, v in need("entry_points", dict).items()},
        side_modules={k: tuple(v) for k, v in need("side_modules", dict, {}).items()},
        carriers=tuple(carriers),
        lifecycle=dict(need("lifecycle", dict, {})),
        since={str(k): str(v) for k, v in need("since", dict, {}).items()},
        carrier_classes={str(k): tuple(v or ()) for k, v in
                         need("carrier_classes", dict, {}).items()},
        kv_states=tuple(str(x) for x in need("kv_states", list, [])),
        until={str(k): str(v) for k, v in (need("until", dict, {}) or {}).items()},
        views=_views(path, need("views", dict, {}), errors),
        aligned_plugins=tuple(str(x) for x in need("aligned_plugins", list, [])),
    )
    if errors:
        raise SourceError("\n".join(errors))
    return proto


def _names(value: object) -> tuple[str, ...]:
    return tuple(str(x) for x in value) if isinstance(value, list) else ()


def _views(path: Path, data: dict, errors: list[str]) -> dict[str, View]:
    """The ``views`` section; a malformed entry is an error naming it."""
    views: dict[str, View] = {}
    for name, spec in data.items():
        stages = spec.get("stages") if isinstance(spec, dict) else None
        if not isinstance(stages, list) or not all(
                isinstance(st, dict) and isinstance(st.get("label"), str) for st in stages):
            errors.append(f"{path}: views.{name} needs 'stages', a list of mappings with "
                          "'label' and any of 'hooks', 'functions', 'states'")
            continue
        views[str(name)] = View(
            str(name), str(spec.get("title") or name),
            tuple(Stage(st["label"], _names(st.get("hooks")), _names(st.get("functions")),
                        _names(st.get("states"))) for st in stages),
            _names(spec.get("carriers")))
    return views


def version_key(version: str) -> tuple[int, ...]:
    """``"0.33.0"`` -> ``(0, 33, 0)``; a suffix (``rc1``, ``+cu12``) is ignored."""
    out = []
    for part in version.split("."):
        m = re.match(r"\d+", part)
        if m is None:
            break
        out.append(int(m.group()))
        if m.end() < len(part):
            break  # ``1rc1``: the release number, then a suffix
    return tuple(out)
