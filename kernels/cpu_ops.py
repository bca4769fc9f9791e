"""The CPU set of ops: C kernels where they apply, the torch references for everything else.

Each op keeps its reference's signature (kernels/reference.py) and falls back to it for what the
C kernels do not cover: fp16 and fp8, head dims that are not a multiple of 16, non-CPU tensors.
"""

import ctypes
import sys

import torch

from kvtool.kernels import reference
from kvtool.kernels.cpu_build import compiled_library, cpu_flags, load_library
from kvtool.kernels.reference import fused_moe, prefill_attention

__all__ = [
    "store_kv",
    "paged_decode_attention",
    "prefill_attention",
    "rms_norm",
    "rotary_embedding",
    "silu_and_mul",
    "fused_moe",
    "quant_panel_linear",
    "small_linear",
    "panel_linear",
    "flush_denormals",
    "available",
]

DTYPE_CODES = {torch.float32: 0, torch.bfloat16: 1}
SMALL_LINEAR_MAX_ROWS = 64  # MAX_ROWS in cpu/small_linear.c
# With AVX-512, the C kernel that beats oneDNN's packed weights at a few rows and up to how many rows of each
# dtype (docs/engine.md), by whether the CPU has AMX tiles: measured on an Intel CPU with them, and on an AMD
# Zen 4 without, where small_linear fell to half oneDNN's fp32 pace from 16 rows and column panels led it
SMALL_ROWS_KERNEL = {
    "amx": ("small_linear", {torch.float32: SMALL_LINEAR_MAX_ROWS, torch.bfloat16: 4}),
    "no amx": ("panel_linear", {torch.float32: 8, torch.bfloat16: 4}),
}
SMALL_LINEAR_K_MULTIPLE = 16  # one AVX-512 vector of fp32
DECODE_HEAD_DIM_MULTIPLE = 16  # the C decode attention reads heads 16 elements at a time
STATUS_NO_MEMORY = 1  # STATUS_NO_MEMORY in cpu/common.h
NO_MEMORY = (
    "the CPU kernel {kernel} could not allocate its scratch memory for {rows} rows; free some memory or "
    "lower --max-num-batched-tokens"
)


class DecodeArgs(ctypes.Structure):
    """Mirrors `DecodeArgs` in cpu/paged_decode.c."""

    _fields_ = [
        ("query", ctypes.c_void_p),
        ("k_cache", ctypes.c_void_p),
        ("v_cache", ctypes.c_void_p),
        ("block_tables", ctypes.c_void_p),
        ("context_lens", ctypes.c_void_p),
        ("out", ctypes.c_void_p),
        ("num_seqs", ctypes.c_int64),
        ("num_heads", ctypes.c_int64),
        ("num_kv_heads", ctypes.c_int64),
        ("head_dim", ctypes.c_int64),
        ("block_size", ctypes.c_int64),
        ("table_stride", ctypes.c_int64),
        ("scale", ctypes.c_float),
        ("dtype", ctypes.c_int32),
        ("num_threads", ctypes.c_int32),
        ("cache_dtype", ctypes.c_int32),
        ("sliding_window", ctypes.c_int64),
    ]


def available() -> bool:
    return load_library() is not None


def store_kv(key, value, k_cache, v_cache, slot_mapping, k_scale=1.0, v_scale=1.0) -> None:
    """Write each token's K and V at its slot; fp8 caches (which quantize) go to the reference."""
    if not (
        _covered(key, value)
        and _cache_covered(key, k_cache, v_cache)
        and _rows_of_heads(key)
        and _rows_of_heads(value)
        and key.shape[1:] == value.shape[1:] == k_cache.shape[2:] == v_cache.shape[2:]
        and k_cache.is_contiguous()
        and v_cache.is_contiguous()
        and slot_mapping.device.type == "cpu"
    ):
        return reference.store_kv(key, value, k_cache, v_cache, slot_mapping, k_scale, v_scale)
    slots = slot_mapping.to(torch.int64).contiguous()
    compiled_library().kvtool_store_kv(
        _ptr(key),
        _ptr(value),
        key.stride(0),
        value.stride(0),
        _ptr(k_cache),
        _ptr(v_cache),
        _ptr(slots),
        len(key),
        key.shape[1] * key.shape[2],
        DTYPE_CODES[key.dtype],
        DTYPE_CODES[k_cache.dtype],
    )


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
    """One query token per sequence over its context (or its last `sliding_window` tokens), read in
    place from the paged cache; soft-capped logits go to the reference."""
    if not (
        _covered(query)
        and _cache_covered(query, k_cache, v_cache)
        and query.shape[-1] % DECODE_HEAD_DIM_MULTIPLE == 0
        and k_cache.is_contiguous()
        and len(query)
        and logits_soft_cap is None
    ):
        return reference.paged_decode_attention(
            query,
            k_cache,
            v_cache,
            block_tables,
            context_lens,
            scale,
            k_scale,
            v_scale,
            sliding_window,
            logits_soft_cap,
        )
    query = query.contiguous()
    tables = block_tables.to(torch.int32).contiguous()
    lens = context_lens.to(torch.int32).contiguous()
    out = torch.empty_like(query)
    num_seqs, num_heads, head_dim = query.shape
    args = DecodeArgs(
        query.data_ptr(),
        k_cache.data_ptr(),
        v_cache.data_ptr(),
        tables.data_ptr(),
        lens.data_ptr(),
        out.data_ptr(),
        num_seqs,
        num_heads,
        k_cache.shape[2],
        head_dim,
        k_cache.shape[1],
        tables.shape[1],
        scale,
        DTYPE_CODES[query.dtype],
        torch.get_num_threads(),
        DTYPE_CODES[k_cache.dtype],
        sliding_window or 0,
    )
    compiled_library().kvtool_paged_decode(ctypes.addressof(args))
    return out


