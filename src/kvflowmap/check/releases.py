"""Another vLLM release analysed on its own, for rules that compare two
releases (``conforms`` with ``compare_with``). Kept out of the rule kinds so
that they import neither the API nor the source fetcher."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvflowmap.api import Analysis


@lru_cache(maxsize=4)
def other_release(ref: str) -> tuple[Analysis, str]:
    """Analysis of another vLLM release (``vllm==0.X.Y`` or an import root)
    and its label, once per process."""
    from kvflowmap.api import Request, analyse
    from kvflowmap.index.cache import default_cache_dir
    from kvflowmap.sources.fetch import fetch_release

    if "==" in ref:
        root, label = fetch_release(ref, default_cache_dir()), ref.replace("==", " ")
    else:
        root, label = Path(ref).expanduser().resolve(), f"vllm at {ref}"
    return analyse(Request(sources=[], release_roots=[(root, label)])), label
