"""vLLM general plugin: makes `kv_connector="ToyConnector"` available."""

from __future__ import annotations


def register() -> None:
    """Register ToyConnector with vLLM's connector factory (lazy import)."""
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

    try:
        KVConnectorFactory.register_connector("ToyConnector", "toyconnector", "ToyConnector")
    except ValueError:
        pass  # already registered in this process
