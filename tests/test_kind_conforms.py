"""The ``conforms`` rule kind: overrides, abstract methods, vanished members, two releases."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kvflowmap.api import Request, analyse
from kvflowmap.check.engine import run_rules
from kvflowmap.check.model import AppliesTo, Finding, Rule
from kvflowmap.check.stubs import stub_root

BASE = "vllm.distributed.kv_transfer.kv_connector.v1.base.KVConnectorBase_V1"
IMPORT = ("from vllm.distributed.kv_transfer.kv_connector.v1.base import "
          "KVConnectorBase_V1, KVConnectorMetadata\n")


def rule(**params) -> Rule:
    return Rule(id="t-conforms", title="t", severity="error", rationale="r", kind="conforms",
                params=params, applies_to=AppliesTo(base_class=(BASE,)), examples=(),
                help="h", pack="test", path=Path("t.yaml"))


def check(tree, source: str, **params) -> list[Finding]:
    root = tree({"conn/__init__.py": IMPORT + source})
    analysis = analyse(Request(sources=[str(root)], context=[str(stub_root())]))
    return run_rules(analysis, [rule(**params)])


def messages(findings: list[Finding]) -> list[str]:
    return [f.message for f in findings]


SIG = dict(abstract=False, missing_members=False)


def test_handle_preemptions_set_of_ids_against_metadata_base(tree):
    found = check(tree, """
class Old(KVConnectorBase_V1):
    def handle_preemptions(self, preempted_req_ids: set[str]) -> None:
        pass
""", **SIG)
    assert len(found) == 1
    f = found[0]
    assert f.function == "conn.Old.handle_preemptions" and f.line == 4
    assert "annotated set[str]" in f.message and "KVConnectorMetadata" in f.message
    notes = [s.note for s in f.path]
    assert notes[0].startswith("base (")
    assert "kv_connector_metadata: KVConnectorMetadata" in notes[0]
    assert notes[1].startswith("override:")
    assert any(n.startswith("vLLM calls it:") for n in notes)


@pytest.mark.parametrize("annotation", ["", ": KVConnectorMetadata", ": 'Mine'", ": Any",
                                        ": Mine | None", ": object"])
def test_compatible_annotations_are_accepted(tree, annotation):
    found = check(tree, f"""
from typing import Any


class Mine(KVConnectorMetadata):
    pass


class New(KVConnectorBase_V1):
    def handle_preemptions(self, metadata{annotation}) -> None:
        pass
""", **SIG)
    assert found == []


def test_union_without_overlap_and_builtin_mismatch(tree):
    found = check(tree, """
class C(KVConnectorBase_V1):
    def handle_preemptions(self, ids: set[str] | None) -> None:
        pass

    def wait_for_layer_load(self, layer_name: int) -> None:
        pass
""", **SIG)
    assert sorted(f.line for f in found) == [4, 7]


def test_parameter_shapes(tree):
    found = check(tree, """
class C(KVConnectorBase_V1):
    def start_load_kv(self, forward_context):
        pass

    def get_num_new_matched_tokens(self, request, num_computed_tokens, hint):
        return 0, False

    def update_state_after_alloc(self, request, blocks):
        pass

    def save_kv_layer(self, layer_name, kv_layer, attn_metadata, extra=None, **kwargs):
        pass

    def wait_for_save(self, *, strict):
        pass
""", **SIG)
    by_line = {f.line: f.message for f in found}
    assert "drops **kwargs" in by_line[4]
    assert "requires parameter 'hint'" in by_line[7]
    assert "does not accept parameter 'num_external_tokens'" in by_line[10]
    assert "requires keyword 'strict'" in by_line[16]
    assert 13 not in by_line  # an extra optional parameter is fine


def test_method_kind_and_async_mismatch(tree):
    found = check(tree, """
class C(KVConnectorBase_V1):
    def role(self):
        return None

    async def wait_for_save(self):
        pass
""", **SIG)
    assert [f.line for f in found] == [4, 7]
    assert "instance method; the base is a property" in found[0].message
    assert "is async" in found[1].message


def test_keyword_names_seen_at_call_sites(tree):
    found = check(tree, """
class C(KVConnectorBase_V1):
    def request_finished(self, request, blocks):
        return False, None


class D(KVConnectorBase_V1):
    def request_finished(self, req, block_ids):
        return False, None


def caller(connector: KVConnectorBase_V1, request):
    return connector.request_finished(request, block_ids=[])
""", **SIG)
    assert [f.function for f in found] == ["conn.C.request_finished"]
    assert "passes 'block_ids=' by keyword" in found[0].message


def test_return_annotations(tree):
    found = check(tree, """
