"""The protocol file: names checked against the analysed vLLM, bridges drawn."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvflowmap.api import Request, analyse
from kvflowmap.check.stubs import stub_root
from kvflowmap.protocol import DEFAULT_PROTOCOL, load_protocol
from kvflowmap.sources.errors import SourceError

MINIFLOW = Path(__file__).parent / "fixtures" / "minivllm"


def test_renamed_hook_is_a_warning_naming_it(tmp_path: Path) -> None:
    text = DEFAULT_PROTOCOL.read_text().replace("    - get_block_ids_with_load_errors\n",
                                                "    - get_block_ids_with_load_errors\n"
                                                "    - get_finished_v2\n", 1)
    proto = tmp_path / "proto.yaml"
    proto.write_text(text)
    a = analyse(Request(sources=[str(MINIFLOW / "miniflow")], context=[str(stub_root())],
                        protocol_path=proto))
    hits = [w for w in a.warnings if "get_finished_v2" in w]
    assert hits and "not found in vllm" in hits[0]
    assert "KVConnectorBase_V1.get_finished_v2" in hits[0]


def test_bridges_carry_their_field() -> None:
    a = analyse(Request(sources=[str(MINIFLOW / "miniflow")], context=[str(stub_root())]))
    bridges = {(u.rpartition(".")[2], v.rpartition(".")[2], d["carrier"].rpartition(".")[2])
               for u, v, d in a.graph.edges(data=True) if d["kind"] == "bridge"}
    assert ("get_finished", "_update_from_kv_xfer_finished", "finished_recving") in bridges
    assert ("build_connector_meta", "bind_connector_metadata", "kv_connector_metadata") in bridges
    assert not [w for w in a.warnings if "not found" in w]


def test_no_vllm_among_roots_says_what_to_do(tree) -> None:
    root = tree({"conn/__init__.py": "class C:\n    pass\n"})
    a = analyse(Request(sources=[str(root)]))
    assert any("--release vllm==VERSION" in w for w in a.warnings)


def test_malformed_protocol_file(tmp_path: Path) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text("base_class: [1, 2]\nmethods: nope\n")
    with pytest.raises(SourceError) as exc:
        load_protocol(bad)
    assert "base_class" in str(exc.value) and "methods" in str(exc.value)
