"""Every guard of ``kvc-field-set-in-every-mode`` is needed by one of the
rule's own examples: with the guard taken out, that example fails."""

from __future__ import annotations

from pathlib import Path

import pytest

import kvflowmap.check.kinds.conforms_modes as modes
from kvflowmap.check.context import CheckContext
from tests.guard_support import failing_examples


def _failing(tmp_path: Path) -> list[int]:
    return failing_examples("kvc-field-set-in-every-mode", tmp_path)


def test_the_examples_pass(tmp_path: Path) -> None:
    assert _failing(tmp_path) == []


class _NoRoles:
    """The protocol with no role tests."""

    def __init__(self, protocol) -> None:
        self._p = protocol

    def __getattr__(self, name: str):
        return getattr(self._p, name)

    @property
    def lifecycle(self) -> dict:
        return {**self._p.lifecycle, "role_tests": []}


def _no_stops(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(modes, "_stopper_at", lambda raises, ctx, fqn, ff: (lambda st: False))


def _no_exhaustive_elif(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(modes, "_else", lambda orelse, field, ff, stops:
               modes._outcomes(orelse, field, ff, stops))


def _no_markers(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(modes, "_markers", lambda ff, init, made, tests: set())


def _no_computed_setattr(mp: pytest.MonkeyPatch) -> None:
    orig = modes._set_elsewhere
    mp.setattr(modes, "_set_elsewhere", lambda ctx, cls, init: orig(ctx, cls, init) - {"*"})


def _no_roles(mp: pytest.MonkeyPatch) -> None:
    orig = CheckContext.protocol
    mp.setattr(CheckContext, "protocol", property(lambda self: _NoRoles(orig.fget(self))))


@pytest.mark.parametrize("take_out", [_no_stops, _no_exhaustive_elif, _no_markers,
                                      _no_computed_setattr, _no_roles],
                         ids=lambda f: f.__name__)
def test_each_guard_is_needed_by_an_example(take_out, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    take_out(monkeypatch)
    assert _failing(tmp_path), f"no example needs the guard {take_out.__name__} takes out"
