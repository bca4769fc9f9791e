"""Builders for paged-cache test cases, and a token-by-token attention used as ground truth."""

import math

import torch

BLOCK_SIZE = 16


def random_block_tables(context_lens, num_blocks, generator):
    """Each sequence gets distinct, shuffled blocks so that reads must go through the table."""
    per_seq = [math.ceil(n / BLOCK_SIZE) for n in context_lens]
    order = torch.randperm(num_blocks, generator=generator)
    width = max(per_seq)
    tables = torch.zeros(len(context_lens), width, dtype=torch.int32)
    start = 0
    for b, n in enumerate(per_seq):
        tables[b, :n] = order[start:start + n]
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
            keys, vals = k[:pos + 1, h // group].double(), v[:pos + 1, h // group].double()
            weights = torch.softmax(keys @ q[i, h].double() * scale, dim=0)
            out[i, h] = weights @ vals
    return out
