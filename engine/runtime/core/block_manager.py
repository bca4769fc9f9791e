"""The KV cache pool: blocks of block_size tokens, ref counts, a free queue and the prefix cache.

As in vLLM v1, block 0 is a null block that is never handed out (padding in block tables points at
it), only full blocks are cached, a cached block is found by the chained hash of its tokens (and of
the prompt embeddings it holds, if any) and every block before it, and a freed block keeps its hash
until it is reused (LRU eviction).

A sequence holds one block table per KV cache group (see kv_cache_groups.py). In a sliding-window
group, the blocks whose tokens every future query has left behind are freed before each
allocation and their table entries point at the null block, as vLLM's SlidingWindowManager does:
such a group keeps at most cdiv(window - 1 + new tokens, block_size) + 1 blocks per sequence.
Prefix caching is off when a group slides (its blocks are not all kept).
"""

from collections import OrderedDict
from dataclasses import dataclass

from kvtool.engine.runtime.core.sequence import Sequence
from kvtool.engine.runtime.prompt_embeds import block_key
from kvtool.engine.sizing.engine_config import CacheConfig

NULL_BLOCK = 0


@dataclass
class Block:
    block_id: int
    ref_count: int = 0
    block_hash: int | None = None
    token_ids: tuple = ()  # what the block holds: its token ids (and an embeddings digest, see _block_tokens)


