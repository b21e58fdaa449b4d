"""Protocol names by vLLM release (``since``) and carrier fields the protocol
file does not know (``carrier_classes``)."""

from __future__ import annotations

from pathlib import Path

from kvflowmap.api import Request, analyse
from kvflowmap.protocol import load_protocol, version_key

OUTPUTS = '''
from dataclasses import dataclass, field


@dataclass
class KVConnectorOutput:
    finished_sending: set[str] | None = None
    finished_recving: set[str] | None = None
    kv_connector_stats: object | None = None
    brand_new_channel: set[str] = field(default_factory=set)
'''


def test_version_key_orders_releases() -> None:
    assert version_key("0.11.0") < version_key("0.33.0") < version_key("0.33.1rc1") \
        < version_key("1.0")
    assert version_key("0.9.2+cu121") == (0, 9, 2)


def test_names_newer_than_the_analysed_vllm_are_expected_to_be_missing() -> None:
    p = load_protocol()
    assert p.since["get_transfer_results"] == "0.33.0"
    assert not p.expected_in("vllm.x.KVConnectorBase_V1.get_transfer_results", "0.11.0")
    assert p.expected_in("vllm.x.KVConnectorBase_V1.get_transfer_results", "0.33.0")
    assert p.expected_in("vllm.x.KVConnectorBase_V1.get_transfer_results", "0.40.2")
    assert not p.expected_in("vllm.x.KVConnectorBase_V1.get_transfer_results", None)
    assert p.expected_in("vllm.x.KVConnectorBase_V1.start_load_kv", "0.1.0")  # no since


def test_names_removed_before_the_analysed_vllm_are_expected_to_be_missing() -> None:
    import dataclasses

    p = dataclasses.replace(load_protocol(), until={"get_finished": "0.40.0"})
    name = "vllm.x.KVConnectorBase_V1.get_finished"
    assert p.expected_in(name, "0.33.0") and p.expected_in(name, "0.40.0")
    assert not p.expected_in(name, "0.41.0")
    assert not p.expected_in(name, None)
    both = dataclasses.replace(p, since={"get_finished": "0.20.0"})
    assert not both.expected_in(name, "0.11.0") and both.expected_in(name, "0.33.0")


def test_an_undeclared_carrier_field_is_a_warning(tree, tmp_path: Path) -> None:
    root = tree({"vllm/__init__.py": "", "vllm/v1/__init__.py": "",
                 "vllm/v1/outputs.py": OUTPUTS})
    a = analyse(Request(sources=[str(root)], cache_dir=tmp_path / "cache"))
    hits = [w for w in a.warnings if "KVConnectorOutput.brand_new_channel" in w]
    assert hits and "neither a carrier nor listed under carrier_classes" in hits[0]
    # declared carriers and listed non-carriers are quiet
    assert not [w for w in a.warnings if "KVConnectorOutput.finished_recving exists" in w
                or "kv_connector_stats exists" in w]
