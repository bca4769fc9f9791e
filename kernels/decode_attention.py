"""Paged decode attention: one query token per sequence over its block table (flash-decoding).

One program per (sequence, KV head, split): the query heads that share a KV head are one tile, so
each K/V block is loaded once for the whole group. Long contexts are cut into splits that run in
parallel; a second kernel merges their partial softmaxes. The split count comes from the block
table's width, never from the lengths on the device, so the launch needs no host sync and can be
captured in a CUDA graph.
"""

import torch
import triton
import triton.language as tl

from kvtool.kernels.triton_common import dot_dtype, dot_precision, load_paged_tile, scaled_scores

BLOCK_N = 64  # keys per inner step
PARTITION_SIZE = 512  # keys per split
TARGET_PROGRAMS = 264  # about two waves on an H200's 132 multiprocessors


@triton.jit
def _decode_split_kernel(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    block_tables_ptr,
    context_lens_ptr,
    out_ptr,
    part_out_ptr,
    part_max_ptr,
    part_sum_ptr,
    scale,
    k_scale,
    v_scale,
    q_stride_b,
    q_stride_h,
    out_stride_b,
    out_stride_h,
    table_stride,
    num_splits,
    NUM_KV_HEADS: tl.constexpr,
    GROUP: tl.constexpr,
    GROUP_PAD: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    HEAD_PAD: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    BLOCK_N: tl.constexpr,
    PARTITION: tl.constexpr,
    SPLIT: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
    PRECISION: tl.constexpr,
    WINDOW: tl.constexpr,
    SOFT_CAP: tl.constexpr,
):
    seq, kv_head, split = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    context_len = tl.load(context_lens_ptr + seq)
    heads = kv_head * GROUP + tl.arange(0, GROUP_PAD)
    head_mask = tl.arange(0, GROUP_PAD) < GROUP
    dims = tl.arange(0, HEAD_PAD)
    dim_mask = dims < HEAD_DIM
    q_offs = seq * q_stride_b + heads[:, None] * q_stride_h + dims[None, :]
    q = tl.load(q_ptr + q_offs, mask=head_mask[:, None] & dim_mask[None, :], other=0.0)
    q = q.to(tl.float32).to(DOT_DTYPE)

    m_i = tl.full([GROUP_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([GROUP_PAD], tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_PAD], tl.float32)
    table_row = block_tables_ptr + seq * table_stride
    split_start = split * PARTITION
    split_end = tl.minimum(split_start + PARTITION, context_len)
    if WINDOW > 0:  # the first step starts at a visible key, so no step sees only masked ones
        split_start = tl.maximum(split_start, context_len - WINDOW)
    for start in range(split_start, split_end, BLOCK_N):
        tokens = start + tl.arange(0, BLOCK_N)
        valid = tokens < split_end
        k = load_paged_tile(
            k_cache_ptr, table_row, tokens, valid, kv_head, dims, dim_mask, k_scale, NUM_KV_HEADS, HEAD_DIM, BLOCK_SIZE
        )
        v = load_paged_tile(
            v_cache_ptr, table_row, tokens, valid, kv_head, dims, dim_mask, v_scale, NUM_KV_HEADS, HEAD_DIM, BLOCK_SIZE
        )
        scores = scaled_scores(q, k, scale, SOFT_CAP, DOT_DTYPE, PRECISION)
        scores = tl.where(valid[None, :], scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, 1))
        p = tl.exp2(scores - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(DOT_DTYPE), v.to(DOT_DTYPE), input_precision=PRECISION)
        m_i = m_new

    store_mask = head_mask[:, None] & dim_mask[None, :]
    if not SPLIT:
        out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
        out_offs = seq * out_stride_b + heads[:, None] * out_stride_h + dims[None, :]
        tl.store(out_ptr + out_offs, out.to(out_ptr.dtype.element_ty), mask=store_mask)
    else:
        part = (seq * NUM_KV_HEADS * GROUP + heads) * num_splits + split  # [B, Hq, splits]
        tl.store(part_out_ptr + part[:, None] * HEAD_DIM + dims[None, :], acc, mask=store_mask)
        tl.store(part_max_ptr + part, m_i, mask=head_mask)
        tl.store(part_sum_ptr + part, l_i, mask=head_mask)


