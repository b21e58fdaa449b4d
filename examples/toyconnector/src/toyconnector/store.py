"""A process-local KV store: prompt prefix -> saved block contents."""

from __future__ import annotations


class InMemoryKVStore:
    """Keeps saved blocks in a dict; good enough to show the flow."""

    def __init__(self) -> None:
        self._entries: dict[tuple[int, ...], list[bytes]] = {}

    def longest_prefix(self, token_ids: list[int], block_size: int) -> int:
        """Number of leading tokens (whole blocks) the store holds."""
        hit = 0
        for end in range(block_size, len(token_ids) + 1, block_size):
            if tuple(token_ids[:end]) not in self._entries:
                break
            hit = end
        return hit

    def get(self, token_ids: list[int]) -> list[bytes] | None:
        """Saved blocks for exactly this prefix."""
        return self._entries.get(tuple(token_ids))

    def put(self, token_ids: list[int], blocks: list[bytes]) -> None:
        """Save blocks under a prefix."""
        self._entries[tuple(token_ids)] = blocks


STORE = InMemoryKVStore()
