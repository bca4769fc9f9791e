"""The GPU path's host-side parts, exercised on CPU with the reference ops: CUDA-graph padding and
the profile run that sizes the KV cache. Graph capture itself runs only on a GPU."""

import pytest
import torch
from paged_cases import BLOCK_SIZE
from transformers import LlamaConfig

from kvtool.engine.runtime.layers.attention import AttentionMetadata
from kvtool.engine.runtime.worker.cuda_graph import CUDAGraphRunner, DecodeBuffers, capture_sizes
from kvtool.engine.runtime.worker.kv_budget import (
    GiB,
    MemorySnapshot,
    check_free_memory,
    kv_memory_profile,
    profile_forward,
)
from kvtool.engine.runtime.worker.loader import load_model
from kvtool.engine.sizing.engine_config import ModelConfig
from kvtool.errors import KvtoolError
from kvtool.kernels import get_ops

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


@pytest.fixture(scope="module")
def tiny_model():
    config = LlamaConfig(
        vocab_size=128,
        hidden_size=96,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=6,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    return load_model(None, config, get_ops(DEVICE), torch.float32, DEVICE, 256, ModelConfig(load_format="dummy"))


def bind_cache(model, num_blocks):
    cfg = model.config
    shape = (
        cfg.num_hidden_layers,
        num_blocks,
        BLOCK_SIZE,
        cfg.num_key_value_heads,
        cfg.hidden_size // cfg.num_attention_heads,
    )
    g = torch.Generator().manual_seed(7)  # random history for every sequence
    k_cache, v_cache = (torch.randn(shape, generator=g).to(DEVICE) for _ in range(2))
    model.bind_kv_cache(k_cache, v_cache)


def test_capture_sizes_follow_vllm_and_end_at_max_num_seqs():
    assert capture_sizes(1) == [1]
    assert capture_sizes(6) == [1, 2, 4, 6]
    assert capture_sizes(16) == [1, 2, 4, 8, 16]
    assert capture_sizes(20) == [1, 2, 4, 8, 16, 20]


def decode_step(context_lens, tables, generator):
    """Metadata and inputs of one decode step: each sequence's new token at position len - 1."""
    positions = torch.tensor([n - 1 for n in context_lens])
    slots = torch.stack(
        [tables[b, p // BLOCK_SIZE].long() * BLOCK_SIZE + p % BLOCK_SIZE for b, p in enumerate(positions.tolist())]
    )
    meta = AttentionMetadata(
        slot_mapping=slots.to(DEVICE),
        num_decodes=len(context_lens),
        decode_block_tables=tables.to(DEVICE),
        decode_context_lens=torch.tensor(context_lens, dtype=torch.int32, device=DEVICE),
        prefill_block_tables=tables[:0].to(DEVICE),
        prefill_cu_seqlens_q=torch.zeros(1, dtype=torch.int32, device=DEVICE),
        prefill_context_lens=torch.zeros(0, dtype=torch.int32, device=DEVICE),
    )
    input_ids = torch.randint(0, 128, (len(context_lens),), generator=generator)
    return input_ids.to(DEVICE), positions.to(DEVICE), meta


@torch.inference_mode()
def test_a_padded_decode_batch_gives_the_real_rows_the_eager_result(tiny_model):
    g = torch.Generator().manual_seed(0)
    bind_cache(tiny_model, num_blocks=12)
    tables = torch.tensor([[3, 7, 0], [5, 0, 0], [1, 2, 9]], dtype=torch.int32)
    input_ids, positions, meta = decode_step([20, 9, 40], tables, g)
    eager = tiny_model(input_ids, positions, meta)
    cache_after_eager = tiny_model.model.layers[0].self_attn.attn.k_cache.clone()
    buffers = DecodeBuffers.allocate(max_batch=8, max_blocks_per_seq=16, device=DEVICE)
    buffers.fill(input_ids, positions, meta, padded=4)
    padded = tiny_model(buffers.input_ids[:4], buffers.positions[:4], buffers.metadata(4))
    torch.testing.assert_close(padded[:3], eager)
    # the padded row wrote nothing into the cache
    torch.testing.assert_close(tiny_model.model.layers[0].self_attn.attn.k_cache, cache_after_eager)


def test_graph_runner_sends_prefills_and_oversized_batches_to_eager(tiny_model):
    runner = CUDAGraphRunner(tiny_model, max_num_seqs=6, max_model_len=256, block_size=BLOCK_SIZE, device=DEVICE)
    tables = torch.zeros(3, 1, dtype=torch.int32)
    _, _, meta = decode_step([1, 1, 1], tables, torch.Generator().manual_seed(1))
    assert runner.padded_size(meta, 3) == 4
    assert runner.padded_size(meta, 7) is None  # a mixed step: 3 decodes + 4 prefill tokens
    assert runner.run(torch.zeros(3, dtype=torch.long), torch.zeros(3, dtype=torch.long), meta) is None  # not captured


def test_profile_forward_runs_the_full_token_budget_and_unbinds_its_scratch_cache(tiny_model):
    logits = profile_forward(
        tiny_model, num_tokens=70, num_seqs=4, block_size=BLOCK_SIZE, kv_cache_dtype=torch.float32, device=DEVICE
    )
    assert logits.shape == (4, 128) and torch.isfinite(logits).all()
    assert tiny_model.model.layers[0].self_attn.attn.k_cache is None


def test_kv_budget_is_utilization_of_total_minus_what_this_process_consumed():
    before = MemorySnapshot(free_bytes=139 * GiB, total_bytes=140 * GiB, torch_peak_bytes=0, torch_allocated_bytes=0)
    after = MemorySnapshot(
        free_bytes=120 * GiB, total_bytes=140 * GiB, torch_peak_bytes=20 * GiB, torch_allocated_bytes=16 * GiB
    )
    profile = kv_memory_profile(before, after, gpu_memory_utilization=0.9)
    assert profile.non_kv_cache_bytes == 19 * GiB + 4 * GiB  # weights etc. + the activation peak
    assert profile.available_kv_cache_bytes == 126 * GiB - 23 * GiB
    assert profile.log_line() == "Available KV cache memory: 103.00 GiB"


def test_start_up_fails_in_vllm_words_when_others_hold_the_requested_memory():
    held = MemorySnapshot(free_bytes=100 * GiB, total_bytes=140 * GiB, torch_peak_bytes=0, torch_allocated_bytes=0)
    check_free_memory(held, gpu_memory_utilization=0.7, device="cuda:0")  # 98 GiB requested: fits
    with pytest.raises(KvtoolError) as err:
        check_free_memory(held, gpu_memory_utilization=0.9, device="cuda:0")
    assert str(err.value) == (
        "Free memory on device cuda:0 (100.0/140.0 GiB) on startup is less than desired "
        "GPU memory utilization (0.9, 126.0 GiB). Decrease GPU memory utilization or "
        "reduce GPU memory used by other processes."
    )


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@torch.inference_mode()
def test_captured_graph_replays_the_eager_decode(tiny_model):
    bind_cache(tiny_model, num_blocks=12)
    tables = torch.tensor([[3, 7, 0], [5, 0, 0], [1, 2, 9]], dtype=torch.int32)
    input_ids, positions, meta = decode_step([20, 9, 40], tables, torch.Generator().manual_seed(2))
    runner = CUDAGraphRunner(tiny_model, max_num_seqs=4, max_model_len=48, block_size=BLOCK_SIZE, device=DEVICE)
    runner.capture()
    replayed = runner.run(input_ids, positions, meta).clone()
    torch.testing.assert_close(replayed, tiny_model(input_ids, positions, meta))
