"""Builders for paged-cache test cases, and a token-by-token attention used as ground truth."""

import math

import torch
from transformers import LlamaConfig

from kvtool.engine.runtime.layers.attention import AttentionMetadata
from kvtool.engine.runtime.worker.loader import load_model
from kvtool.engine.sizing.engine_config import ModelConfig
from kvtool.kernels import OP_NAMES, KernelOps

BLOCK_SIZE = 16


def random_block_tables(context_lens, num_blocks, generator):
    """Each sequence gets distinct, shuffled blocks so that reads must go through the table."""
    per_seq = [math.ceil(n / BLOCK_SIZE) for n in context_lens]
    order = torch.randperm(num_blocks, generator=generator)
    width = max(per_seq)
    tables = torch.zeros(len(context_lens), width, dtype=torch.int32)
    start = 0
    for b, n in enumerate(per_seq):
        tables[b, :n] = order[start : start + n]
        start += n
    return tables


def slots_for(block_table, positions):
    positions = torch.as_tensor(positions, dtype=torch.long)
    blocks = block_table.long()[positions // BLOCK_SIZE]
    return blocks * BLOCK_SIZE + positions % BLOCK_SIZE


def filled_caches(context_lens, num_kv_heads, head_dim, cache_dtype, generator, k_scale=1.0, v_scale=1.0):
    """Caches holding random K/V for every token of every sequence; returns caches, tables, K, V.

    The scales apply to fp8 caches only (stored = x / scale), as in the kernels.
    """
    if cache_dtype not in (torch.float8_e4m3fn, torch.float8_e5m2):
        k_scale = v_scale = 1.0
    num_blocks = sum(math.ceil(n / BLOCK_SIZE) for n in context_lens) + 3
    tables = random_block_tables(context_lens, num_blocks, generator)
    k_cache = torch.zeros(num_blocks, BLOCK_SIZE, num_kv_heads, head_dim).to(cache_dtype)
    v_cache = torch.zeros_like(k_cache)
    keys, values = [], []
    for b, n in enumerate(context_lens):
        k = torch.randn(n, num_kv_heads, head_dim, generator=generator)
        v = torch.randn(n, num_kv_heads, head_dim, generator=generator)
        slots = slots_for(tables[b], range(n))
        k_cache.view(-1, num_kv_heads, head_dim)[slots] = (k / k_scale).to(cache_dtype)
        v_cache.view(-1, num_kv_heads, head_dim)[slots] = (v / v_scale).to(cache_dtype)
        keys.append(k_cache.view(-1, num_kv_heads, head_dim)[slots].double() * k_scale)
        values.append(v_cache.view(-1, num_kv_heads, head_dim)[slots].double() * v_scale)
    return k_cache, v_cache, tables, keys, values


def naive_attention(q, k, v, scale, q_positions):
    """q [L, Hq, D], k/v [S, Hkv, D]; query i sees keys at positions <= q_positions[i]."""
    group = q.shape[1] // k.shape[1]
    out = torch.empty(q.shape, dtype=torch.float64)
    for i, pos in enumerate(q_positions):
        for h in range(q.shape[1]):
            keys, vals = k[: pos + 1, h // group].double(), v[: pos + 1, h // group].double()
            weights = torch.softmax(keys @ q[i, h].double() * scale, dim=0)
            out[i, h] = weights @ vals
    return out


# A two-layer decoder and two steps of it (a prefill, then a decode) on a given op set.

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
CONFIG = LlamaConfig(
    vocab_size=128,
    hidden_size=384,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=6,
    num_key_value_heads=2,
    max_position_embeddings=128,
)
TABLES = torch.tensor([[4, 1], [2, 0]], dtype=torch.int32)  # seq 0 crosses a block boundary


def ops_from(module, backend):
    return KernelOps(backend, *(getattr(module, name) for name in OP_NAMES))


def slots_and_positions(lens_before, new_tokens):
    slots, positions = [], []
    for b, (start, n) in enumerate(zip(lens_before, new_tokens)):
        for p in range(start, start + n):
            slots.append(int(TABLES[b, p // BLOCK_SIZE]) * BLOCK_SIZE + p % BLOCK_SIZE)
            positions.append(p)
    return torch.tensor(slots, device=DEVICE), torch.tensor(positions, device=DEVICE)


def prefill_step(prompt_lens):
    slots, positions = slots_and_positions([0] * len(prompt_lens), prompt_lens)
    cu_seqlens = torch.tensor([0, *torch.tensor(prompt_lens).cumsum(0).tolist()], dtype=torch.int32)
    none = torch.zeros(0, dtype=torch.int32, device=DEVICE)
    return positions, AttentionMetadata(
        slot_mapping=slots,
        num_decodes=0,
        decode_block_tables=TABLES[:0].to(DEVICE),
        decode_context_lens=none,
        prefill_block_tables=TABLES.to(DEVICE),
        prefill_cu_seqlens_q=cu_seqlens.to(DEVICE),
        prefill_context_lens=torch.tensor(prompt_lens, dtype=torch.int32, device=DEVICE),
    )


def decode_step(context_lens):
    slots, positions = slots_and_positions([n - 1 for n in context_lens], [1] * len(context_lens))
    none = torch.zeros(0, dtype=torch.int32, device=DEVICE)
    return positions, AttentionMetadata(
        slot_mapping=slots,
        num_decodes=len(context_lens),
        decode_block_tables=TABLES.to(DEVICE),
        decode_context_lens=torch.tensor(context_lens, dtype=torch.int32, device=DEVICE),
        prefill_block_tables=TABLES[:0].to(DEVICE),
        prefill_cu_seqlens_q=torch.zeros(1, dtype=torch.int32, device=DEVICE),
        prefill_context_lens=none,
    )


@torch.inference_mode()
def run_two_steps(ops, dtype=torch.float32):
    """Hidden states of a prefill of prompts of 20 and 7 tokens, then of one decode step after it."""
    model = load_model(None, CONFIG, ops, dtype, DEVICE, 128, ModelConfig(load_format="dummy"))
    shape = (CONFIG.num_hidden_layers, 6, BLOCK_SIZE, CONFIG.num_key_value_heads, 64)
    model.bind_kv_cache(torch.zeros(shape, dtype=dtype, device=DEVICE), torch.zeros(shape, dtype=dtype, device=DEVICE))
    ids = torch.randint(0, 128, (29,), generator=torch.Generator().manual_seed(0)).to(DEVICE)
    prefill = model(ids[:27], *prefill_step([20, 7]))
    decode = model(ids[27:], *decode_step([21, 8]))
    return prefill, decode


def one_rounding_step(dtype: torch.dtype) -> dict:
    """assert_close bounds for results of the same fp32 arithmetic done in another order (a reordered
    reduction, a fused multiply-add). A 16-bit result is one rounding step of its dtype apart; an fp32
    result keeps the reordering error itself, a few units in the last place over a row of hundreds."""
    step = torch.finfo(dtype).eps if dtype.itemsize == 2 else 1e-5
    return {"atol": step, "rtol": step}


def linear_case(rows, n, k, dtype, with_bias, seed=0):
    """x [rows, k], a weight [n, k] scaled to keep outputs near 1, and a bias (or None) for a linear kernel."""
    g = torch.Generator().manual_seed(seed + rows * 1000 + n + k)
    x = torch.randn(rows, k, generator=g).to(dtype)
    weight = (torch.randn(n, k, generator=g) / k**0.5).to(dtype)
    bias = torch.randn(n, generator=g).to(dtype) if with_bias else None
    return x, weight, bias