@triton.jit
def _decode_reduce_kernel(
    out_ptr,
    part_out_ptr,
    part_max_ptr,
    part_sum_ptr,
    out_stride_b,
    out_stride_h,
    num_splits,
    NUM_HEADS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    HEAD_PAD: tl.constexpr,
    SPLITS_PAD: tl.constexpr,
):
    seq, head = tl.program_id(0), tl.program_id(1)
    splits = tl.arange(0, SPLITS_PAD)
    split_mask = splits < num_splits
    part = (seq * NUM_HEADS + head) * num_splits + splits
    m = tl.load(part_max_ptr + part, mask=split_mask, other=float("-inf"))
    sums = tl.load(part_sum_ptr + part, mask=split_mask, other=0.0)
    m_max = tl.max(m, 0)
    # Empty splits (and padded sequences of length 0) carry m = -inf and weigh nothing.
    weights = tl.where(m > float("-inf"), tl.exp2(m - m_max), 0.0)
    total = tl.sum(sums * weights, 0)
    dims = tl.arange(0, HEAD_PAD)
    dim_mask = dims < HEAD_DIM
    parts = tl.load(
        part_out_ptr + part[:, None] * HEAD_DIM + dims[None, :], mask=split_mask[:, None] & dim_mask[None, :], other=0.0
    )
    out = tl.sum(parts * weights[:, None], 0) / tl.where(total > 0, total, 1.0)
    tl.store(out_ptr + seq * out_stride_b + head * out_stride_h + dims, out.to(out_ptr.dtype.element_ty), mask=dim_mask)


def paged_decode_attention(
    query,
    k_cache,
    v_cache,
    block_tables,
    context_lens,
    scale,
    k_scale=1.0,
    v_scale=1.0,
    sliding_window=None,
    logits_soft_cap=None,
):
    """One query token per sequence over its context (its last `sliding_window` tokens when set);
    query [B, Hq, D] -> out [B, Hq, D]."""
    batch, num_heads, head_dim = query.shape
    num_kv_heads, block_size = k_cache.shape[2], k_cache.shape[1]
    group = num_heads // num_kv_heads
    out = torch.empty_like(query)
    num_splits = choose_num_splits(batch * num_kv_heads, block_tables.shape[1] * block_size)
    parts = _partials(query, batch, num_heads, num_splits)
    head_pad = triton.next_power_of_2(head_dim)
    _decode_split_kernel[(batch, num_kv_heads, num_splits)](
        query,
        k_cache,
        v_cache,
        block_tables,
        context_lens,
        out,
        *parts,
        float(scale),
        float(k_scale),
        float(v_scale),
        query.stride(0),
        query.stride(1),
        out.stride(0),
        out.stride(1),
        block_tables.stride(0),
        num_splits,
        NUM_KV_HEADS=num_kv_heads,
        GROUP=group,
        GROUP_PAD=max(16, triton.next_power_of_2(group)),
        HEAD_DIM=head_dim,
        HEAD_PAD=head_pad,
        BLOCK_SIZE=block_size,
        BLOCK_N=BLOCK_N,
        PARTITION=PARTITION_SIZE,
        SPLIT=num_splits > 1,
        DOT_DTYPE=dot_dtype(query.dtype),
        PRECISION=dot_precision(query.dtype),
        WINDOW=sliding_window or 0,
        SOFT_CAP=float(logits_soft_cap or 0.0),
    )
    if num_splits > 1:
        _decode_reduce_kernel[(batch, num_heads)](
            out,
            *parts,
            out.stride(0),
            out.stride(1),
            num_splits,
            NUM_HEADS=num_heads,
            HEAD_DIM=head_dim,
            HEAD_PAD=head_pad,
            SPLITS_PAD=triton.next_power_of_2(num_splits),
        )
    return out


def choose_num_splits(num_programs: int, max_context: int) -> int:
    """Split only when the (sequence, KV head) programs alone would leave the GPU under-filled."""
    max_splits = triton.cdiv(max_context, PARTITION_SIZE)
    wanted = triton.cdiv(TARGET_PROGRAMS, max(num_programs, 1))
    return max(1, min(max_splits, wanted))


def _partials(query, batch, num_heads, num_splits):
    if num_splits == 1:
        empty = query.new_empty(0, dtype=torch.float32)
        return empty, empty, empty
    part_out = query.new_empty(batch, num_heads, num_splits, query.shape[2], dtype=torch.float32)
    part_max = query.new_empty(batch, num_heads, num_splits, dtype=torch.float32)
    return part_out, part_max, torch.empty_like(part_max)
