"""Rules in forked groups give the same findings as one after the other."""

from __future__ import annotations

import os

import pytest

from kvflowmap.api import Request, analyse
from kvflowmap.check import engine, forked
from kvflowmap.check.loader import default_rule_dirs, load_rules
from kvflowmap.check.stubs import stub_root

CONNECTOR = '''
import time
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class Conn(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self._pending = {}
        self._leases = {}

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        time.sleep(0.01)
        return 0, False

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        self._pending[request.request_id] = blocks
        self.check(request)

    def check(self, request):
        if not request:
            raise ValueError("bad")
'''


@pytest.mark.skipif(not forked.can_fork(), reason="needs fork and two cores")
def test_forked_groups_find_what_serial_finds(tree, tmp_path, monkeypatch) -> None:
    root = tree({"conn/__init__.py": "", "conn/c.py": CONNECTOR})
    analysis = analyse(Request(sources=[str(root)], context=[str(stub_root())],
                               cache_dir=tmp_path / "cache"))
    rules, errors = load_rules(default_rule_dirs())
    assert not errors and len(rules) > 2
    parallel = engine.run_rules(analysis, rules)
    assert parallel, "the sample connector has findings"
    monkeypatch.setattr(engine, "can_fork", lambda: False)
    serial = engine.run_rules(analysis, rules)
    assert parallel == serial
    # Reversed rule order: still the same findings (each rule starts afresh).
    assert engine.run_rules(analysis, list(reversed(rules))) == serial


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_failing_child_group_is_run_here() -> None:
    parent = os.getpid()

    def run(group: list[int]) -> list[int]:
        if os.getpid() != parent:
            raise RuntimeError("child fails")
        return [x * 2 for x in group]

    assert forked.run_groups([[1, 2], [3], [4, 5]], run) == [[2, 4], [6], [8, 10]]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_children_results_come_back_in_group_order() -> None:
    """The first group runs here, the others in forked children, and the
    results come back in group order whatever order the children finish in."""
    import time

    def run(g: list[int]) -> tuple[int, int]:
        time.sleep(0.05 * (3 - g[0]))  # the last group finishes first
        return g[0], os.getpid()

    results = forked.run_groups([[1], [2], [3]], run)
    assert [r[0] for r in results] == [1, 2, 3]
    pids = [r[1] for r in results]
    assert pids[0] == os.getpid()
    assert os.getpid() not in pids[1:] and len(set(pids[1:])) == 2


def test_no_fork_while_other_threads_run() -> None:
    import threading

    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert not forked.can_fork()
    finally:
        stop.set()
        t.join()
