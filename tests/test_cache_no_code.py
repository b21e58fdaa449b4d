"""A planted cache entry runs no code: the fact cache and the run memo only
build data classes when they load (``index/safe_pickle``)."""

from __future__ import annotations

import lzma
import os
import pickle
import zlib
from pathlib import Path

import pytest

from kvflowmap.check.stubs import stub_root
from kvflowmap.cli import main
from kvflowmap.index import safe_pickle
from kvflowmap.index.cache import HEADER

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


def test_planted_entries_run_nothing_and_the_run_goes_on(tree, monkeypatch, capsys,
                                                          tmp_path) -> None:
    root = tree({"conn/__init__.py": "", "conn/hangs.py": HANGS})
    (root / "pyproject.toml").write_text(
        f'[tool.kvflowmap]\nsources = ["conn"]\ncontext = ["{stub_root()}"]\n')
    monkeypatch.chdir(root)
    assert main(["check", *RULE]) == 1
    cache = Path(os.environ["KVFLOWMAP_CACHE_DIR"])
    runs = sorted(cache.rglob("runs/*.pkl"))
    facts = [p for p in cache.rglob("*.pkl") if "runs" not in p.parts]
    assert runs and facts
    marker = tmp_path / "pwned"
    evil = pickle.dumps(_Plant(marker))
    for p in runs:
        p.write_bytes(zlib.compress(evil))
    for p in facts:
        p.write_bytes(HEADER + lzma.compress(evil))
    capsys.readouterr()
    assert main(["check", *RULE]) == 1  # analysed again, same finding
    assert not marker.exists()
    assert "Hangs" in capsys.readouterr().out


def test_data_classes_round_trip_and_callables_are_refused() -> None:
    from kvflowmap.facts import Param

    p = Param("x", "pos", "int", None)
    assert safe_pickle.loads(pickle.dumps({"a": [p, {1, 2}], "b": (Path("/x"),)})) == \
        {"a": [p, {1, 2}], "b": (Path("/x"),)}
    with pytest.raises(pickle.UnpicklingError):
        safe_pickle.loads(pickle.dumps(os.getcwd))
    with pytest.raises(pickle.UnpicklingError):
        safe_pickle.loads(pickle.dumps(main))  # a kvflowmap function is not data
