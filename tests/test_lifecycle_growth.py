"""State a connector's hooks fill and never drain (``lifecycle.growth``):
per connector class, by what its own MRO runs, and only for containers that
grow (not a slot written again by key)."""

from __future__ import annotations

from kvflowmap.api import Request, analyse
from kvflowmap.check.engine import run_rules
from kvflowmap.check.loader import default_rule_dirs, load_rules
from kvflowmap.check.stubs import stub_root

HEAD = """from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Device:
    def __init__(self):
        self.events: list[object] = []
        self.by_layer: dict[str, object] = {}

    def record(self, layer):
        event = object()
        self.events.append(event)
        self.by_layer[layer] = event
        return event

    def destroy(self):
        self.events.clear()
        self.by_layer.clear()


class Saver(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        super().__init__(vllm_config, role, kv_cache_config)
        self.device = Device()

    def wait_for_save(self):
        self.device.record("l0")
"""


def _undrained(tree, tail: str) -> list[tuple[str, str]]:
    root = tree({"conn/__init__.py": HEAD + tail})
    a = analyse(Request(sources=[str(root)], context=[str(stub_root())]))
    rules = [r for r in load_rules(default_rule_dirs())[0] if r.id == "kvc-step-state-drained"]
    return sorted((f.function.rpartition(".")[0].rpartition(".")[2], f.anchor)
                  for f in run_rules(a, rules))


def test_a_subclass_s_drain_does_not_run_for_its_base(tree) -> None:
    # Saver's own instances never run LayerSaver's override; only the list
    # grows (the dict is written again under the same layer's key)
    assert _undrained(tree, """

class LayerSaver(Saver):
    def wait_for_save(self):
        self.device.record("l0")
        self.device.destroy()
""") == [("Saver", "undrained:Device.events")]


def test_a_drain_in_another_hook_of_the_class_counts(tree) -> None:
    assert _undrained(tree, """
    def get_finished(self, finished_req_ids):
        self.device.destroy()
        return None, None
""") == []
