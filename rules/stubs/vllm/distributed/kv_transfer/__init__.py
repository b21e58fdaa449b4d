"""KV transfer: the per-process connector, re-exported."""

from vllm.distributed.kv_transfer.kv_transfer_state import (
    ensure_kv_transfer_initialized,
    get_kv_transfer_group,
    has_kv_transfer_group,
)

__all__ = ["ensure_kv_transfer_initialized", "get_kv_transfer_group", "has_kv_transfer_group"]
