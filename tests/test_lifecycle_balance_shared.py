"""``kvc-request-state-balanced`` on code several leaf classes share: one
finding per container and site, naming the other classes, not one per class."""

from __future__ import annotations

from kvflowmap.api import Request, analyse
from kvflowmap.check.engine import run_rules
from kvflowmap.check.loader import default_rule_dirs, load_rules

MIXIN = '''
class TransportMixin:
    def init_transport(self):
        self._pending: dict[str, int] = {}
        self._done: set[str] = set()

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        self._pending[request.request_id] = num_computed_tokens
        return 0, False

    def get_finished(self, finished_req_ids):
        done, self._done = self._done, set()
        return done, None


class GpuRunner(TransportMixin):
    def __init__(self):
        self.init_transport()


class NpuRunner(TransportMixin):
    def __init__(self):
        self.init_transport()


class XpuRunner(TransportMixin):
    def __init__(self):
        self.init_transport()
'''


def test_one_finding_for_the_classes_that_share_the_leak(tree):
    rule = next(r for r in load_rules(default_rule_dirs())[0]
                if r.id == "kvc-request-state-balanced")
    analysis = analyse(Request(sources=[str(tree({"conn/__init__.py": "",
                                                  "conn/mixin.py": MIXIN}))]))
    findings = [f for f in run_rules(analysis, [rule]) if "_pending" in f.message]
    assert len(findings) == 1
    lines = MIXIN.strip().splitlines()
    assert findings[0].line == 1 + next(n for n, t in enumerate(lines) if "self._pending[" in t)
    assert "self._pending of GpuRunner" in findings[0].message
    assert "2 more classes built on this code: NpuRunner, XpuRunner." in findings[0].message


ADAPTER = '''
class ChunkAdapter:
    def __init__(self):
        self._pending_prefills: dict[str, dict] = {}
        self._done: set[str] = set()

    def get_finished(self, finished_req_ids):
        for req_id in finished_req_ids:
            self._pending_prefills.pop(req_id, None)
        done, self._done = self._done, set()
        return done, None
'''
PROCESSOR = '''
def stage_input(transfer_manager, request_id, payload):
    transfer_manager._pending_prefills[request_id] = payload
'''


def test_private_state_another_module_fills_through_a_parameter(tree):
    rule = next(r for r in load_rules(default_rule_dirs())[0]
                if r.id == "kvc-request-state-balanced")
    files = {"conn/__init__.py": "", "conn/adapter.py": ADAPTER}
    alone = analyse(Request(sources=[str(tree(files))]))
    assert [f for f in run_rules(alone, [rule]) if "_pending_prefills" in f.message]
    files["conn/processor.py"] = PROCESSOR  # imports nothing of the adapter
    filled = analyse(Request(sources=[str(tree(files))]))
    assert not [f for f in run_rules(filled, [rule]) if "_pending_prefills" in f.message]


def test_a_removal_from_the_wrong_container_is_named_in_both_findings(tree):
    rule = next(r for r in load_rules(default_rule_dirs())[0]
                if r.id == "kvc-request-state-balanced")
    example = next(e for e in rule.examples if "requests_blend_meta" in e.files["example.py"])
    analysis = analyse(Request(sources=[str(tree({"conn/__init__.py": "",
                                                  "conn/blend.py": example.files["example.py"]}))]))
    hints = sorted(f.message.rpartition(". ")[2] for f in run_rules(analysis, [rule]))
    assert hints == ["BlendConnector.build_connector_meta also reads self.requests_blend_meta, "
                     "which ids enter and nothing empties: the removal may name the wrong "
                     "container.",
                     "BlendConnector.build_connector_meta takes ids out of self.requests_meta "
                     "instead, which nothing fills: the removal may name the wrong container."]
