"""Prefill attention: variable-length causal flash attention that reads K/V from the paged cache.

The query is a flattened batch of chunks; each chunk's K/V (and any cached prefix before it) is
already in the cache, so one kernel covers a fresh prompt, a prompt on a cached prefix and a chunk
of a chunked prefill. One program per (query tile, query head, sequence).
"""

import torch
import triton
import triton.language as tl

from kvtool.kernels.triton_common import dot_dtype, dot_precision, load_paged_tile, scaled_scores

BLOCK_M = 64  # query rows per program
BLOCK_N = 64  # keys per inner step


@triton.jit
def _prefill_kernel(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    out_ptr,
    block_tables_ptr,
    cu_seqlens_ptr,
    context_lens_ptr,
    scale,
    k_scale,
    v_scale,
    q_stride_t,
    q_stride_h,
    out_stride_t,
    out_stride_h,
    table_stride,
    NUM_KV_HEADS: tl.constexpr,
    GROUP: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    HEAD_PAD: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
    PRECISION: tl.constexpr,
    WINDOW: tl.constexpr,
    SOFT_CAP: tl.constexpr,
):
    tile, head, seq = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    kv_head = head // GROUP
    q_start = tl.load(cu_seqlens_ptr + seq)
    q_len = tl.load(cu_seqlens_ptr + seq + 1) - q_start
    context_len = tl.load(context_lens_ptr + seq)
    rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < q_len
    q_pos = context_len - q_len + rows  # absolute position of each query row
    dims = tl.arange(0, HEAD_PAD)
    dim_mask = dims < HEAD_DIM
    q_offs = (q_start + rows)[:, None].to(tl.int64) * q_stride_t + head * q_stride_h + dims[None, :]
    q = tl.load(q_ptr + q_offs, mask=row_mask[:, None] & dim_mask[None, :], other=0.0)
    q = q.to(tl.float32).to(DOT_DTYPE)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_PAD], tl.float32)
    # Keys past the tile's last query position are never seen; an empty tile runs no step.
    key_end = context_len - q_len + tl.minimum((tile + 1) * BLOCK_M, q_len)
    key_end = tl.where(tile * BLOCK_M < q_len, key_end, 0)
    table_row = block_tables_ptr + seq * table_stride
    key_start = 0
    if WINDOW > 0:  # keys before the window of the tile's first row are never seen
        key_start = tl.maximum(context_len - q_len + tile * BLOCK_M - WINDOW + 1, 0)
    for start in range(key_start, key_end, BLOCK_N):
        keys = start + tl.arange(0, BLOCK_N)
        key_mask = keys < key_end
        k = load_paged_tile(
            k_cache_ptr, table_row, keys, key_mask, kv_head, dims, dim_mask, k_scale, NUM_KV_HEADS, HEAD_DIM, BLOCK_SIZE
        )
        v = load_paged_tile(
            v_cache_ptr, table_row, keys, key_mask, kv_head, dims, dim_mask, v_scale, NUM_KV_HEADS, HEAD_DIM, BLOCK_SIZE
        )
        scores = scaled_scores(q, k, scale, SOFT_CAP, DOT_DTYPE, PRECISION)
        visible = (keys[None, :] <= q_pos[:, None]) & key_mask[None, :]
        if WINDOW > 0:
            visible &= keys[None, :] > q_pos[:, None] - WINDOW
        scores = tl.where(visible, scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, 1))
        m_safe = tl.where(m_new > float("-inf"), m_new, 0.0)  # rows that have seen nothing yet
        p = tl.exp2(scores - m_safe[:, None])
        alpha = tl.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(DOT_DTYPE), v.to(DOT_DTYPE), input_precision=PRECISION)
        m_i = m_new

    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    out_offs = (q_start + rows)[:, None].to(tl.int64) * out_stride_t + head * out_stride_h + dims[None, :]
    tl.store(out_ptr + out_offs, out.to(out_ptr.dtype.element_ty), mask=row_mask[:, None] & dim_mask[None, :])


def prefill_attention(
    query,
    k_cache,
    v_cache,
    block_tables,
    cu_seqlens_q,
    context_lens,
    scale,
    k_scale=1.0,
    v_scale=1.0,
    sliding_window=None,
    logits_soft_cap=None,
):
    """Causal attention of each sequence's chunk over its cached prefix plus the chunk itself (each
    query sees its last `sliding_window` keys when set; scores soft-capped when `logits_soft_cap` is)."""
    num_tokens, num_heads, head_dim = query.shape
    num_kv_heads, block_size = k_cache.shape[2], k_cache.shape[1]
    out = torch.empty_like(query)
    batch = context_lens.shape[0]
    if num_tokens == 0 or batch == 0:
        return out
    max_q_len = int((cu_seqlens_q[1:] - cu_seqlens_q[:-1]).max())  # prefill is never graph-captured
    grid = (triton.cdiv(max_q_len, BLOCK_M), num_heads, batch)
    _prefill_kernel[grid](
        query,
        k_cache,
        v_cache,
        out,
        block_tables,
        cu_seqlens_q,
        context_lens,
        float(scale),
        float(k_scale),
        float(v_scale),
        query.stride(0),
        query.stride(1),
        out.stride(0),
        out.stride(1),
        block_tables.stride(0),
        NUM_KV_HEADS=num_kv_heads,
        GROUP=num_heads // num_kv_heads,
        HEAD_DIM=head_dim,
        HEAD_PAD=triton.next_power_of_2(head_dim),
        BLOCK_SIZE=block_size,
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        DOT_DTYPE=dot_dtype(query.dtype),
        PRECISION=dot_precision(query.dtype),
        WINDOW=sliding_window or 0,
        SOFT_CAP=float(logits_soft_cap or 0.0),
    )
    return out
