"""A facade (miniature), as vLLM ships for third-party packages (its
``LMCacheConnectorV1``): it builds the package's engine class and forwards
every hook to it. Here the package is ``example`` (the module name the rule
examples are written as), so that examples can state what vLLM calls on a
package's objects. It derives from no connector base on purpose: as a
connector it would take part in every other rule's examples (a composite's
children, a dispatch of every hook).
"""

from typing import Any

from vllm.distributed.kv_transfer.kv_connector.v1.base import (KVConnectorMetadata,
                                                               KVConnectorRole)


class ForwardingFacade:
    """Forwards every hook to the package's engine."""

    def __init__(self, vllm_config: Any, role: KVConnectorRole, kv_cache_config: Any = None):
        from example import ForwardedEngine

        self._engine = ForwardedEngine(vllm_config, role, self)

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        self._engine.start_load_kv(forward_context, **kwargs)

    def wait_for_layer_load(self, layer_name: str) -> None:
        self._engine.wait_for_layer_load(layer_name)

    def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any,
                      **kwargs: Any) -> None:
        self._engine.save_kv_layer(layer_name, kv_layer, attn_metadata, **kwargs)

    def wait_for_save(self) -> None:
        self._engine.wait_for_save()

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        return self._engine.get_finished(finished_req_ids)

    def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int
                                   ) -> tuple[int | None, bool]:
        return self._engine.get_num_new_matched_tokens(request, num_computed_tokens)

    def update_state_after_alloc(self, request: Any, blocks: Any,
                                 num_external_tokens: int) -> None:
        self._engine.update_state_after_alloc(request, num_external_tokens)

    def build_connector_meta(self, scheduler_output: Any) -> KVConnectorMetadata:
        return self._engine.build_connector_meta(scheduler_output)

    def request_finished(self, request: Any, block_ids: list[int]
                         ) -> tuple[bool, dict[str, Any] | None]:
        return self._engine.request_finished(request, block_ids)
