"""The attention layers' calls into the connector as vLLM up to 0.12 made
them: the per-layer hooks test only the attention metadata, not whether the
step's connector metadata is bound (0.13 tests ``has_connector_metadata()``
too), so a speculative-decoding drafter's layers call them unbound."""

from typing import Any

from vllm.distributed.kv_transfer import get_kv_transfer_group


def wait_for_kv_layer_from_connector(layer_name: str, attn_metadata: Any) -> None:
    if attn_metadata is None:
        return
    connector = get_kv_transfer_group()
    connector.wait_for_layer_load(layer_name)


def maybe_save_kv_layer_to_connector(layer_name: str, kv_cache_layer: Any,
                                     attn_metadata: Any) -> None:
    if attn_metadata is None:
        return
    connector = get_kv_transfer_group()
    connector.save_kv_layer(layer_name, kv_cache_layer, attn_metadata)
