"""``FileFacts`` as msgpack: the fact cache's format, and what pool workers send.

Loading builds plain data only. msgpack yields tuples, strings, numbers and
``None``; this module rebuilds the fact NamedTuples from them by position,
knowing which fields hold nested facts (a function's ``params`` and ``body``,
a statement's blocks). No class is ever named by the data, so a planted
entry cannot make the loader call anything: at worst it decodes to the wrong
shape, which ``decode`` rejects as a miss (``ValueError``).
"""

from __future__ import annotations

from typing import Any

import msgpack

from kvflowmap.facts import (AssignFact, AttrReadFact, CallFact, ClassFact, CompareFact,
                             ContainerOpFact, ElementFact, FileFacts, FunctionFact, ImportFact,
                             KeyReadFact, LogFact, Param, ProblemFact, RefFact, ReturnFact, Stmt)

# FileFacts list fields and the flat NamedTuple each element is
_FLAT = (("classes", ClassFact), ("calls", CallFact), ("assigns", AssignFact),
         ("containers", ContainerOpFact), ("reads", AttrReadFact), ("compares", CompareFact),
         ("returns", ReturnFact), ("refs", RefFact), ("logs", LogFact),
         ("imports", ImportFact), ("elements", ElementFact), ("binds", AssignFact),
         ("key_reads", KeyReadFact), ("truths", CompareFact))
_PARAMS = FunctionFact._fields.index("params")
_BODY = FunctionFact._fields.index("body")


def encode(facts: FileFacts) -> bytes:
    """The msgpack form of ``facts`` (NamedTuples as arrays, in field order)."""
    row = [facts.path, facts.sha, facts.lines, facts.functions,
           *(getattr(facts, name) for name, _ in _FLAT), facts.dunder_all, facts.problem,
           facts.type_ignores]
    return msgpack.packb(row, use_bin_type=True)


def decode(data: bytes) -> FileFacts:
    """``FileFacts`` from ``encode``'s bytes; ``ValueError`` when they are not that."""
    try:
        row = msgpack.unpackb(data, use_list=False, raw=False)
        path, sha, lines, functions, *flat, dunder_all, problem, ignores = row
        if len(flat) != len(_FLAT) or not isinstance(path, str) or not isinstance(sha, str):
            raise ValueError("not a facts row")
        out = FileFacts(path, sha, int(lines), [_function(f) for f in functions])
        for (name, cls), items in zip(_FLAT, flat, strict=True):
            setattr(out, name, [_flat(cls, t) for t in items])
        out.dunder_all = None if dunder_all is None else tuple(dunder_all)
        out.problem = None if problem is None else _flat(ProblemFact, problem)
        out.type_ignores = tuple(int(n) for n in ignores)
        return out
    except (ValueError, TypeError, KeyError, IndexError, msgpack.UnpackException) as e:
        raise ValueError(f"not a kvflowmap facts entry: {e}") from e


def _flat(cls: Any, t: tuple) -> Any:
    if not isinstance(t, tuple) or len(t) != len(cls._fields):
        raise ValueError(f"{cls.__name__}: {len(t) if isinstance(t, tuple) else t!r} fields")
    return tuple.__new__(cls, t)


def _function(t: tuple) -> FunctionFact:
    f = list(t)
    f[_PARAMS] = tuple(_flat(Param, p) for p in f[_PARAMS])
    f[_BODY] = tuple(map(_stmt, f[_BODY]))
    return _flat(FunctionFact, tuple(f))


def _stmt(t: tuple) -> Stmt:
    kind, line, text, events, body, orelse, handlers, final, names = t
    return tuple.__new__(Stmt, (kind, line, text, events, tuple(map(_stmt, body)),
                                tuple(map(_stmt, orelse)), tuple(map(_stmt, handlers)),
                                tuple(map(_stmt, final)), names))