class BlockManager:
    """`num_blocks` blocks as the KV cache holds them; block 0 is the null block, never handed out.

    `num_blocks` and `sliding_windows` are facts of the allocated cache and the model, beside the config.
    """

    def __init__(self, config: CacheConfig, num_blocks: int, sliding_windows: tuple[int | None, ...] = (None,)):
        self.block_size = config.block_size
        self.num_blocks = num_blocks
        self.sliding_windows = sliding_windows  # one entry per KV cache group; None: full attention
        self.enable_prefix_caching = config.enable_prefix_caching and not any(sliding_windows)
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.free_queue: OrderedDict[int, None] = OrderedDict((i, None) for i in range(1, num_blocks))
        self.cached: dict[int, int] = {}  # block hash -> block id
        self.prefix_cache_queries = 0  # tokens looked up
        self.prefix_cache_hits = 0  # tokens found

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_queue)

    @property
    def usage(self) -> float:
        """vLLM's kv_cache_usage_perc: 1 - free / (num_blocks - 1), the null block left out."""
        return 1.0 - self.num_free_blocks / max(1, self.num_blocks - 1)

    def get_computed_blocks(self, seq: Sequence) -> list[int]:
        """Block ids of the cached full blocks that start this sequence (never its last token).

        Counts one prefix-cache query of len(seq) tokens and its hits, as vLLM does. A request whose prompt
        logprobs are asked for skips the lookup (its every prompt position must be computed), as in vLLM.
        """
        if not self.enable_prefix_caching or seq.params.skip_reading_prefix_cache:
            return []
        hits = []
        max_blocks = (len(seq) - 1) // self.block_size
        for i, block_hash in enumerate(self._block_hashes(seq, max_blocks)):
            block_id = self.cached.get(block_hash)
            if block_id is None or self.blocks[block_id].token_ids != self._block_tokens(seq, i):
                break
            hits.append(block_id)
        self.prefix_cache_queries += len(seq)
        self.prefix_cache_hits += len(hits) * self.block_size
        return hits

    def allocate_slots(self, seq: Sequence, num_new_tokens: int, computed_blocks: list[int] = ()) -> bool:
        """Give `seq` blocks for `num_new_tokens` more tokens; False (and no change) when they don't fit.

        `computed_blocks` (from get_computed_blocks, for a sequence without blocks yet) are shared
        and move `seq.num_computed_tokens` forward past them.
        """
        if not seq.block_tables:
            seq.block_tables = [[] for _ in self.sliding_windows]
        self._free_skipped_blocks(seq)
        num_computed = seq.num_computed_tokens + len(computed_blocks) * self.block_size
        num_total = self._blocks_for(num_computed + num_new_tokens)
        num_needed = [max(0, num_total - len(table)) for table in seq.block_tables]
        num_needed[0] -= len(computed_blocks)
        num_revived = sum(1 for b in computed_blocks if self.blocks[b].ref_count == 0)
        if sum(num_needed) + num_revived > self.num_free_blocks:
            return False
        seq.block_tables[0].extend(self._take(block_id) for block_id in computed_blocks)
        for table, count in zip(seq.block_tables, num_needed):
            table.extend(self._take(self._pop_free()) for _ in range(count))
        if computed_blocks:
            seq.num_computed_tokens = num_computed
            seq.num_cached_tokens = max(seq.num_cached_tokens, num_computed)
        return True

    def free(self, seq: Sequence) -> None:
        """Drop the sequence's references; tail blocks go first in line for eviction."""
        for table in seq.block_tables:
            for block_id in reversed(table):
                self._release(block_id)
        seq.block_tables = []

    def _release(self, block_id: int) -> None:
        if block_id == NULL_BLOCK:
            return
        block = self.blocks[block_id]
        block.ref_count -= 1
        if block.ref_count == 0:
            self.free_queue[block_id] = None
            if block.block_hash is None:
                self.free_queue.move_to_end(block_id, last=False)

    def _free_skipped_blocks(self, seq: Sequence) -> None:
        """Sliding groups: free the blocks before the window of the next token to compute.

        The query at position p sees keys p - window + 1 .. p; the earliest next query is at
        num_computed_tokens. Freed entries become the null block, from the newest backwards until an
        entry already freed, so each step costs only the blocks it frees.
        """
        for window, table in zip(self.sliding_windows, seq.block_tables):
            if window is None:
                continue
            index = min(len(table), max(0, seq.num_computed_tokens - window + 1) // self.block_size) - 1
            while index >= 0 and table[index] != NULL_BLOCK:
                self._release(table[index])
                table[index] = NULL_BLOCK
                index -= 1

    def cache_full_blocks(self, seq: Sequence) -> None:
        """Register the blocks that computed tokens have filled, so later prompts can reuse them."""
        if not self.enable_prefix_caching:
            return
        num_full = seq.num_computed_tokens // self.block_size
        hashes = self._block_hashes(seq, num_full)
        for i in range(num_full):
            block = self.blocks[seq.block_table[i]]
            if block.block_hash is None and hashes[i] not in self.cached:
                block.block_hash = hashes[i]
                block.token_ids = self._block_tokens(seq, i)
                self.cached[hashes[i]] = block.block_id

    def _block_hashes(self, seq: Sequence, num_blocks: int) -> list[int]:
        while len(seq.block_hashes) < num_blocks:
            parent = seq.block_hashes[-1] if seq.block_hashes else None
            tokens = self._block_tokens(seq, len(seq.block_hashes))
            seq.block_hashes.append(hash((parent, tokens)))
        return seq.block_hashes[:num_blocks]

    def _block_tokens(self, seq: Sequence, i: int) -> tuple:
        """The block's token ids; a block that holds prompt embeddings adds their digest (its ids are placeholders)."""
        start, end = i * self.block_size, (i + 1) * self.block_size
        tokens = tuple(seq.token_ids[start:end])
        key = block_key(seq.prompt_embeds, start, end) if seq.prompt_embeds and start < seq.num_prompt_tokens else None
        return tokens if key is None else (*tokens, key)

    def _blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def _pop_free(self) -> int:
        block_id, _ = self.free_queue.popitem(last=False)
        block = self.blocks[block_id]
        if block.block_hash is not None:
            if self.cached.get(block.block_hash) == block_id:
                del self.cached[block.block_hash]
            block.block_hash, block.token_ids = None, ()
        return block_id

    def _take(self, block_id: int) -> int:
        block = self.blocks[block_id]
        if block.ref_count == 0:
            self.free_queue.pop(block_id, None)
        block.ref_count += 1
        return block_id
