"""A run's result as msgpack: the run memo's format.

A result is plain data: builtin containers, strings and numbers, paths, and
kvflowmap's own data classes (NamedTuples, dataclasses, enums: findings,
rules, problems). Each non-msgpack value is tagged (a msgpack extension
type); a data class by its ``module:qualname``. Loading calls nothing but
kvflowmap's own module imports and the constructors of its NamedTuples and
enums (dataclasses are filled field by field, without ``__init__``): a
planted entry that names anything else (``os:system``, a kvflowmap
function, ``kvflowmap.__main__``) fails the load with ``ValueError``, and
the caller treats it as a miss.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import re
from pathlib import Path, PurePath
from typing import Any

import msgpack

_TUPLE, _SET, _FROZENSET, _PATH, _NAMEDTUPLE, _DATACLASS, _ENUM = range(1, 8)
_MODULE = re.compile(r"kvflowmap(\.[A-Za-z_][A-Za-z0-9_]*)*")


def encode(value: Any) -> bytes:
    """``value`` as msgpack bytes; ``TypeError`` for what is not plain data."""
    return msgpack.packb(value, default=_default, use_bin_type=True, strict_types=True)


def decode(data: bytes) -> Any:
    """What ``encode`` stored; ``ValueError`` when it is not such an entry."""
    try:
        return msgpack.unpackb(data, ext_hook=_ext, raw=False, strict_map_key=False)
    except (ValueError, TypeError, KeyError, IndexError, msgpack.UnpackException) as e:
        raise ValueError(f"not a kvflowmap result entry: {e}") from e


def _default(obj: Any) -> Any:
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return _ext_of(_NAMEDTUPLE, [_name(type(obj)), list(obj)])
    if isinstance(obj, tuple):
        return _ext_of(_TUPLE, list(obj))
    if isinstance(obj, frozenset):
        return _ext_of(_FROZENSET, sorted(obj, key=repr))
    if isinstance(obj, set):
        return _ext_of(_SET, sorted(obj, key=repr))
    if isinstance(obj, PurePath):
        return _ext_of(_PATH, str(obj))
    if isinstance(obj, enum.Enum):
        return _ext_of(_ENUM, [_name(type(obj)), obj.value])
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _ext_of(_DATACLASS, [_name(type(obj)), {f.name: getattr(obj, f.name)
                                                        for f in dataclasses.fields(obj)}])
    if isinstance(obj, list):  # a subclass (strict_types): as the builtin
        return list(obj)
    if isinstance(obj, dict):  # OrderedDict, defaultdict: a plain dict on load
        return dict(obj)
    raise TypeError(f"cannot store {type(obj).__name__} in the run memo")


def _ext_of(code: int, payload: Any) -> msgpack.ExtType:
    return msgpack.ExtType(code, encode(payload))


def _name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _ext(code: int, data: bytes) -> Any:
    value = msgpack.unpackb(data, ext_hook=_ext, raw=False, strict_map_key=False)
    if code == _TUPLE:
        return tuple(value)
    if code == _SET:
        return set(value)
    if code == _FROZENSET:
        return frozenset(value)
    if code == _PATH:
        return Path(value)
    name, payload = value
    cls = _data_class(name)
    if code == _NAMEDTUPLE and issubclass(cls, tuple):
        return cls(*payload)
    if code == _ENUM and issubclass(cls, enum.Enum):
        return cls(payload)
    if code == _DATACLASS and dataclasses.is_dataclass(cls):
        obj = object.__new__(cls)
        for key, v in payload.items():
            object.__setattr__(obj, key, v)  # frozen ones too; no __init__ side effects
        return obj
    raise ValueError(f"entry tag {code} does not fit {name}")


def _data_class(name: str) -> type:
    """A kvflowmap data class by ``module:qualname``. The module is imported
    if needed (a warm run loads the memo before the rule kinds): only
    kvflowmap's own modules, never ``__main__`` (importing it runs the CLI),
    so an entry can choose which of kvflowmap's definitions load, nothing else."""
    module, _, qualname = name.partition(":")
    if not _MODULE.fullmatch(module) or module.endswith(".__main__"):
        raise ValueError(f"entry names {name}: not one of kvflowmap's modules")
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as e:
        raise ValueError(f"entry names {name}: {e}") from e
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if not (isinstance(obj, type) and obj.__module__ == module and (
            dataclasses.is_dataclass(obj) or issubclass(obj, enum.Enum)
            or (issubclass(obj, tuple) and hasattr(obj, "_fields")))):
        raise ValueError(f"entry names {name}: not a data class")
    return obj
