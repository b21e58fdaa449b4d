"""The ``returns`` rule kind: literal return shapes of a protocol method."""

from __future__ import annotations

from pathlib import Path

from kvflowmap.api import Request, analyse
from kvflowmap.check.engine import run_rules
from kvflowmap.check.model import AppliesTo, Finding, Rule
from kvflowmap.check.stubs import stub_root

BASE = "vllm.distributed.kv_transfer.kv_connector.v1.base.KVConnectorBase_V1"
IMPORT = "from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1\n"
SHAPE = dict(forbid=[["0", "True"]], require_tuple_len=2)


def check(tree, source: str, **params) -> list[Finding]:
    root = tree({"conn/__init__.py": IMPORT + source})
    analysis = analyse(Request(sources=[str(root)], context=[str(stub_root())]))
    rule = Rule(id="t-returns", title="t", severity="error", rationale="r", kind="returns",
                params=params, applies_to=AppliesTo(base_class=(BASE,)), examples=(),
                help="h", pack="test", path=Path("t.yaml"))
    return run_rules(analysis, [rule])


def lines(found: list[Finding]) -> list[int]:
    return [f.line for f in found]


def line_of(source: str, text: str) -> int:
    """Line of the first line containing ``text`` in the file ``check`` writes."""
    return next(i for i, ln in enumerate((IMPORT + source).splitlines(), 1) if text in ln)


def test_literal_tuples_variables_and_conditionals(tree):
    found = check(tree, """
class C(KVConnectorBase_V1):
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        if request is None:
            return 0, True
        if num_computed_tokens:
            result = (0, True)
            return result
        if request.x:
            return (0, True) if request.y else (num_computed_tokens, False)
        ok = (num_computed_tokens, num_computed_tokens > 0)
        if request.z:
            return ok
        return 0, False

    def other(self):
        return 0, True
""", **SHAPE)
    assert lines(found) == [6, 9, 11]
    assert "(0, True)" in found[0].message
    via_var = found[1]
    assert [s.note for s in via_var.path] == ["result = (0, True)", "returns result"]
    assert via_var.path[0].line == 8


def test_delegate_is_checked_once_not_the_facade(tree):
    found = check(tree, """
class Half:
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return 0, True


class A(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self._s = Half()

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return self._s.get_num_new_matched_tokens(request, num_computed_tokens)


class B(A):
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return self._s.get_num_new_matched_tokens(request, num_computed_tokens)
""", **SHAPE)
    assert len(found) == 1
    f = found[0]
    assert f.function == "conn.Half.get_num_new_matched_tokens" and f.line == 5
    assert f.path[0].note.startswith("returns the result of conn.Half")


def test_tuple_length(tree):
    source = """
class Engine:
    def lookup(self, request):
        if request is None:
            return 0
        return 16


class Wraps(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self._e = Engine()

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        if request.a:
            return None
        if request.b:
            return 1, False, 3
        return self._e.lookup(request), False


class Forwards(Wraps):
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return self._e.lookup(request)  # as is
"""
    found = check(tree, source, require_tuple_len=2)
    assert lines(found) == [line_of(source, "return None"), line_of(source, "return 1, False, 3"),
                            line_of(source, "# as is")]
    assert "returns None" in found[0].message
    via = found[2]
    assert via.function == "conn.Forwards.get_num_new_matched_tokens"
    assert "Engine.lookup as is, which can be 0" in via.message
    assert via.path[-1].function == "conn.Engine.lookup"


def test_yaml_values_and_wildcards(tree):
    source = """
class C(KVConnectorBase_V1):
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        if request:
            return 5, True
        return None, True
"""
    assert lines(check(tree, source, forbid=[[0, True]])) == []
    assert lines(check(tree, source, forbid=[["*", True]])) == [6, 7]
    assert lines(check(tree, source, forbid=[[None, "True"]])) == [7]
    assert lines(check(tree, source, methods=["other"], forbid=[["*", True]])) == []


def test_falls_through_follows_the_statement_tree() -> None:
    from kvflowmap.check.kinds.returns import falls_through
    from kvflowmap.facts import Stmt

    ret, rai, simple = Stmt("return", 1), Stmt("raise", 1), Stmt("simple", 1)
    brk = Stmt("break", 1)
    assert falls_through(()) and falls_through((simple,))
    assert not falls_through((simple, ret)) and not falls_through((rai,))
    assert not falls_through((Stmt("if", 1, "x", body=(ret,), orelse=(rai,)),))
    assert falls_through((Stmt("if", 1, "x", body=(ret,)),))  # no else
    assert not falls_through((Stmt("while", 1, "True", body=(simple,)),))
    assert falls_through((Stmt("while", 1, "True", body=(Stmt("if", 1, "x", body=(brk,)),)),))
    inner = Stmt("for", 1, "x in y", body=(brk,))  # its break ends the inner loop only
    assert not falls_through((Stmt("while", 1, "True", body=(inner,)),))
    assert not falls_through((Stmt("try", 1, body=(ret,), handlers=(Stmt("except", 1, body=(rai,)),)),))
    assert falls_through((Stmt("try", 1, body=(ret,), handlers=(Stmt("except", 1, body=(simple,)),)),))
    assert not falls_through((Stmt("with", 1, "lock", body=(ret,)),))


DELEGATE = """
from functools import wraps


def delegate_to(member):
    def decorator(method):
        @wraps(method)
        def wrapper(self, *args, **kwargs):
            return getattr(getattr(self, member), method.__name__)(*args, **kwargs)
        return wrapper
    return decorator


def traced(method):
    @wraps(method)
    def wrapper(self, *args, **kwargs):
        return method(self, *args, **kwargs)
    return wrapper


class Sched:
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return 4, False


class C(KVConnectorBase_V1):
    @delegate_to("sched")
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        pass


class D(KVConnectorBase_V1):
    @traced
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        pass
"""


def test_a_body_its_decorator_replaces_is_not_judged_a_wrapped_one_is(tree):
    found = check(tree, DELEGATE, **SHAPE)
    # C's ``pass`` never runs: the wrapper forwards to self.sched; D's does
    assert [f.function.rpartition(".")[0].rpartition(".")[2] for f in found] == ["D"]