class C(KVConnectorBase_V1):
    def get_num_new_matched_tokens(self, request, num_computed_tokens) -> int:
        return 0

    def get_finished(self, finished_req_ids) -> tuple[set[str], set[str]]:
        return set(), set()
""", **SIG)
    assert [f.line for f in found] == [4]
    assert check(tree, "class C(KVConnectorBase_V1):\n    def get_num_new_matched_tokens("
                 "self, r, n) -> int:\n        return 0\n", returns=False, **SIG) == []


ALL_ABSTRACT = """
    def start_load_kv(self, forward_context, **kwargs): pass
    def wait_for_layer_load(self, layer_name): pass
    def save_kv_layer(self, layer_name, kv_layer, attn_metadata, **kwargs): pass
    def wait_for_save(self): pass
    def get_num_new_matched_tokens(self, request, num_computed_tokens): return 0, False
    def update_state_after_alloc(self, request, blocks, num_external_tokens): pass
    def build_connector_meta(self, scheduler_output): return None
"""


def test_abstract_methods(tree):
    found = check(tree, """
class Half(KVConnectorBase_V1):
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return 0, False


class Leaf(Half):
    def start_load_kv(self, forward_context, **kwargs):
        pass


class Full(KVConnectorBase_V1):""" + ALL_ABSTRACT, signatures=False, missing_members=False)
    names = sorted(f.message.split()[6] for f in found)
    assert all(f.function == "conn.Leaf" and f.line == 8 for f in found)
    assert names == ["build_connector_meta", "save_kv_layer", "update_state_after_alloc",
                     "wait_for_layer_load", "wait_for_save"]
    assert found[0].path[0].note.startswith("abstract in " + BASE)


def test_members_the_base_no_longer_has(tree):
    found = check(tree, """
class C(KVConnectorBase_V1):
    def wait_for_save(self):
        super().wait_for_save_v0()
        self._connector_metadata = None
        self.helper()
        if hasattr(self, "maybe"):
            self.maybe()
        return self.gone + self._vllm_config

    def helper(self):
        self._template_hook()


class Sub(C):
    def _template_hook(self):
        pass
""", signatures=False, abstract=False)
    assert sorted((f.line, f.message.split(":")[0]) for f in found) == [
        (5, "super().wait_for_save_v0"), (10, "self.gone")]


def test_two_release_mode(tree, tmp_path):
    old = tmp_path / "old-vllm"
    shutil.copytree(stub_root(), old)
    base = old / "vllm/distributed/kv_transfer/kv_connector/v1/base.py"
    text = base.read_text()
    new_form = "def handle_preemptions(self, kv_connector_metadata: KVConnectorMetadata) -> None:"
    assert new_form in text
    old_form = "def handle_preemptions(self, preempted_req_ids: set[str]) -> None:"
    base.write_text(text.replace(new_form, old_form))
    found = check(tree, """
class Stale(KVConnectorBase_V1):
    def handle_preemptions(self, preempted_req_ids: set[str]) -> None:
        pass


class Current(KVConnectorBase_V1):
    def handle_preemptions(self, kv_connector_metadata) -> None:
        pass
""", compare_with=str(old))
    assert sorted(f.function for f in found) == ["conn.Stale.handle_preemptions",
                                                  BASE + ".handle_preemptions"]
    stale = next(f for f in found if f.function.startswith("conn."))
    assert "still has the vllm at" in stale.message and len(stale.path) == 3
    changed = next(f for f in found if f.function.startswith("vllm."))
    assert "set[str]" in changed.message and "KVConnectorMetadata" in changed.message



def test_a_sibling_super_call_says_nothing_of_how_vllm_constructs_another_connector(tree):
    # MultiConnector-like: passes the base's names by keyword to *its* base; the
    # other connector, which vLLM constructs positionally, may name them as it likes
    found = check(tree, """
class Sibling(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)


class Mine(KVConnectorBase_V1):
    def __init__(self, config, role, kv_cache_config=None):
        super().__init__(config, role, kv_cache_config)
""", **SIG)
    assert [f for f in found if f.function == "conn.Mine.__init__"] == []


def test_a_subclass_super_call_is_how_the_override_is_called(tree):
    found = check(tree, """
class Parent(KVConnectorBase_V1):
    def __init__(self, config, role, kv_cache_config=None):
        super().__init__(config, role, kv_cache_config)


class Child(Parent):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
""", **SIG)
    assert any(f.function == "conn.Parent.__init__" and "'vllm_config='" in f.message
               for f in found)
