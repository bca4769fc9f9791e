"""What the Triton kernels share: interpreter mode, dot dtypes, fp8 limits, the paged K/V gather."""

import os

import torch
import triton
import triton.language as tl

FP8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def dot_dtype(dtype: torch.dtype):
    """Operand dtype for tl.dot: the activations' own on a GPU, fp32 in the interpreter (no bf16 math)."""
    if interpreting() or dtype == torch.float32:
        return tl.float32
    return tl.bfloat16 if dtype == torch.bfloat16 else tl.float16


def dot_precision(dtype: torch.dtype) -> str:
    """fp32 models get exact fp32 dots ("ieee"), not TF32's 10-bit mantissa."""
    return "ieee" if dtype == torch.float32 else "tf32"


def fp8_max(cache_dtype: torch.dtype) -> float:
    """Largest finite value of an fp8 cache (quantized values are clamped to it); 0 for other caches."""
    return FP8_MAX.get(cache_dtype, 0.0)


@triton.jit
def load_paged_tile(
    cache_ptr,
    table_row_ptr,
    tokens,
    valid,
    kv_head,
    dims,
    dim_mask,
    scale,
    NUM_KV_HEADS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    """K or V of `tokens` for one KV head, gathered through a block table row: [tokens, dims] fp32."""
    pages = tl.load(table_row_ptr + tokens // BLOCK_SIZE, mask=valid, other=0)
    slots = pages.to(tl.int64) * BLOCK_SIZE + tokens % BLOCK_SIZE
    offsets = (slots[:, None] * NUM_KV_HEADS + kv_head) * HEAD_DIM + dims[None, :]
    tile = tl.load(cache_ptr + offsets, mask=valid[:, None] & dim_mask[None, :], other=0.0)
    return tile.to(tl.float32) * scale  # fp8 caches hold x / scale; others are read with scale 1


@triton.jit
def scaled_scores(q, k, scale, SOFT_CAP: tl.constexpr, DOT_DTYPE: tl.constexpr, PRECISION: tl.constexpr):
    """q . k * scale, soft-capped to SOFT_CAP * tanh(x / SOFT_CAP) when SOFT_CAP > 0, in the exp2 domain."""
    scores = tl.dot(q, tl.trans(k.to(DOT_DTYPE)), input_precision=PRECISION) * scale
    if SOFT_CAP > 0:
        scores = SOFT_CAP * (2.0 * tl.sigmoid(2.0 * scores / SOFT_CAP) - 1.0)
    return scores * 1.4426950408889634
