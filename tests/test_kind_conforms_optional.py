"""Every guard of ``kvc-optional-field-tested`` is needed by one of the
rule's own examples: with the guard taken out, that example fails."""

from __future__ import annotations

from pathlib import Path

import pytest

import kvflowmap.check.kinds.conforms_optional as optional
from tests.guard_support import failing_examples


def _failing(tmp_path: Path) -> list[int]:
    return failing_examples("kvc-optional-field-tested", tmp_path)


def test_the_examples_pass(tmp_path: Path) -> None:
    assert _failing(tmp_path) == []


def _no_tests(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(optional, "_tests_in", lambda ff, scope, names, first, end: False)


def _no_aliases(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(optional, "_aliases", lambda ff, fn, chain, line: set())


def _no_callers(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(optional, "callers_decide", lambda *a, **k: False)


def _no_type_tests(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(optional, "TYPE_TESTS", ())


def _no_type_ignores(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(optional, "_ignored", lambda ff, fn, line: False)


def _no_flags(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(optional, "flags", lambda ff, chain: set())


def _no_set_later(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(optional, "_set_later", lambda ctx, cls, fname: False)


def _no_present_fields(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(optional, "_present", lambda ctx, decl, fname: False)


@pytest.mark.parametrize("take_out", [_no_tests, _no_aliases, _no_callers, _no_type_tests,
                                      _no_type_ignores, _no_flags, _no_set_later,
                                      _no_present_fields],
                         ids=lambda f: f.__name__)
def test_each_guard_is_needed_by_an_example(take_out, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    take_out(monkeypatch)
    assert _failing(tmp_path), f"no example needs the guard {take_out.__name__} takes out"


@pytest.mark.parametrize("text,admits", [
    ("Optional[Spec]", True), ("Spec | None", True), ("None | Spec", True),
    ("Union[Spec, None]", True), ('"Spec | None"', True), ("typing.Optional[int]", True),
    ("dict[str, Future[None]]", False), ("Spec", False), ("Union[A, B]", False),
    ("Callable[[], None]", False), ("not python(", False)])
def test_admits_none(text: str, admits: bool) -> None:
    assert optional.admits_none(text) is admits
