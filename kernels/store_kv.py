"""store_kv: write new tokens' K and V into the paged cache, quantizing to fp8 when the cache is fp8."""

import torch
import triton
import triton.language as tl

from kvtool.kernels.triton_common import fp8_max


@triton.jit
def _store_kv_kernel(
    key_ptr,
    value_ptr,
    k_cache_ptr,
    v_cache_ptr,
    slot_mapping_ptr,
    key_stride,
    value_stride,
    k_scale,
    v_scale,
    fp8_limit,
    ROW: tl.constexpr,
    BLOCK: tl.constexpr,
    QUANTIZE: tl.constexpr,
):
    token = tl.program_id(0)
    slot = tl.load(slot_mapping_ptr + token).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < tl.where(slot >= 0, ROW, 0)
    key = tl.load(key_ptr + token * key_stride + offs, mask=mask).to(tl.float32)
    value = tl.load(value_ptr + token * value_stride + offs, mask=mask).to(tl.float32)
    if QUANTIZE:
        key = tl.clamp(key / k_scale, -fp8_limit, fp8_limit)
        value = tl.clamp(value / v_scale, -fp8_limit, fp8_limit)
    dst = slot * ROW + offs
    tl.store(k_cache_ptr + dst, key.to(k_cache_ptr.dtype.element_ty), mask=mask)
    tl.store(v_cache_ptr + dst, value.to(v_cache_ptr.dtype.element_ty), mask=mask)


def store_kv(key, value, k_cache, v_cache, slot_mapping, k_scale=1.0, v_scale=1.0) -> None:
    """Write each token's K and V at its slot (block_id * block_size + offset); slot -1 is skipped."""
    num_tokens, num_kv_heads, head_dim = key.shape
    if num_tokens == 0:
        return
    key, value = _rows(key), _rows(value)
    row = num_kv_heads * head_dim
    limit = fp8_max(k_cache.dtype)
    _store_kv_kernel[(num_tokens,)](
        key,
        value,
        k_cache,
        v_cache,
        slot_mapping,
        key.stride(0),
        value.stride(0),
        float(k_scale),
        float(v_scale),
        limit,
        ROW=row,
        BLOCK=triton.next_power_of_2(row),
        QUANTIZE=limit > 0,
    )


def _rows(x: torch.Tensor) -> torch.Tensor:
    """Each token's [Hkv, D] must be one contiguous row; the token stride may be anything."""
    if x.stride(2) == 1 and x.stride(1) == x.shape[2]:
        return x
    return x.contiguous()