def rms_norm(x, weight, eps, residual=None):
    """RMSNorm in fp32; with a residual, adds it to x first and also returns the sum."""
    if not (_covered(x, weight, residual) and weight.is_contiguous()):
        return reference.rms_norm(x, weight, eps, residual)
    x = x.contiguous()
    residual = None if residual is None else residual.contiguous()
    out = torch.empty_like(x)
    summed = None if residual is None else torch.empty_like(x)
    compiled_library().kvtool_rms_norm(
        _ptr(x),
        _ptr(residual),
        _ptr(weight),
        _ptr(out),
        _ptr(summed),
        x.numel() // x.shape[-1],
        x.shape[-1],
        eps,
        DTYPE_CODES[x.dtype],
        torch.get_num_threads(),
    )
    return out if residual is None else (out, summed)


def silu_and_mul(x):
    """x [T, 2I] -> silu(x[:, :I]) * x[:, I:]"""
    if not _covered(x):
        return reference.silu_and_mul(x)
    x = x.contiguous()
    width = x.shape[-1] // 2
    out = x.new_empty(*x.shape[:-1], width)
    compiled_library().kvtool_silu_and_mul(
        _ptr(x), _ptr(out), x.numel() // x.shape[-1], width, DTYPE_CODES[x.dtype], torch.get_num_threads()
    )
    return out


def rotary_embedding(positions, query, key, cos_sin_cache):
    """Rotate query [T, Hq, D] and key [T, Hkv, D] (neox style) at their positions."""
    if not (
        _covered(query, key)
        and _rows_of_heads(query)
        and _rows_of_heads(key)
        and cos_sin_cache.dtype == torch.float32
        and cos_sin_cache.shape[-1] == query.shape[-1]
    ):
        return reference.rotary_embedding(positions, query, key, cos_sin_cache)
    positions, cos_sin_cache = positions.to(torch.int64).contiguous(), cos_sin_cache.contiguous()
    q_out, k_out = torch.empty(query.shape, dtype=query.dtype), torch.empty(key.shape, dtype=key.dtype)
    compiled_library().kvtool_rotary(
        _ptr(positions),
        _ptr(query),
        query.stride(0),
        _ptr(key),
        key.stride(0),
        _ptr(cos_sin_cache),
        _ptr(q_out),
        _ptr(k_out),
        len(query),
        query.shape[1],
        key.shape[1],
        query.shape[2],
        DTYPE_CODES[query.dtype],
        torch.get_num_threads(),
    )
    return q_out, k_out


def quant_panel_linear(x, codes, scales, mins, bits, n):
    """x [T, K] fp32 times a weight [n, K] kept as codes in column panels (see reference.quant_panel_linear)."""
    if not _quant_covered(x):
        return reference.quant_panel_linear(x, codes, scales, mins, bits, n)
    return call_quant_kernel(
        compiled_library().kvtool_quant_panel_linear, "quant_panel_linear", x, codes, scales, mins, bits, n
    )


def call_quant_kernel(kernel, name: str, x, codes, scales, mins, bits, n):
    """out [T, n] fp32 from a compiled kernel with quant_panel_linear's C signature (quant_panel_linear.c's, or
    quant_amx_linear.c's on the same panels)."""
    x = x.float().contiguous()
    out = torch.empty(len(x), n, dtype=torch.float32)
    args = (_ptr(codes), _ptr(scales), _ptr(mins), bits, torch.get_num_threads())
    raise_if_out_of_memory(kernel(_ptr(x), _ptr(out), len(x), x.shape[1], n, *args), name, len(x))
    return out


def small_linear_wins() -> bool:
    """Whether the C kernel beats the GEMM library's packed weights at a few rows (AVX-512 CPUs with AMX)."""
    return small_linear_rows(torch.float32) > 0


def small_linear_rows(dtype: torch.dtype) -> int:
    """Up to how many rows of `dtype` PackedLinear calls small_linear here: 0 where the kernel has no vectors
    or column panels win."""
    return _small_rows_kernel(dtype, "small_linear")


