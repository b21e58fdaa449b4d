"""The worker process's connector instance."""

from typing import Any

from vllm.distributed.kv_transfer.kv_connector.base import KVConnectorBaseType
from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
from vllm.distributed.kv_transfer.kv_connector.v1 import KVConnectorRole

_KV_CONNECTOR_AGENT: KVConnectorBaseType | None = None


def get_kv_transfer_group() -> KVConnectorBaseType:
    """The worker-side connector of this process."""
    assert _KV_CONNECTOR_AGENT is not None, "KV transfer group is not initialized"
    return _KV_CONNECTOR_AGENT


def has_kv_transfer_group() -> bool:
    """True when a connector is configured in this process."""
    return _KV_CONNECTOR_AGENT is not None


def ensure_kv_transfer_initialized(vllm_config: Any, kv_cache_config: Any = None) -> None:
    """Create the worker-side connector once per process."""
    global _KV_CONNECTOR_AGENT
    if vllm_config.kv_transfer_config is None:
        return
    if _KV_CONNECTOR_AGENT is None:
        _KV_CONNECTOR_AGENT = KVConnectorFactory.create_connector(
            config=vllm_config, role=KVConnectorRole.WORKER, kv_cache_config=kv_cache_config
        )
