"""Block allocation for the KV cache (no real memory behind it)."""

from vllm.v1.request import Request


class KVCacheBlocks:
    """The blocks allocated to one request."""

    def __init__(self, block_ids: list[int]) -> None:
        self.block_ids = block_ids

    def get_block_ids(self) -> list[int]:
        """Ids of the blocks, in token order."""
        return list(self.block_ids)


class KVCacheManager:
    """Hands out fixed-size blocks and remembers which request owns them."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.block_size = block_size
        self.free_block_ids = list(range(num_blocks))
        self.req_to_blocks: dict[str, list[int]] = {}

    def get_num_computed_tokens(self, request: Request) -> int:
        """Tokens already in the local prefix cache (none in this miniature)."""
        return 0

    def allocate_slots(
        self, request: Request, num_new_tokens: int, num_external_computed_tokens: int = 0
    ) -> KVCacheBlocks | None:
        """Allocate blocks for new and externally computed tokens, or None."""
        wanted = num_new_tokens + num_external_computed_tokens
        num_blocks = -(-wanted // self.block_size)
        if num_blocks > len(self.free_block_ids):
            return None
        block_ids = [self.free_block_ids.pop() for _ in range(num_blocks)]
        self.req_to_blocks.setdefault(request.request_id, []).extend(block_ids)
        return KVCacheBlocks(self.req_to_blocks[request.request_id])

    def get_block_ids(self, request_id: str) -> list[int]:
        """Blocks currently owned by a request."""
        return list(self.req_to_blocks.get(request_id, ()))

    def cache_blocks(self, request: Request, num_computed_tokens: int) -> None:
        """Make the request's full blocks reusable as prefix cache."""

    def free(self, request: Request) -> None:
        """Return a request's blocks to the free list."""
        self.free_block_ids.extend(self.req_to_blocks.pop(request.request_id, ()))
