"""A planted cache entry runs no code: the fact cache and the run memo are
msgpack (``index/facts_codec``, ``index/plain_codec``), and loading them
builds only plain data and kvflowmap's data classes."""

from __future__ import annotations

import lzma
import os
import pickle
import zlib
from dataclasses import dataclass
from pathlib import Path

import msgpack
import pytest

from kvflowmap.check.model import Finding, Step
from kvflowmap.check.stubs import stub_root
from kvflowmap.cli import main
from kvflowmap.facts import FileFacts, FunctionFact, Param, Stmt
from kvflowmap.index import facts_codec, plain_codec
from kvflowmap.index.cache import HEADER
from kvflowmap.index.parse import facts_from_bytes

HANGS = '''
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Hangs(KVConnectorBase_V1):
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return 16, True

    def start_load_kv(self, forward_context, **kwargs):
        pass
'''
RULE = ["--select", "kvc-async-load-has-reporter", "-q"]


class _Plant:
    """Unpickling this calls ``os.system`` (what an attacker would plant)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _named(name: str, payload) -> msgpack.ExtType:
    """A memo entry tag naming ``name`` as a data class (what plain_codec writes)."""
    return msgpack.ExtType(6, msgpack.packb([name, payload]))


@pytest.mark.parametrize("planted", ["pickle", "msgpack"])
def test_planted_entries_run_nothing_and_the_run_goes_on(tree, monkeypatch, capsys,
                                                          tmp_path, planted) -> None:
    root = tree({"conn/__init__.py": "", "conn/hangs.py": HANGS})
    (root / "pyproject.toml").write_text(
        f'[tool.kvflowmap]\nsources = ["conn"]\ncontext = ["{stub_root()}"]\n')
    monkeypatch.chdir(root)
    assert main(["check", *RULE]) == 1
    cache = Path(os.environ["KVFLOWMAP_CACHE_DIR"])
    runs = sorted(cache.rglob("runs/*.msgpack"))
    facts = [p for p in cache.rglob("*.msgpack") if "runs" not in p.parts]
    assert runs and facts
    assert not list(cache.rglob("*.pkl"))
    marker = tmp_path / "pwned"
    if planted == "pickle":
        evil_run = evil_facts = pickle.dumps(_Plant(marker))
    else:  # the formats themselves, naming a callable where a data class goes
        evil_run = msgpack.packb([_named("os:system", {"x": f"touch {marker}"}), []])
        evil_facts = msgpack.packb([_named("posix:system", f"touch {marker}")] * 16)
    for p in runs:
        p.write_bytes(zlib.compress(evil_run))
    for p in facts:
        p.write_bytes(HEADER + lzma.compress(evil_facts))
    capsys.readouterr()
    assert main(["check", *RULE]) == 1  # analysed again, same finding
    assert not marker.exists()
    assert "Hangs" in capsys.readouterr().out


def test_results_round_trip_and_callables_are_refused() -> None:
    step = Step("m.py", 3, "m.f", "note")
    value = {"a": [Param("x", "pos", "int", None), {1, 2}, frozenset({"k"})],
             "b": (Path("/x"), None, 1.5, b"raw"), 7: [step]}
    assert plain_codec.decode(plain_codec.encode(value)) == value
    back = plain_codec.decode(plain_codec.encode(value))
    assert type(back["a"][0]) is Param and type(back[7][0]) is Step
    for name in ("os:system", "builtins:eval", "kvflowmap.cli:main", "kvflowmap.__main__:run",
                 "kvflowmap.no_such_module:X", "kvflowmap.check.model:field",
                 "kvflowmap.cli:dataclass"):
        with pytest.raises(ValueError):
            plain_codec.decode(msgpack.packb(_named(name, {})))
    with pytest.raises(TypeError):
        plain_codec.encode(os.getcwd)  # a function is not data: never stored


def test_findings_round_trip() -> None:
    f = Finding("r", "error", "msg", "a.py", 3, 1, "m.f", path=(Step("a.py", 3, "m.f", "n"),),
                extra=(("k", "v"),))
    back = plain_codec.decode(plain_codec.encode([f]))
    assert back == [f] and type(back[0].path[0]) is Step and back[0].fingerprint == f.fingerprint


@dataclass
class _NotOurs:
    x: int


def test_data_classes_from_other_packages_are_refused() -> None:
    blob = plain_codec.encode(_NotOurs(1))  # stored under this test module's name
    with pytest.raises(ValueError):
        plain_codec.decode(blob)


def test_facts_round_trip_with_their_types(tmp_path) -> None:
    src = ("class C:\n    def m(self, a: int = 1):\n        for x in a:\n            if x:\n"
           "                try:\n                    self.d[x] = 1\n                except E:\n"
           "                    pass\n                finally:\n                    g(x)\n")
    facts = facts_from_bytes("m.py", src.encode())
    back = facts_codec.decode(facts_codec.encode(facts))
    assert isinstance(back, FileFacts) and back == facts

    def types(v):
        if isinstance(v, tuple):
            return (type(v), tuple(types(x) for x in v))
        if isinstance(v, list):
            return [types(x) for x in v]
        return type(v)

    for name in facts.__dataclass_fields__:
        assert types(getattr(back, name)) == types(getattr(facts, name)), name
    fn = back.functions[0]
    assert type(fn) is FunctionFact and type(fn.params[0]) is Param
    assert type(fn.body[0]) is Stmt and type(fn.body[0].body[0].body[0]) is Stmt


def test_malformed_facts_are_a_miss() -> None:
    for blob in (b"", b"\x93\x01\x02\x03", msgpack.packb(["p", "s", 0, [[1, 2]]] + [[]] * 12),
                 msgpack.packb({"a": 1})):
        with pytest.raises(ValueError):
            facts_codec.decode(blob)
