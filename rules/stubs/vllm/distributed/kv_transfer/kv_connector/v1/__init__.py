"""The v1 connector API, re-exported."""

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
)

__all__ = ["KVConnectorBase_V1", "KVConnectorMetadata", "KVConnectorRole"]
