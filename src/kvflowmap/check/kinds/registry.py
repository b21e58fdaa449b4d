"""The rule kinds by the name rule files use.

Each entry is one ``KindSpec`` or, for a kind with modes, a dict
mode -> ``KindSpec`` chosen by the rule's ``mode`` parameter (the first mode
is the default). A kind package registers with one line in ``KINDS``."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from kvflowmap.check.kinds import conforms, forbid, paired, reach, returns, states
from kvflowmap.check.kinds.spec import Kind, KindSpec
from kvflowmap.check.model import Rule
from kvflowmap.check.options import OptionsError, build_options, unknown_message

MODE = "mode"  # the parameter that picks a mode

KINDS: dict[str, Kind] = {
    "conforms": conforms.SPEC,
    "forbid": forbid.SPEC,
    "paired": paired.SPEC,
    "reach": reach.MODES,
    "returns": returns.SPEC,
    "states": states.SPEC,
}


def _optional_modes(module: str) -> dict[str, KindSpec] | None:
    """``module.MODES`` when that module exists (a kind still being built);
    any other import error surfaces."""
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module.startswith(exc.name):
            return None
        raise
    modes = getattr(mod, "MODES", None)
    return modes if isinstance(modes, dict) and modes else None


_LIFECYCLE = _optional_modes("kvflowmap.check.kinds.lifecycle")
if _LIFECYCLE is not None:
    KINDS["lifecycle"] = _LIFECYCLE


def modes_of(kind: str) -> dict[str, KindSpec] | None:
    """The modes of a kind (None: a kind without modes, or unknown)."""
    entry = KINDS.get(kind)
    return entry if isinstance(entry, dict) else None


def default_mode(kind: str) -> str | None:
    """The mode a rule of ``kind`` runs in when it names none."""
    modes = modes_of(kind)
    return next(iter(modes)) if modes else None


def spec_for(kind: str, params: Mapping[str, Any]) -> KindSpec:
    """The spec a rule with these params runs: the kind's, or its mode's.
    Raises ``KeyError`` for an unknown kind, ``OptionsError`` for a bad mode."""
    entry = KINDS[kind]
    if isinstance(entry, KindSpec):
        return entry
    mode = params.get(MODE, next(iter(entry)))
    if not isinstance(mode, str) or mode not in entry:
        raise OptionsError(MODE, f"expected one of {', '.join(entry)} (got {mode!r})")
    return entry[mode]


def own_params(kind: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` without the ``mode`` selector of a kind with modes."""
    return {k: v for k, v in params.items() if not (k == MODE and modes_of(kind))}


def options_for(rule: Rule) -> Any:
    """The rule's ``Options``: built by the loader, else (a rule made in
    code) from its params now."""
    if rule.options is not None:
        return rule.options
    spec = spec_for(rule.kind, rule.params)
    return build_options(spec.options, own_params(rule.kind, rule.params), f"kind '{rule.kind}'")


__all__ = ["KINDS", "MODE", "KindSpec", "default_mode", "modes_of", "options_for",
           "own_params", "spec_for", "unknown_message"]
