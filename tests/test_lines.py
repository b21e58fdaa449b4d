"""Lines counted during the walk agree with LibCST's PositionProvider."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from kvflowmap.index.parse import facts_from_bytes

FIXTURES = Path(__file__).parent / "fixtures"

TRICKY = '''
import functools

@functools.lru_cache(
    maxsize=None,
)
# a comment between decorator and def

def f(a=(
        compute()), b="""multi
line"""):
    x = (
        g(a)
    )
    y = \\
        h(b)
    if (a ==
            b):
        return [
            k(1),
        ]
    for i in range(3):  # comment
        # leading comment
        print(i)
    try:
        pass
    # comment before except
    except ValueError:
        pass
    return f"""{a}
{b}""" + m()


class C(
    Base,
):
    """Doc
    string."""

    @property
    def p(self):
        return self.q(
            1)
'''


def expected(source: str) -> dict[str, list[tuple[str, int]]]:
    wrapper = MetadataWrapper(cst.parse_module(source), unsafe_skip_copy=True)
    pos = wrapper.resolve(PositionProvider)
    out: dict[str, list] = {"calls": [], "defs": []}

    class V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            out["calls"].append(pos[node].start.line)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            out["defs"].append(pos[node.name].start.line)

        def visit_ClassDef(self, node: cst.ClassDef) -> None:
            out["defs"].append(pos[node.name].start.line)

        def visit_Lambda(self, node: cst.Lambda) -> None:  # a function node of its own
            out["defs"].append(pos[node].start.line)

    wrapper.module.visit(V())
    return out


def actual(source: str) -> dict[str, list[int]]:
    ff = facts_from_bytes("t.py", source.encode())
    assert ff.problem is None
    lines = source.splitlines()
    # Applying a decorator is recorded as a call too (it sits on an '@'
    # line), and so is ``raise C`` (constructing C, with no parentheses).
    def synthetic(c) -> bool:
        text = lines[c.line - 1].lstrip()
        return text.startswith("@") or (text.startswith("raise ") and f"{c.callee}(" not in text)

    calls = sorted({c.line for c in ff.calls} - {c.line for c in ff.calls if synthetic(c)})
    defs = sorted([f.line for f in ff.functions] + [c.line for c in ff.classes])
    return {"calls": calls, "defs": defs}


def check(source: str) -> None:
    exp, got = expected(source), actual(source)
    assert got["defs"] == sorted(exp["defs"])
    lines = source.splitlines()
    exp_calls = set(exp["calls"])
    assert set(got["calls"]) - exp_calls == set()
    missing = {n for n in exp_calls - set(got["calls"]) if not lines[n - 1].lstrip().startswith("@")}
    assert missing == set()


def test_tricky_layout_lines_match_position_provider() -> None:
    check(TRICKY)


@pytest.mark.parametrize("path", sorted(Path(__file__).parent.joinpath("fixtures").rglob("*.py"))[:60],
                         ids=lambda p: p.parent.name + "/" + p.name)
def test_fixture_lines_match(path: Path) -> None:
    check(path.read_text())


def test_node_text_matches_libcst_codegen() -> None:
    """``node_code`` (codegen without position recording) gives exactly the
    collapsed text of LibCST's ``code_for_node`` for every expression and
    statement of the fixtures and of the tricky sample."""
    from kvflowmap.index.text import node_code

    sources = [TRICKY] + [p.read_text() for p in sorted(FIXTURES.rglob("*.py"))]
    checked = 0
    for src in sources:
        module = cst.parse_module(src)

        class Every(cst.CSTVisitor):
            def on_visit(self, node: cst.CSTNode) -> bool:
                nonlocal checked
                if isinstance(node, (cst.BaseExpression, cst.BaseStatement)):
                    # the visitor runs inside this iteration: ``module`` is the current one
                    assert node_code(module, node) == \
                        " ".join(module.code_for_node(node).split())  # noqa: B023
                    checked += 1
                return True

        module.visit(Every())
    assert checked > 1000