def panel_linear_rows(dtype: torch.dtype) -> int:
    """Up to how many rows of `dtype` PackedLinear calls panel_linear here: every row count where panels are
    its only copy (panel_linear_wins), a few beside oneDNN's on AVX-512 CPUs without AMX, else 0."""
    if panel_linear_wins():
        return sys.maxsize
    return _small_rows_kernel(dtype, "panel_linear")


def _small_rows_kernel(dtype: torch.dtype, kernel: str) -> int:
    library = load_library()
    if library is None or library.kvtool_small_linear_vectorized() == 0:
        return 0
    winner, rows = SMALL_ROWS_KERNEL["amx" if "amx_tile" in cpu_flags() else "no amx"]
    return rows.get(dtype, 0) if winner == kernel else 0


def flush_denormals(num_threads: int) -> None:
    """Subnormal floats read and written as zero on this thread and a team of `num_threads` (cpu/denormals.c)."""
    library = load_library()
    if library is None:
        reference.flush_denormals(num_threads)
    else:
        library.kvtool_flush_denormals(num_threads)


def small_linear(x, weight, bias=None):
    """x [T, K] @ weight [N, K]^T + bias for at most SMALL_LINEAR_MAX_ROWS rows, streaming the plain weight once."""
    if not (
        _covered(x, weight, bias)
        and 0 < len(x) <= SMALL_LINEAR_MAX_ROWS
        and x.shape[-1] % SMALL_LINEAR_K_MULTIPLE == 0
        and weight.is_contiguous()
    ):
        return reference.small_linear(x, weight, bias)
    x = x.contiguous()
    out = x.new_empty(len(x), weight.shape[0])
    compiled_library().kvtool_small_linear(
        _ptr(x),
        _ptr(weight),
        _ptr(bias),
        _ptr(out),
        len(x),
        x.shape[1],
        weight.shape[0],
        DTYPE_CODES[x.dtype],
        torch.get_num_threads(),
    )
    return out


def panel_linear_wins() -> bool:
    """Whether PackedLinear keeps its weight as panels for panel_linear: where panel_linear has AVX2 vectors
    and small_linear none (no AVX-512), at every row count.

    There panels beat oneDNN's packed weight and small_linear's AVX2 loops at decode sizes and matched
    oneDNN at a prefill's (docs/engine.md); with AVX-512, oneDNN's packed weight stays for larger batches
    (panel_linear_rows)."""
    library = load_library()
    if library is None:
        return False
    return library.kvtool_panel_linear_vectorized() > 0 and library.kvtool_small_linear_vectorized() == 0


def panel_linear(x, panels, n, bias=None):
    """x [T, K] @ W^T + bias at any row count, W [n, K] packed by reference.pack_panels."""
    if not (_covered(x, panels, bias) and len(x) and panels.is_contiguous() and panels.shape[1] == x.shape[-1]):
        return reference.panel_linear(x, panels, n, bias)
    x = x.contiguous()
    out = x.new_empty(len(x), n)
    status = compiled_library().kvtool_panel_linear(
        _ptr(x),
        _ptr(panels),
        _ptr(bias),
        _ptr(out),
        len(x),
        x.shape[1],
        n,
        DTYPE_CODES[x.dtype],
        torch.get_num_threads(),
    )
    raise_if_out_of_memory(status, "panel_linear", len(x))
    return out


def raise_if_out_of_memory(status: int, kernel: str, rows: int) -> None:
    """A kernel that allocates scratch memory returns STATUS_NO_MEMORY when it could not: say so, never
    hand on its unwritten output."""
    if status == STATUS_NO_MEMORY:
        raise MemoryError(NO_MEMORY.format(kernel=kernel, rows=rows))


def _covered(x, *others) -> bool:
    """x and the others (None allowed) are CPU tensors of one dtype the C kernels handle."""
    if x.dtype not in DTYPE_CODES or x.device.type != "cpu" or compiled_library() is None:
        return False
    return all(t is None or (t.dtype == x.dtype and t.device.type == "cpu") for t in others)


def _quant_covered(x) -> bool:
    """x the quantized kernels take: on the CPU, whole groups along k (any float dtype: they read it as fp32)."""
    return compiled_library() is not None and x.device.type == "cpu" and x.shape[-1] % reference.QUANT_GROUP == 0


def _cache_covered(x, k_cache, v_cache) -> bool:
    """A KV cache the C kernels read and write beside x: CPU tensors of x's dtype, or bf16 beside fp32 x."""
    same_place = k_cache.device.type == v_cache.device.type == "cpu"
    return same_place and k_cache.dtype == v_cache.dtype in (x.dtype, torch.bfloat16)


def _rows_of_heads(x) -> bool:
    """[T, H, D] whose heads and elements are packed, whatever the distance between rows."""
    return x.dim() == 3 and x.stride(2) == 1 and x.stride(1) == x.shape[2]


def _ptr(tensor) -> int | None:
    return None if tensor is None else tensor.data_ptr()
