"""Typed rule-kind options: each kind (or mode) declares a frozen dataclass
``Options`` whose fields carry the default and a help text; this module
checks a rule file's ``params`` against those fields, converts them (YAML
lists become tuples or frozensets) and describes each field in words for the
loader's errors and the catalogue.

Supported field types: ``str``, ``bool``, ``int``, ``float``, ``None``,
``Any``, ``Literal[...]``, unions of those (``int | None``),
``tuple[X, ...]``, ``frozenset[X]`` and ``dict[K, V]``.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Literal, Union

MISSING = dataclasses.MISSING


@dataclasses.dataclass(frozen=True)
class OptionField:
    """One parameter of a kind: name, type hint, default and help text."""

    name: str
    hint: Any
    default: Any
    help: str


class OptionsError(ValueError):
    """A rule's params do not fit a kind's ``Options``; ``param`` names the key."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"parameter {param!r}: {message}")
        self.param, self.message = param, message


def option(default: Any, help: str) -> Any:  # noqa: A002 - the metadata key is ``help``
    """A dataclass field with ``default`` (copied per instance when mutable)
    and a help text: ``x: tuple[str, ...] = option((), "what x is")``."""
    meta = {"help": help}
    if isinstance(default, (list, dict, set)):
        return dataclasses.field(default_factory=lambda: _copy(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


@lru_cache(maxsize=None)
def option_fields(cls: type) -> tuple[OptionField, ...]:
    """The parameters an ``Options`` class declares, in declaration order."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not MISSING else (
            f.default_factory() if f.default_factory is not MISSING else MISSING)
        out.append(OptionField(f.name, hints[f.name], default, str(f.metadata.get("help", ""))))
    return tuple(out)


def accepts(value: Any, hint: Any) -> bool:
    """Whether a YAML value fits a field's type hint."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if hint is None or hint is type(None):
        return value is None
    if origin is Literal:
        return any(value == a and type(value) is type(a) for a in args)
    if origin in (Union, types.UnionType):
        return any(accepts(value, a) for a in args)
    if origin in (tuple, frozenset, list, set):
        item = args[0] if args else Any
        return isinstance(value, (list, tuple, frozenset, set)) and \
            all(accepts(v, item) for v in value)
    if origin in (dict, Mapping):
        k, v = args or (Any, Any)
        return isinstance(value, dict) and all(accepts(a, k) and accepts(b, v)
                                               for a, b in value.items())
    if hint is bool:
        return isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint) if isinstance(hint, type) else True


def type_words(hint: Any, plural: bool = False) -> str:
    """A type hint in words: ``a list of strings``, ``an integer or nothing``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in args)
    if origin in (Union, types.UnionType):
        return " or ".join(dict.fromkeys(type_words(a, plural) for a in args))
    if origin in (tuple, frozenset, list, set):
        item = args[0] if args and args[0] is not Any else None
        return ("lists" if plural else "a list") + (f" of {type_words(item, True)}"
                                                     if item is not None else "")
    if origin in (dict, Mapping):
        k, v = args or (Any, Any)
        return ("mappings" if plural else "a mapping") + \
            (f" of {type_words(k, True)} to {type_words(v, True)}" if k is not Any else "")
    words = {str: ("a string", "strings"), bool: ("true or false", "true or false"),
             int: ("an integer", "integers"), float: ("a number", "numbers"),
             type(None): ("nothing", "nothing"), None: ("nothing", "nothing"),
             Any: ("anything", "anything")}
    pair = words.get(hint)
    return pair[plural] if pair else getattr(hint, "__name__", str(hint))


def convert(value: Any, hint: Any) -> Any:
    """A YAML value as the field's type: lists become tuples (or frozensets),
    recursively; everything else is kept."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        fitting = [a for a in args if accepts(value, a)]
        return convert(value, fitting[0]) if fitting else value
    if origin in (tuple, frozenset) and isinstance(value, (list, tuple, set, frozenset)):
        item = args[0] if args else Any
        items = [convert(v, item) for v in value]
        return frozenset(items) if origin is frozenset else tuple(items)
    if origin in (dict, Mapping) and isinstance(value, dict):
        v = (args or (Any, Any))[1]
        return {k: convert(x, v) for k, x in value.items()}
    return value


def unknown_message(name: str, known: list[str], what: str) -> str:
    """``unknown parameter of kind 'x' (did you mean y?; expected one of ...)``."""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}? " if close else ""
    listed = ", ".join(sorted(known)) or "no parameters"
    return f"unknown parameter of {what} ({hint}expected one of {listed})"


def build_options(cls: type, params: Mapping[str, Any], what: str = "the kind") -> Any:
    """An ``Options`` instance from a rule's params (defaults for the rest);
    an unknown name or a value of the wrong type raises ``OptionsError``."""
    fields = {f.name: f for f in option_fields(cls)}
    values: dict[str, Any] = {}
    for name, value in params.items():
        f = fields.get(name)
        if f is None:
            raise OptionsError(name, unknown_message(name, list(fields), what))
        if not accepts(value, f.hint):
            raise OptionsError(name, f"expected {type_words(f.hint)} (got {value!r})")
        values[name] = convert(value, f.hint)
    return cls(**values)


def plain(value: Any) -> Any:
    """An option value as YAML would give it (tuples and frozensets as lists)."""
    if isinstance(value, frozenset):
        return sorted(plain(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, (list, set)):
        return type(value)(_copy(v) for v in value)
    return value
