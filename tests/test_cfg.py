"""The intraprocedural control-flow graph built from statement trees."""

from __future__ import annotations

import textwrap
from collections import deque

from kvflowmap.model.cfg import CFG, build_cfg
from kvflowmap.index.parse import facts_from_bytes


def cfg_of(src: str, name: str = "f") -> CFG:
    ff = facts_from_bytes("m.py", textwrap.dedent(src).lstrip("\n").encode())
    fn = next(f for f in ff.functions if f.name == name)
    return build_cfg(fn.body)


def label(cfg: CFG, node: int) -> str:
    n = cfg.nodes[node]
    return n.kind if n.kind in ("entry", "exit", "raise") else \
        (f"with-exit{n.line}" if n.kind == "with-exit" else f"L{n.line}")


def edges(cfg: CFG) -> set[tuple[str, str, str]]:
    """Edges as (source, label, destination) with nodes named by line."""
    return {(label(cfg, s), lab, label(cfg, d)) for s, d, lab in cfg.edges()}


def reachable(cfg: CFG, start: int, avoid: set[str] = frozenset()) -> set[str]:
    seen, queue = {start}, deque([start])
    while queue:
        n = queue.popleft()
        for d, _ in cfg.successors(n):
            if d not in seen and label(cfg, d) not in avoid:
                seen.add(d)
                queue.append(d)
    return {label(cfg, n) for n in seen}


def test_sequence_and_fall_off_the_end() -> None:
    g = cfg_of("""
        def f(x):
            y = 1
            z = 2
    """)
    assert edges(g) == {("entry", "next", "L2"), ("L2", "next", "L3"), ("L3", "end", "exit")}


def test_if_elif_else_and_early_return() -> None:
    g = cfg_of("""
        def f(x):
            if x == 1:
                return 1
            elif x == 2:
                y = 2
            else:
                y = 3
            return y
    """)
    e = edges(g)
    # lines are 1-based in the dedented source: def is line 1
    assert ("L2", "true", "L3") in e and ("L3", "return", "exit") in e
    assert ("L2", "false", "L4") in e and ("L4", "true", "L5") in e and ("L4", "false", "L7") in e
    assert ("L5", "next", "L8") in e and ("L7", "next", "L8") in e and ("L8", "return", "exit") in e
    assert not any(d == "raise" for _, _, d in e)  # no calls, nothing raises


def test_calls_may_raise_to_the_exceptional_exit() -> None:
    g = cfg_of("""
        def f(self):
            self.a()
            x = 1
    """)
    assert ("L2", "exception", "raise") in edges(g)
    assert ("L3", "exception", "raise") not in edges(g)


def test_raise_and_assert() -> None:
    g = cfg_of("""
        def f(x):
            assert x
            if not x:
                raise ValueError(x)
            return x
    """)
    e = edges(g)
    assert ("L2", "assert", "raise") in e and ("L2", "next", "L3") in e
    assert ("L4", "raise", "raise") in e
    assert ("L3", "false", "L5") in e


def test_for_loop_with_break_continue_and_else() -> None:
    g = cfg_of("""
        def f(xs):
            for x in xs:
                if x:
                    break
                if x is None:
                    continue
                y = x
            else:
                y = 0
            return y
    """)
    e = edges(g)
    assert ("L2", "true", "L3") in e and ("L2", "false", "L9") in e  # body / else
    assert ("L4", "break", "L10") in e  # break skips the else
    assert ("L6", "continue", "L2") in e  # continue goes back to the loop head
    assert ("L7", "next", "L2") in e  # end of body loops back
    assert ("L9", "next", "L10") in e


def test_while_true_only_leaves_by_break_or_return() -> None:
    g = cfg_of("""
        def f(q):
            while True:
                x = q.get()
                if x is None:
                    break
            return 1
    """)
    e = edges(g)
    assert not any(s == "L2" and lab == "false" for s, lab, _ in e)
    assert ("L5", "break", "L6") in e


def test_try_except_else_with_implicit_exception_edges() -> None:
    g = cfg_of("""
        def f(self):
            try:
                self.a()
                x = 1
            except ValueError:
                self.b()
            else:
                self.c()
            return 2
    """)
    e = edges(g)
    assert ("L3", "exception", "L5") in e  # the call inside try goes to the handler
    assert ("L4", "exception", "L5") not in e  # no call, no exception edge
    assert ("L3", "exception", "raise") in e  # ValueError may not match what is raised
    assert ("L4", "next", "L8") in e  # else runs after the body
    assert ("L8", "exception", "raise") in e  # else is not covered by the handlers
    assert ("L6", "next", "L9") in e and ("L8", "next", "L9") in e


