"""Walk-counted lines agree with PositionProvider on real vLLM and PegaFlow files."""

from __future__ import annotations

import pytest

from tests.test_lines import check

pytestmark = pytest.mark.integration


def test_lines_on_real_files(vllm_root, pegaflow_root) -> None:
    files = sorted((vllm_root / "vllm" / "v1").rglob("*.py"))[::12]
    files += sorted((pegaflow_root / "pegaflow").rglob("*.py"))
    failures = []
    for path in files:
        try:
            check(path.read_text(encoding="utf-8"))
        except AssertionError as exc:
            failures.append(f"{path}: {str(exc)[:200]}")
    assert not failures, "\n".join(failures[:10])
