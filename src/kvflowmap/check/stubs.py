"""Where the stub vLLM used by rule examples lives."""

from __future__ import annotations

from pathlib import Path

STUB_ROOT = Path(__file__).resolve().parent.parent / "rules" / "stubs"


def stub_root() -> Path:
    """Import root of the stub vLLM shipped with the rules."""
    return STUB_ROOT
