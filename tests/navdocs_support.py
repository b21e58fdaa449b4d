"""Shared helpers for the navigation and docs tests: the minivllm analysis
and golden-file comparison (``KVFLOWMAP_UPDATE_GOLDEN=1`` rewrites them)."""

from __future__ import annotations

import functools
import os
from pathlib import Path

GOLDEN = Path(__file__).parent / "golden"
MINIVLLM = Path(__file__).parent / "fixtures" / "minivllm"
TEMPLATE = "{root}/{file}#L{line}"  # no machine paths in golden pages


@functools.lru_cache(maxsize=None)
def minivllm_analysis():
    """minivllm analysed with the stub vLLM as context, without the cache."""
    from kvflowmap.api import Request, analyse
    from kvflowmap.check.stubs import stub_root

    return analyse(Request(sources=[str(MINIVLLM)], context=[str(stub_root())],
                           use_cache=False))


def fixed_rules() -> list:
    """Two rules built here, so golden pages do not change when the shipped
    rule files do."""
    from kvflowmap.check.model import AppliesTo, Rule

    base = "vllm.distributed.kv_transfer.kv_connector.v1.base.KVConnectorBase_V1"
    probe = Rule(id="t-probe", title="The probe is a probe", severity="error",
                 rationale="r", kind="reach", params={"probe_method": "get_num_new_matched_tokens"},
                 applies_to=AppliesTo(base_class=(base,)), examples=(), help="h", pack="t",
                 path=Path("t-probe.yaml"))
    states = Rule(id="t-states", title="Allowed transitions", severity="warning", rationale="r",
                  kind="states", params={"allowed": ["* -> FINISHED_*"]},
                  applies_to=AppliesTo(modules=("vllm.v1.*",), include_context=True),
                  examples=(), help="h", pack="t", path=Path("t-states.yaml"))
    return [probe, states]


def assert_golden(name: str, data: str | bytes) -> None:
    """Compare ``data`` with ``tests/golden/<name>`` (or rewrite it)."""
    path = GOLDEN / name
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if os.environ.get("KVFLOWMAP_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)
        return
    assert path.is_file(), f"{path} missing: run with KVFLOWMAP_UPDATE_GOLDEN=1 to create it"
    expected = path.read_bytes()
    assert raw == expected, (f"{name} differs from its golden file; if the change is intended, "
                             f"regenerate with KVFLOWMAP_UPDATE_GOLDEN=1\n--- got ---\n"
                             f"{raw.decode('utf-8', 'replace')[:3000]}")
