"""Sliding-window layers keep only the blocks their window still needs; the freed blocks go back to
the pool while full-attention layers keep theirs, and outputs stay equal to HF transformers."""

import pytest
from engine_cases import prompts_of
from families import WINDOW
from test_families import hf_greedy

from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.runtime.core.block_manager import NULL_BLOCK, BlockManager
from kvtool.engine.runtime.core.kv_cache_groups import kv_cache_layout
from kvtool.engine.runtime.core.sequence import Sequence
from kvtool.engine.runtime.llm import LLM
from kvtool.engine.sizing.engine_config import CacheConfig


def test_layers_are_grouped_by_kind_without_padding():
    layout = kv_cache_layout([6, None, 6, 6, 6, 6, 6, None, 6, 6, 6, 6])  # Gemma 3's 5:1 pattern
    assert layout.group_size == 2 and layout.num_groups == 6
    assert layout.sliding_windows == (6, 6, 6, 6, 6, None)
    assert layout.placement(7) == (5, 1) and layout.placement(0) == (0, 0)
    assert kv_cache_layout([None] * 4).num_groups == 1


def test_sliding_group_frees_blocks_before_its_window():
    bm = BlockManager(CacheConfig(block_size=4), num_blocks=40, sliding_windows=(None, 6))
    assert not bm.enable_prefix_caching
    seq = Sequence("r", list(range(30)), SamplingParams(), max_tokens=8)
    assert bm.allocate_slots(seq, 30)
    assert [len(t) for t in seq.block_tables] == [8, 8] and bm.num_free_blocks == 39 - 16
    seq.num_computed_tokens = 30
    seq.append_token(1)
    assert bm.allocate_slots(seq, 1)  # the query at 30 sees 25..30: blocks 0-5 (tokens 0..23) are out
    full, sliding = seq.block_tables
    assert NULL_BLOCK not in full and sliding[:6] == [NULL_BLOCK] * 6 and NULL_BLOCK not in sliding[6:]
    assert bm.num_free_blocks == 39 - 10
    bm.free(seq)
    assert bm.num_free_blocks == 39 and bm.blocks[NULL_BLOCK].ref_count == 0


@pytest.mark.parametrize("family", ["gemma2", "mixtral"])  # alternating layers; every layer sliding
def test_engine_keeps_only_the_window_and_matches_hf(family, tiny_family):
    folder, hf_model = tiny_family(family)
    batched = 32
    llm = LLM(str(folder), dtype="float32", kv_cache_memory=1 << 20, max_num_batched_tokens=batched)
    engine, bound = llm.engine, -(-(WINDOW - 1 + batched) // 16) + 1
    windows = engine.model_runner.kv_cache_layout.sliding_windows
    prompt = prompts_of([150])[0]
    engine.add_request("long", prompt, SamplingParams(max_tokens=20, temperature=0.0, ignore_eos=True))
    seq, peak, outputs = engine.seqs_by_request["long"][0], 0, []
    while engine.has_unfinished_requests():
        outputs.extend(engine.step())
        for window, table in zip(windows, seq.block_tables):
            live = sum(block != NULL_BLOCK for block in table)
            assert live <= (bound if window else -(-len(seq) // 16))
            peak = max(peak, live) if window else peak
    assert bound - 2 <= peak <= bound
    assert engine.scheduler.block_manager.num_free_blocks == engine.scheduler.block_manager.num_blocks - 1
    assert outputs[-1].outputs[0].token_ids == hf_greedy(hf_model, prompt, 20)
