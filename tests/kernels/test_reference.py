"""The torch references against token-by-token ground truth: they are the CPU inference path."""

import pytest
import torch
import torch.nn.functional as F
from paged_cases import BLOCK_SIZE, filled_caches, naive_attention

from kvtool.kernels import get_ops, reference

FP8 = [torch.float8_e4m3fn, torch.float8_e5m2]


def test_get_ops_on_cpu_without_c_kernels_returns_the_references(monkeypatch):
    monkeypatch.setenv("KVTOOL_CPU_KERNELS", "0")
    ops = get_ops("cpu")
    assert ops.backend == "torch"
    assert ops.paged_decode_attention is reference.paged_decode_attention
    assert ops.store_kv is reference.store_kv
    assert get_ops(torch.device("cpu")).prefill_attention is reference.prefill_attention


@pytest.mark.parametrize("cache_dtype", [torch.float32, torch.bfloat16, *FP8])
def test_store_kv_writes_each_token_at_its_slot_and_skips_minus_one(cache_dtype):
    g = torch.Generator().manual_seed(0)
    key, value = torch.randn(5, 2, 8, generator=g), torch.randn(5, 2, 8, generator=g)
    k_cache = torch.zeros(3, BLOCK_SIZE, 2, 8).to(cache_dtype)
    v_cache = torch.zeros_like(k_cache)
    slots = torch.tensor([17, 3, -1, 47, 16])
    reference.store_kv(key, value, k_cache, v_cache, slots, k_scale=0.5, v_scale=2.0)
    flat_k, flat_v = k_cache.view(-1, 2, 8).float(), v_cache.view(-1, 2, 8).float()
    k_scale, v_scale = (0.5, 2.0) if cache_dtype in FP8 else (1.0, 1.0)  # scales apply to fp8 only
    for i, slot in enumerate(slots.tolist()):
        if slot >= 0:
            torch.testing.assert_close(flat_k[slot], (key[i] / k_scale).to(cache_dtype).float())
            torch.testing.assert_close(flat_v[slot], (value[i] / v_scale).to(cache_dtype).float())
    written = {s for s in slots.tolist() if s >= 0}
    untouched = [s for s in range(3 * BLOCK_SIZE) if s not in written]
    assert not flat_k[untouched].any() and not flat_v[untouched].any()


@pytest.mark.parametrize("num_heads,num_kv_heads,head_dim", [(4, 4, 64), (6, 2, 128), (8, 1, 64)])
@pytest.mark.parametrize("cache_dtype", [torch.float32, torch.float8_e4m3fn])
def test_decode_attention_matches_token_by_token(num_heads, num_kv_heads, head_dim, cache_dtype):
    g = torch.Generator().manual_seed(1)
    context_lens = [1, 17, 40, 16]
    k_cache, v_cache, tables, keys, values = filled_caches(
        context_lens, num_kv_heads, head_dim, cache_dtype, g, k_scale=0.7, v_scale=1.3
    )
    query = torch.randn(len(context_lens), num_heads, head_dim, generator=g)
    scale = head_dim**-0.5
    out = reference.paged_decode_attention(
        query, k_cache, v_cache, tables, torch.tensor(context_lens, dtype=torch.int32), scale, k_scale=0.7, v_scale=1.3
    )
    for b, n in enumerate(context_lens):
        expected = naive_attention(query[b : b + 1], keys[b], values[b], scale, [n - 1])
        torch.testing.assert_close(out[b : b + 1].double(), expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("num_heads,num_kv_heads,head_dim", [(3, 1, 64), (8, 8, 128)])
@pytest.mark.parametrize("cache_dtype", [torch.float32, torch.float8_e5m2])
def test_prefill_attention_over_a_cached_prefix_matches_token_by_token(num_heads, num_kv_heads, head_dim, cache_dtype):
    g = torch.Generator().manual_seed(2)
    context_lens, q_lens = [20, 33, 5], [20, 9, 1]  # whole prompt; chunk on a prefix; one token
    k_cache, v_cache, tables, keys, values = filled_caches(context_lens, num_kv_heads, head_dim, cache_dtype, g)
    query = torch.randn(sum(q_lens), num_heads, head_dim, generator=g)
    cu_seqlens = torch.tensor([0, *torch.tensor(q_lens).cumsum(0).tolist()], dtype=torch.int32)
    out = reference.prefill_attention(
        query, k_cache, v_cache, tables, cu_seqlens, torch.tensor(context_lens, dtype=torch.int32), 0.125
    )
    for b, (n, q_len) in enumerate(zip(context_lens, q_lens)):
        rows = slice(cu_seqlens[b], cu_seqlens[b + 1])
        expected = naive_attention(query[rows], keys[b], values[b], 0.125, range(n - q_len, n))
        torch.testing.assert_close(out[rows].double(), expected, atol=1e-4, rtol=1e-4)


def test_rms_norm_with_residual_returns_the_sum_as_new_residual():
    g = torch.Generator().manual_seed(3)
    x, residual, weight = (torch.randn(4, 32, generator=g) for _ in range(3))
    out, new_residual = reference.rms_norm(x, weight, 1e-6, residual=residual)
    summed = x + residual
    torch.testing.assert_close(new_residual, summed)
    expected = summed / torch.sqrt(summed.pow(2).mean(-1, keepdim=True) + 1e-6) * weight
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(reference.rms_norm(summed, weight, 1e-6), expected)


def test_rotary_embedding_rotates_each_pair_by_its_position_angle():
    g = torch.Generator().manual_seed(4)
    head_dim, max_pos = 8, 32
    inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
    freqs = torch.outer(torch.arange(max_pos).float(), inv_freq)
    cache = torch.cat((freqs.cos(), freqs.sin()), dim=-1)
    positions = torch.tensor([0, 5, 31])
    query, key = torch.randn(3, 2, head_dim, generator=g), torch.randn(3, 1, head_dim, generator=g)
    q_out, k_out = reference.rotary_embedding(positions, query, key, cache)
    torch.testing.assert_close(q_out[0], query[0])
    half = head_dim // 2
    for t, pos in enumerate(positions.tolist()):
        angle = freqs[pos]
        x1, x2 = key[t, 0, :half], key[t, 0, half:]
        torch.testing.assert_close(k_out[t, 0, :half], x1 * angle.cos() - x2 * angle.sin())
        torch.testing.assert_close(k_out[t, 0, half:], x2 * angle.cos() + x1 * angle.sin())


def test_silu_and_mul_gates_the_second_half_with_the_first():
    x = torch.randn(3, 10)
    torch.testing.assert_close(reference.silu_and_mul(x), F.silu(x[:, :5]) * x[:, 5:])
