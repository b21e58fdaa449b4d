"""Per-request counts moved on every way on (``lifecycle.counts_moved``):
what makes a container a count, which reads start the search, and which
arms are excused."""

from __future__ import annotations

from kvflowmap.api import Request, analyse
from kvflowmap.check.engine import run_rules
from kvflowmap.check.loader import default_rule_dirs, load_rules
from kvflowmap.check.stubs import stub_root

HEAD = """from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Counting(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        super().__init__(vllm_config, role, kv_cache_config)
        self._left: dict[str, int] = {}
        self._blocks: dict[str, list[int]] = {}
        self._done: list[tuple[str, bool]] = []

    def request_finished(self, request, block_ids):
        self._left[request.request_id] = 2
        return True, None

    def add_part(self, req_id):
        self._left[req_id] += 1
"""


def _unmoved(tree, body: str, more: str = "") -> list[int]:
    """Lines of ``kvc-count-moved`` findings on ``HEAD`` plus a
    ``get_finished`` with ``body`` (and the methods ``more`` after it)."""
    src = HEAD + "\n    def get_finished(self, finished_req_ids):\n" + body + more
    root = tree({"conn/__init__.py": src})
    a = analyse(Request(sources=[str(root)], context=[str(stub_root())]))
    rules = [r for r in load_rules(default_rule_dirs())[0] if r.id == "kvc-count-moved"]
    head = HEAD.count("\n") + 2  # the line of ``def get_finished``
    return sorted(f.line - head for f in run_rules(a, rules))


LOOP = """        out = set()
        for req_id, ok in self._done:
"""


def test_an_arm_that_neither_writes_back_nor_removes_is_found(tree) -> None:
    assert _unmoved(tree, LOOP + """            left = self._left.get(req_id)
            if left is None:
                continue
            if left == 1:
                del self._left[req_id]
                out.add(req_id)
        return out, None
""") == [6]


def test_a_subscript_read_and_an_early_continue(tree) -> None:
    # ``self._left[req_id]`` (no key in the facts: any move of the container counts)
    assert _unmoved(tree, LOOP + """            left = self._left[req_id]
            if not ok:
                continue
            if left > 1:
                self._left[req_id] = left - 1
            else:
                self._left.pop(req_id)
                out.add(req_id)
        return out, None
""") == [4]


def test_the_missing_arm_of_a_membership_test_is_excused(tree) -> None:
    assert _unmoved(tree, LOOP + """            if req_id not in self._left:
                out.add(req_id)
                continue
            left = self._left[req_id]
            if req_id not in self._left:
                continue
            if left > 1:
                self._left[req_id] = left - 1
            else:
                del self._left[req_id]
        return out, None
""") == []


def test_passing_the_id_on_ends_the_duty(tree) -> None:
    # the last part is reported; the container is cleaned by the report's reader
    assert _unmoved(tree, LOOP + """            left = self._left.get(req_id)
            if left is None:
                continue
            if left > 1:
                self._left[req_id] = left - 1
                continue
            out.add(req_id)
        return out, None
""") == []


def test_a_default_makes_it_a_count_up_and_a_list_is_no_count(tree) -> None:
    # ``get(k, 0)`` counts up from nothing; ``+= ids`` extends a list
    assert _unmoved(tree, LOOP + """            left = self._left.get(req_id, 0)
            if left > 5:
                continue
            self._left[req_id] = left + 1
        for req_id, ok in self._done:
            self._blocks[req_id] += [1]
            blocks = self._blocks.get(req_id)
            if blocks:
                self._blocks.pop(req_id)
        return out, None
""") == []


def test_a_statistic_under_a_literal_key_is_no_count(tree) -> None:
    # vLLM's HF3FS stats: ``self.stats["n"] += 1``, merged key by key elsewhere
    assert _unmoved(tree, """        for k, v in self._done:
            acc = self.stats[k]
            if isinstance(acc, list):
                continue
            self.stats[k] = v
        return None, None
""", """
    def wait_for_save(self):
        self.stats["n"] += 1
""") == []
