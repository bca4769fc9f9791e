"""Fused mixture-of-experts: one grouped GEMM launch for every expert's gate/up projection, one for
every expert's down projection.

The (token, expert) pairs are sorted by expert and each expert's run is padded to a whole number of
BLOCK_M rows (`align_by_expert`), so every row block belongs to one expert: a program multiplies
its rows of activations by that expert's weight tile. Experts that receive no token get no block.
All sizes come from shapes, never from the routing on the device (no host sync; the grid is the
worst case and blocks past the last expert exit at once), so a decode step can be captured in a
CUDA graph.
"""

import torch
import triton
import triton.language as tl

from kvtool.kernels.fused_ops import silu_and_mul
from kvtool.kernels.triton_common import dot_dtype, dot_precision

BLOCK_M, BLOCK_N, BLOCK_K = 16, 64, 32


@triton.jit
def _grouped_gemm_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    weights_ptr,
    sorted_ids_ptr,
    block_expert_ptr,
    num_pairs,
    n,
    k,
    stride_a,
    stride_be,
    stride_bn,
    stride_c,
    NUM_EXPERTS: tl.constexpr,
    ROWS_PER_A: tl.constexpr,
    MUL_WEIGHTS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """c[pair] = a[pair // ROWS_PER_A] @ b[expert].T (× the pair's routing weight) for one row block."""
    block, col_block = tl.program_id(0), tl.program_id(1)
    expert = tl.load(block_expert_ptr + block)
    if expert >= NUM_EXPERTS:
        return
    pairs = tl.load(sorted_ids_ptr + block * BLOCK_M + tl.arange(0, BLOCK_M))
    live = pairs < num_pairs  # padding rows hold num_pairs
    a_rows = (pairs // ROWS_PER_A).to(tl.int64)
    cols = col_block * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k0 in range(0, k, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + a_rows[:, None] * stride_a + ks[None, :], mask=live[:, None] & (ks < k)[None, :], other=0.0)
        b = tl.load(
            b_ptr + expert.to(tl.int64) * stride_be + cols[None, :] * stride_bn + ks[:, None],
            mask=(ks < k)[:, None] & (cols < n)[None, :],
            other=0.0,
        )
        acc += tl.dot(a.to(tl.float32).to(DOT_DTYPE), b.to(tl.float32).to(DOT_DTYPE), input_precision=PRECISION)
    if MUL_WEIGHTS:
        acc *= tl.load(weights_ptr + pairs, mask=live, other=0.0).to(tl.float32)[:, None]
    c_offs = pairs.to(tl.int64)[:, None] * stride_c + cols[None, :]
    tl.store(c_ptr + c_offs, acc.to(c_ptr.dtype.element_ty), mask=live[:, None] & (cols < n)[None, :])


def align_by_expert(topk_ids: torch.Tensor, num_experts: int, block_m: int = BLOCK_M):
    """(sorted_ids, block_expert): pair ids (token * top_k + slot) grouped by expert, each group padded
    with `num_pairs` to a multiple of block_m, and the expert of each row block (num_experts: unused)."""
    flat = topk_ids.flatten().long()
    num_pairs = flat.numel()
    order = flat.argsort(stable=True)
    counts = torch.zeros(num_experts, dtype=torch.long, device=flat.device).scatter_add_(0, flat, torch.ones_like(flat))
    padded = (counts + block_m - 1) // block_m * block_m
    padded_end, end = padded.cumsum(0), counts.cumsum(0)
    experts = flat[order]
    rank = torch.arange(num_pairs, device=flat.device) - (end - counts)[experts]
    num_blocks = triton.cdiv(num_pairs + num_experts * (block_m - 1), block_m)
    sorted_ids = torch.full((num_blocks * block_m,), num_pairs, dtype=torch.long, device=flat.device)
    sorted_ids[(padded_end - padded)[experts] + rank] = order
    block_starts = torch.arange(num_blocks, device=flat.device) * block_m
    return sorted_ids, torch.searchsorted(padded_end, block_starts, right=True)


def _grouped_gemm(a, b, c, weights, sorted_ids, block_expert, num_pairs, rows_per_a):
    num_experts, n, k = b.shape
    grid = (block_expert.numel(), triton.cdiv(n, BLOCK_N))
    _grouped_gemm_kernel[grid](
        a,
        b,
        c,
        weights,
        sorted_ids,
        block_expert,
        num_pairs,
        n,
        k,
        a.stride(0),
        b.stride(0),
        b.stride(1),
        c.stride(0),
        NUM_EXPERTS=num_experts,
        ROWS_PER_A=rows_per_a,
        MUL_WEIGHTS=weights is not None,
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        BLOCK_K=BLOCK_K,
        DOT_DTYPE=dot_dtype(a.dtype),
        PRECISION=dot_precision(a.dtype),
    )


def fused_moe(x, w13, w2, topk_weights, topk_ids):
    """x [T, H], w13 [E, 2I, H] (gate then up), w2 [E, H, I], topk_weights / topk_ids [T, K]
    -> sum over k of topk_weights[t, k] * down(silu(gate(x_t)) * up(x_t)) of expert topk_ids[t, k]."""
    num_tokens, top_k = topk_ids.shape
    num_pairs = num_tokens * top_k
    sorted_ids, block_expert = align_by_expert(topk_ids, w13.shape[0])
    x, w13, w2 = x.contiguous(), w13.contiguous(), w2.contiguous()
    gate_up = x.new_empty(num_pairs, w13.shape[1])
    _grouped_gemm(x, w13, gate_up, None, sorted_ids, block_expert, num_pairs, top_k)
    hidden = silu_and_mul(gate_up)
    down = x.new_empty(num_pairs, w2.shape[1])
    weights = topk_weights.to(torch.float32).contiguous().view(-1)
    _grouped_gemm(hidden, w2, down, weights, sorted_ids, block_expert, num_pairs, 1)
    return down.view(num_tokens, top_k, -1).sum(1)
