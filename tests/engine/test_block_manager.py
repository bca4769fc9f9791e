"""The block pool: allocation, ref counts, prefix hits, LRU eviction, vLLM's usage formula."""

from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.runtime.core.block_manager import BlockManager
from kvtool.engine.runtime.core.sequence import Sequence
from kvtool.engine.sizing.engine_config import CacheConfig


def seq_of(tokens):
    return Sequence("r", list(tokens), SamplingParams(), max_tokens=16)


def test_allocation_covers_tokens_and_never_hands_out_the_null_block():
    bm = BlockManager(CacheConfig(block_size=4), num_blocks=5)
    seq = seq_of(range(10))
    assert bm.allocate_slots(seq, 10)
    assert len(seq.block_table) == 3 and 0 not in seq.block_table
    assert bm.usage == 3 / 4
    assert not bm.allocate_slots(seq_of(range(8)), 8)  # 2 needed, 1 free: refused, nothing taken
    assert bm.num_free_blocks == 1


def test_full_blocks_are_shared_by_a_later_prompt_and_counted():
    bm = BlockManager(CacheConfig(block_size=4), num_blocks=10)
    first = seq_of(range(10))
    bm.allocate_slots(first, 10)
    first.num_computed_tokens = 10
    bm.cache_full_blocks(first)
    second = seq_of(list(range(8)) + [99, 98, 97])
    hits = bm.get_computed_blocks(second)
    assert hits == first.block_table[:2]
    assert bm.allocate_slots(second, 3, hits)
    assert second.num_computed_tokens == 8 and second.num_cached_tokens == 8
    assert bm.blocks[hits[0]].ref_count == 2
    assert (bm.prefix_cache_queries, bm.prefix_cache_hits) == (11, 8)


def test_a_full_prompt_hit_still_recomputes_the_last_token():
    bm = BlockManager(CacheConfig(block_size=4), num_blocks=10)
    first = seq_of(range(8))
    bm.allocate_slots(first, 8)
    first.num_computed_tokens = 8
    bm.cache_full_blocks(first)
    assert len(bm.get_computed_blocks(seq_of(range(8)))) == 1


def test_freed_cached_blocks_are_reused_until_evicted():
    bm = BlockManager(CacheConfig(block_size=4), num_blocks=4)
    first = seq_of(range(8))
    bm.allocate_slots(first, 8)
    first.num_computed_tokens = 8
    bm.cache_full_blocks(first)
    bm.free(first)
    assert bm.usage == 0.0
    assert len(bm.get_computed_blocks(seq_of(range(9)))) == 2  # still cached after free
    bm.allocate_slots(seq_of(range(100, 112)), 12)  # takes every block: evicts them
    assert bm.get_computed_blocks(seq_of(range(9))) == []
