"""Fused elementwise ops of the decoder layer: RMSNorm (+ residual add), rotary embedding, SiLU-and-mul.

Each reads its inputs once and writes its outputs once; math runs in fp32 and rounds to the
activation dtype where the torch reference (and HF transformers) rounds, so on a GPU the kernels
reproduce the reference's bf16 / fp16 results, not merely approximate them.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(
    x_ptr,
    residual_ptr,
    weight_ptr,
    out_ptr,
    new_residual_ptr,
    eps,
    x_stride,
    residual_stride,
    HIDDEN: tl.constexpr,
    BLOCK: tl.constexpr,
    ADD_RESIDUAL: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < HIDDEN
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    if ADD_RESIDUAL:
        x += tl.load(residual_ptr + row * residual_stride + cols, mask=mask, other=0.0).to(tl.float32)
        x = x.to(new_residual_ptr.dtype.element_ty)  # the sum is rounded once, as in the reference
        tl.store(new_residual_ptr + row * HIDDEN + cols, x, mask=mask)
        x = x.to(tl.float32)
    inv_rms = 1.0 / tl.sqrt(tl.sum(x * x, 0) / HIDDEN + eps)
    normed = (x * inv_rms).to(out_ptr.dtype.element_ty).to(tl.float32)
    weight = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * HIDDEN + cols, (normed * weight).to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(x, weight, eps, residual=None):
    """RMSNorm over the last dim; with a residual, adds it to x first and also returns the sum."""
    hidden = x.shape[-1]
    rows = _rows(x)
    out = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
    new_residual = torch.empty_like(out) if residual is not None else out
    res_rows = _rows(residual) if residual is not None else rows
    block = triton.next_power_of_2(hidden)
    if rows.shape[0]:
        _rms_norm_kernel[(rows.shape[0],)](
            rows,
            res_rows,
            weight,
            out,
            new_residual,
            float(eps),
            rows.stride(0),
            res_rows.stride(0),
            HIDDEN=hidden,
            BLOCK=block,
            ADD_RESIDUAL=residual is not None,
            num_warps=min(16, max(1, block // 512)),
        )
    if residual is None:
        return out.view(x.shape)
    return out.view(x.shape), new_residual.view(x.shape)


def _rows(x):
    """[..., hidden] as rows with unit stride inside each row."""
    rows = x.reshape(-1, x.shape[-1])
    return rows if rows.stride(-1) == 1 else rows.contiguous()


@triton.jit
def _rotate_heads(
    src_ptr,
    dst_ptr,
    token,
    src_stride,
    cos,
    sin,
    NUM_HEADS: tl.constexpr,
    HEADS_PAD: tl.constexpr,
    HALF: tl.constexpr,
    HALF_PAD: tl.constexpr,
):
    heads = tl.arange(0, HEADS_PAD)[:, None]
    cols = tl.arange(0, HALF_PAD)[None, :]
    mask = (heads < NUM_HEADS) & (cols < HALF)
    src = src_ptr + token * src_stride + heads * (2 * HALF) + cols
    dst = dst_ptr + token * NUM_HEADS * 2 * HALF + heads * (2 * HALF) + cols
    dtype = dst_ptr.dtype.element_ty
    x1 = tl.load(src, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(src + HALF, mask=mask, other=0.0).to(tl.float32)
    # Rounded after each product as in the reference (HF's arithmetic in the activation dtype).
    out1 = _round(x1 * cos, dtype) - _round(x2 * sin, dtype)
    out2 = _round(x2 * cos, dtype) + _round(x1 * sin, dtype)
    tl.store(dst, out1.to(dtype), mask=mask)
    tl.store(dst + HALF, out2.to(dtype), mask=mask)


@triton.jit
def _round(x, dtype: tl.constexpr):
    """x rounded to `dtype` and back to fp32."""
    return x.to(dtype).to(tl.float32)


@triton.jit
def _rotary_kernel(
    positions_ptr,
    q_ptr,
    k_ptr,
    q_out_ptr,
    k_out_ptr,
    cos_sin_ptr,
    q_stride,
    k_stride,
    NUM_Q_HEADS: tl.constexpr,
    Q_HEADS_PAD: tl.constexpr,
    NUM_K_HEADS: tl.constexpr,
    K_HEADS_PAD: tl.constexpr,
    HALF: tl.constexpr,
    HALF_PAD: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64)
    position = tl.load(positions_ptr + token).to(tl.int64)
    cols = tl.arange(0, HALF_PAD)[None, :]
    dtype = q_out_ptr.dtype.element_ty
    cos = tl.load(cos_sin_ptr + position * 2 * HALF + cols, mask=cols < HALF, other=0.0)
    sin = tl.load(cos_sin_ptr + position * 2 * HALF + HALF + cols, mask=cols < HALF, other=0.0)
    cos, sin = _round(cos.to(tl.float32), dtype), _round(sin.to(tl.float32), dtype)
    _rotate_heads(q_ptr, q_out_ptr, token, q_stride, cos, sin, NUM_Q_HEADS, Q_HEADS_PAD, HALF, HALF_PAD)
    _rotate_heads(k_ptr, k_out_ptr, token, k_stride, cos, sin, NUM_K_HEADS, K_HEADS_PAD, HALF, HALF_PAD)


def rotary_embedding(positions, query, key, cos_sin_cache):
    """Rotate query [T, Hq, D] and key [T, Hkv, D] (neox / "rotate_half" style) at their positions."""
    num_tokens, num_q_heads, head_dim = query.shape
    num_k_heads = key.shape[1]
    query, key = _heads_contiguous(query), _heads_contiguous(key)
    q_out, k_out = (
        torch.empty(query.shape, dtype=query.dtype, device=query.device),
        torch.empty(key.shape, dtype=key.dtype, device=key.device),
    )
    half = head_dim // 2
    if num_tokens:
        _rotary_kernel[(num_tokens,)](
            positions,
            query,
            key,
            q_out,
            k_out,
            cos_sin_cache,
            query.stride(0),
            key.stride(0),
            NUM_Q_HEADS=num_q_heads,
            Q_HEADS_PAD=triton.next_power_of_2(num_q_heads),
            NUM_K_HEADS=num_k_heads,
            K_HEADS_PAD=triton.next_power_of_2(num_k_heads),
            HALF=half,
            HALF_PAD=triton.next_power_of_2(half),
        )
    return q_out, k_out


def _heads_contiguous(x):
    return x if x.stride(2) == 1 and x.stride(1) == x.shape[2] else x.contiguous()


@triton.jit
def _silu_and_mul_kernel(x_ptr, out_ptr, x_stride, INTERMEDIATE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < INTERMEDIATE
    gate = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * x_stride + INTERMEDIATE + cols, mask=mask, other=0.0).to(tl.float32)
    silu = (gate / (1.0 + tl.exp(-gate))).to(out_ptr.dtype.element_ty).to(tl.float32)
    tl.store(out_ptr + row * INTERMEDIATE + cols, (silu * up).to(out_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(x):
    """x [T, 2I] -> silu(x[:, :I]) * x[:, I:]"""
    intermediate = x.shape[-1] // 2
    rows = _rows(x)
    out = torch.empty(rows.shape[0], intermediate, dtype=x.dtype, device=x.device)
    block = min(1024, triton.next_power_of_2(intermediate))
    if rows.shape[0]:
        _silu_and_mul_kernel[(rows.shape[0], triton.cdiv(intermediate, block))](
            rows, out, rows.stride(0), INTERMEDIATE=intermediate, BLOCK=block
        )
    return out.view(*x.shape[:-1], intermediate)
