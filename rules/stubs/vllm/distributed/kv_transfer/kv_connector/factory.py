"""Registry of KV connector classes, loaded lazily by module path."""

import importlib
from collections.abc import Callable
from typing import Any

from vllm.distributed.kv_transfer.kv_connector.base import KVConnectorBase
from vllm.distributed.kv_transfer.kv_connector.v1 import KVConnectorRole
from vllm.logger import init_logger

logger = init_logger(__name__)


class KVConnectorFactory:
    """Maps connector names to lazily imported classes."""

    _registry: dict[str, Callable[[], type[KVConnectorBase]]] = {}

    @classmethod
    def register_connector(cls, name: str, module_path: str, class_name: str) -> None:
        """Register a connector by module path and class name."""
        if name in cls._registry:
            raise ValueError(f"Connector '{name}' is already registered.")

        def loader() -> type[KVConnectorBase]:
            module = importlib.import_module(module_path)
            return getattr(module, class_name)

        cls._registry[name] = loader

    @classmethod
    def get_connector_class(cls, kv_transfer_config: Any) -> type[KVConnectorBase]:
        """The class named by ``kv_transfer_config.kv_connector``."""
        name = kv_transfer_config.kv_connector
        if name not in cls._registry:
            raise ValueError(f"Unsupported connector type: {name}")
        return cls._registry[name]()

    @classmethod
    def create_connector(
        cls, config: Any, role: KVConnectorRole, kv_cache_config: Any = None
    ) -> KVConnectorBase:
        """Build the configured connector for one process."""
        kv_transfer_config = config.kv_transfer_config
        if kv_transfer_config is None:
            raise ValueError("kv_transfer_config must be set to create a connector")
        connector_cls = cls.get_connector_class(kv_transfer_config)
        logger.info("Creating v1 connector %s with role %s", connector_cls.__name__, role.name)
        return connector_cls(config, role, kv_cache_config)
