"""Memoised answers do not depend on the order of queries (``model.cycles``)."""

from __future__ import annotations

import itertools

from kvflowmap.model.cycles import CycleGuard
from kvflowmap.model.classes import ClassIndex
from kvflowmap.model.core import Model
from kvflowmap.model.values import Evaluator

from kvflowmap.api import analyse
from kvflowmap.request import Request

CYCLE = '''
class Worker:
    def run(self):
        return 1


x = y
y = x
y = Worker()
z = x
'''


def _fresh(root) -> Evaluator:
    a = analyse(Request(sources=[str(root)], use_cache=False))
    model: Model = a.linker.model
    return Evaluator(model, ClassIndex(model))


def test_values_in_a_cycle_are_the_same_in_any_order(tree) -> None:
    root = tree({"m.py": CYCLE})
    answers = []
    for order in itertools.permutations(["x", "y", "z", "x.run", "z.run"]):
        ev = _fresh(root)
        answers.append({name: ev.eval(("m", ""), name) for name in order})
    assert all(a == answers[0] for a in answers)
    assert answers[0]["x"] == (("inst", "m.Worker"),)
    assert answers[0]["z.run"] == (("func", "m.Worker.run"),)


def test_a_partial_answer_inside_a_cycle_is_not_stored() -> None:
    guard = CycleGuard()
    memo: dict[str, tuple[str, ...]] = {}
    graph = {"a": ["b"], "b": ["a", "c"], "c": []}

    def reach(n: str) -> tuple[str, ...]:
        def compute() -> tuple[str, ...]:
            out = [n]
            for m in graph[n]:
                out += reach(m)
            return tuple(sorted(set(out)))
        return guard.memoised(memo, n, compute, ())

    assert reach("a") == ("a", "b", "c")
    assert "b" not in memo  # computed while "a" was in progress: partial
    assert reach("b") == ("a", "b", "c")  # asked on its own: complete, stored
    assert memo["b"] == ("a", "b", "c")


def test_a_depth_cut_is_never_stored_up_the_stack() -> None:
    guard = CycleGuard()
    memo: dict[int, int] = {}

    def deep(n: int) -> int:
        if n > 3:
            guard.cut()
            return 0
        return guard.memoised(memo, n, lambda: deep(n + 1) + 1, 0)

    assert deep(0) == 4
    assert memo == {}
