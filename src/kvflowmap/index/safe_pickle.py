"""Unpickling what the caches hold without running code from them.

The fact cache and the run memo live in a user or CI cache folder, which
may be shared or restored from another branch. ``pickle.loads`` on a planted
entry calls whatever the entry names (``os.system``...). Here only data
classes may be named: kvflowmap's own NamedTuples, dataclasses and enums,
a few builtin containers and paths. Anything else fails the load with
``UnpicklingError``, and the caller treats the entry as missing.
"""

from __future__ import annotations

import dataclasses
import enum
import io
import pickle
from typing import Any

_BUILTINS = {
    ("builtins", n) for n in ("set", "frozenset", "dict", "list", "tuple", "str", "bytes",
                              "bytearray", "int", "float", "bool", "complex", "object")
} | {
    ("collections", "OrderedDict"), ("collections", "defaultdict"), ("collections", "deque"),
    ("pathlib", "PosixPath"), ("pathlib", "PurePosixPath"), ("pathlib", "WindowsPath"),
    ("pathlib", "PureWindowsPath"), ("pathlib", "Path"), ("pathlib._local", "PosixPath"),
    ("pathlib._local", "PurePosixPath"),
}


def _data_class(obj: object) -> bool:
    """A class that holds data only: a NamedTuple, a dataclass or an Enum."""
    return isinstance(obj, type) and (
        dataclasses.is_dataclass(obj) or issubclass(obj, enum.Enum)
        or (issubclass(obj, tuple) and hasattr(obj, "_fields")))


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _BUILTINS:
            return super().find_class(module, name)
        if module == "kvflowmap" or module.startswith("kvflowmap."):
            obj = super().find_class(module, name)
            if _data_class(obj):
                return obj
        raise pickle.UnpicklingError(f"cache entry names {module}.{name}: not a data class")


def loads(data: bytes) -> Any:
    """``pickle.loads`` that only builds data classes (see the module docstring)."""
    return _Unpickler(io.BytesIO(data)).load()
