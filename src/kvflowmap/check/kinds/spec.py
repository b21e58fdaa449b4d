"""What a rule kind (or one mode of a kind) is: its ``Options`` dataclass,
its ``check(ctx, opts)`` and what in the model it reads.

Kept apart from the registry so kind modules can build their ``KindSpec``
without importing every other kind."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kvflowmap.check.context import CheckContext
from kvflowmap.check.model import Finding


@dataclass(frozen=True)
class KindSpec:
    """One rule kind or mode.

    ``options``: a frozen dataclass whose fields (``option(default, help)``)
    are the rule parameters; ``check``: the findings of one rule;
    ``reads``: what in the model the kind looks at, one sentence for
    ``kvflowmap explain`` (``"Reads: the return statements of ..."``)."""

    options: type
    check: Callable[[CheckContext, Any], list[Finding]]
    reads: str

    @property
    def doc(self) -> str:
        """The first paragraph of the docstring of the module defining ``check``."""
        module = sys.modules.get(getattr(self.check, "__module__", ""))
        text = (getattr(module, "__doc__", None) or "").strip().split("\n\n")[0]
        return " ".join(text.split())


# A kind is one spec, or modes selected by the rule's ``mode`` parameter
# (the first mode is the default).
Kind = KindSpec | dict[str, KindSpec]