def test_catch_all_handler_stops_propagation() -> None:
    g = cfg_of("""
        def f(self):
            try:
                self.a()
            except Exception:
                pass
            return 1
    """)
    assert ("L3", "exception", "L4") in edges(g)
    assert ("L3", "exception", "raise") not in edges(g)


def test_finally_runs_on_normal_return_and_exception_paths() -> None:
    g = cfg_of("""
        def f(self, x):
            try:
                if x:
                    return 1
                self.a()
            finally:
                self.done()
            return 2
    """)
    e = edges(g)
    copies = [n for n in g.nodes if n.line == 7]
    assert len(copies) == 3  # normal, return and exception copies of the finally body
    assert ("L4", "return", "L7") in e and ("L5", "exception", "L7") in e
    assert ("L7", "return", "exit") in e  # the return continues after finally
    assert ("L7", "raise", "raise") in e  # the exception is re-raised after finally
    assert ("L7", "next", "L8") in e
    # Every way from the return at line 4 to the exit passes through finally.
    ret = next(n.id for n in g.nodes if n.line == 4)
    assert "exit" not in reachable(g, ret, avoid={"L7"})


def test_exception_in_handler_goes_through_finally() -> None:
    g = cfg_of("""
        def f(self):
            try:
                self.a()
            except KeyError:
                raise RuntimeError()
            finally:
                self.done()
    """)
    e = edges(g)
    assert ("L5", "raise", "L7") in e and ("L7", "raise", "raise") in e


def test_with_runs_exit_on_every_way_out() -> None:
    g = cfg_of("""
        def f(self, x):
            with self.lock:
                if x:
                    return 1
                self.a()
            return 2
    """)
    e = edges(g)
    assert ("L3", "true", "L4") in e
    assert ("L4", "next", "with-exit2") not in e
    assert ("L4", "return", "with-exit2") in e and ("with-exit2", "return", "exit") in e
    assert ("L5", "exception", "with-exit2") in e and ("with-exit2", "raise", "raise") in e
    assert ("L5", "next", "with-exit2") in e and ("with-exit2", "next", "L6") in e
    assert ("L2", "exception", "raise") not in e  # `self.lock` calls nothing


def test_break_out_of_with_inside_loop() -> None:
    g = cfg_of("""
        def f(self, xs):
            for x in xs:
                with self.lock:
                    break
            return 0
    """)
    e = edges(g)
    assert ("L4", "break", "with-exit3") in e and ("with-exit3", "break", "L5") in e


def test_match_cases_and_no_match() -> None:
    g = cfg_of("""
        def f(x):
            match x:
                case 1:
                    y = 1
                case _:
                    y = 2
            return y
    """)
    e = edges(g)
    assert ("L2", "case", "L3") in e and ("L2", "case", "L5") in e
    assert not any(lab == "no-match" for _, lab, _ in e)


def test_unreachable_code_after_return_has_no_predecessor() -> None:
    g = cfg_of("""
        def f():
            return 1
            x = 2
    """)
    dead = next(n.id for n in g.nodes if n.line == 3)
    assert dead not in {d for s, d, _ in g.edges()}
    assert "L3" not in reachable(g, g.entry)


def test_for_iterable_raises_once_not_per_iteration() -> None:
    g = cfg_of("""
        def f(self, m):
            for k in m.items():
                x = k
            return 1
    """)
    e = edges(g)
    # The `for` node evaluates `m.items()` (may raise) and enters the loop
    # head; the body loops back to the head, which has no exception edge.
    fors = [n for n in g.nodes if n.line == 2]
    assert sorted(n.kind for n in fors) == ["loop", "stmt"]
    stmt_node = next(n.id for n in fors if n.kind == "stmt")
    head = next(n.id for n in fors if n.kind == "loop")
    assert (head, "exception") not in [(s, lab) for s, _, lab in g.edges()]
    assert (g.raise_exit, "exception") in g.successors(stmt_node)
    assert ("L3", "next", "L2") in e and ("L2", "false", "L4") in e
