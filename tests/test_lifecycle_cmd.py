"""`kvflowmap lifecycle` end to end: containers, hooks, hand-offs, reports; text and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvflowmap.check.stubs import stub_root
from kvflowmap.cli import main

CONNECTOR = '''
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Tiny(KVConnectorBase_V1):
    def __init__(self, vllm_config, role):
        self._loading = set()
        self._engine = None

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        self._loading.add(request.request_id)
        self._engine.load(request.request_id)

    def get_finished(self, finished_req_ids):
        done = set(self._loading)
        self._loading.clear()
        return None, done
'''


@pytest.fixture
def repo(tree) -> Path:
    root = tree({"tiny/__init__.py": "", "tiny/conn.py": CONNECTOR})
    (root / "pyproject.toml").write_text(
        f'[tool.kvflowmap]\nsources = ["tiny"]\ncontext = ["{stub_root()}"]\n')
    return root


def test_text_names_container_adder_and_report(repo, monkeypatch, capsys) -> None:
    monkeypatch.chdir(repo)
    assert main(["lifecycle", "-q"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tiny: 1 request-keyed containers")
    assert "  Tiny._loading   (tiny.conn)" in out
    assert "    add      update_state_after_alloc:" in out
    assert "    reset    get_finished:" in out
    assert "    report   Tiny.get_finished" in out
    hook = out[out.index("\n    update_state_after_alloc:", out.index("Hooks (")):]
    assert "      adds     _loading" in hook
    assert "self._engine.load (handover :" in hook
    assert "      reports  Tiny.get_finished" in hook


def test_json_is_stable_and_written_to_file(repo, monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.chdir(repo)
    out = tmp_path / "lc.json"
    assert main(["lifecycle", "tiny", "--context", stub_root(), "-f", "json", "-o", str(out),
                 "-q"]) == 0
    assert capsys.readouterr().out == ""
    text = out.read_text()
    (pkg,) = json.loads(text)["packages"]
    assert pkg["package"] == "tiny"
    (c,) = pkg["containers"]
    assert c["label"] == "Tiny._loading" and c["owner"] == "tiny.conn.Tiny"
    assert [a["function"] for a in c["adds"]] == ["Tiny.update_state_after_alloc"]
    assert c["reported_by"] == ["Tiny.get_finished"]
    (cls,) = pkg["classes"]
    fns = {f["name"]: f for f in cls["functions"]}
    alloc = fns["update_state_after_alloc"]
    assert alloc["adds"] == ["Tiny._loading"] and alloc["sides"] == ["scheduler"]
    assert alloc["reports"] == ["Tiny.get_finished"]
    assert {"kind": "handover", "target": "self._engine.load", "line": 11} in alloc["hands"]
    assert fns["get_finished"]["resets"] == ["Tiny._loading"]
    assert main(["lifecycle", "tiny", "--context", stub_root(), "-f", "json", "-q"]) == 0
    assert capsys.readouterr().out == text
