"""Outputs do not depend on how the work is scheduled; every block comes back."""

import pytest
from engine_cases import prompts_of

from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.runtime.llm import LLM

GREEDY = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)
SHARED_PREFIX = prompts_of([48])[0]


def workload():
    """Prompts of ragged lengths, several sharing a 48-token prefix (three full blocks)."""
    return prompts_of([5, 17, 33, 70]) + [SHARED_PREFIX + tail for tail in prompts_of([3, 20, 9], seed=1)]


def run(folder, **kwargs):
    llm = LLM(str(folder), dtype="float32", **{"kv_cache_memory": 1 << 20, **kwargs})
    outputs = llm.generate(workload(), GREEDY, use_tqdm=False)
    stats = llm.engine.stats()
    assert stats.num_free_blocks == stats.num_blocks - 1, "blocks leaked"
    return [o.outputs[0].token_ids for o in outputs], llm


@pytest.fixture(scope="module")
def baseline(tiny_llama):
    return run(tiny_llama[0], enable_prefix_caching=False, enable_chunked_prefill=False, max_num_batched_tokens=512)[0]


def test_prefix_caching_hits_and_changes_nothing(tiny_llama, baseline):
    tokens, llm = run(tiny_llama[0], enable_prefix_caching=True, max_num_seqs=1)
    assert tokens == baseline
    stats = llm.engine.stats()
    assert stats.prefix_cache_hits >= 2 * 48  # the later prompts reuse the shared blocks


def test_chunked_prefill_at_32_tokens_changes_nothing(tiny_llama, baseline):
    tokens, _ = run(tiny_llama[0], max_num_batched_tokens=32, max_num_seqs=8, enable_prefix_caching=False)
    assert tokens == baseline


def test_forced_preemption_changes_nothing(tiny_llama, baseline):
    # 16 blocks of 16 tokens (one of them the null block) cannot hold 7 requests of up to 94 tokens.
    tokens, llm = run(tiny_llama[0], kv_cache_memory=16 * 16 * 512, max_model_len=128)
    assert llm.engine.stats().num_preemptions > 0
    assert tokens == baseline


def test_abort_frees_every_block(tiny_llm):
    engine = tiny_llm.engine
    for i, prompt in enumerate(prompts_of([30, 50, 70])):
        engine.add_request(f"abort-{i}", prompt, SamplingParams(max_tokens=50, ignore_eos=True))
    engine.step()
    engine.step()
    assert engine.stats().kv_cache_usage > 0
    outputs = [engine.abort_request(f"abort-{i}") for i in range(3)]
    assert all(o.finished and o.outputs[0].finish_reason == "abort" for o in outputs)
    stats = engine.stats()
    assert (stats.kv_cache_usage, stats.num_running, stats.num_waiting) == (0.0, 0, 0)
