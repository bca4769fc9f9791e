"""Each Triton kernel against its torch reference (on CPU through TRITON_INTERPRET=1)."""

import subprocess
import sys

import pytest
import torch

pytest.importorskip("triton")

from paged_cases import BLOCK_SIZE, filled_caches  # noqa: E402

from kvtool.kernels import decode_attention, fused_ops, prefill_attention, reference, store_kv  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)


def tolerance(dtype):
    return {"atol": 1e-4, "rtol": 1e-4} if dtype == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}


def on_fp8_grid(x, cache_dtype, scale):
    """Values that quantize exactly (the interpreter's fp32 -> fp8 rounding is not torch's)."""
    return (x / scale).to(cache_dtype).float() * scale


@pytest.mark.parametrize("cache_dtype", [torch.float16, torch.bfloat16, *FP8])
def test_store_kv_matches_reference_from_a_strided_qkv_view(cache_dtype):
    g = torch.Generator().manual_seed(0)
    qkv = torch.randn(6, 3 * 2 * 64, generator=g) * 4
    if cache_dtype in FP8:
        qkv[:, 128:256], qkv[:, 256:] = (
            on_fp8_grid(qkv[:, 128:256], cache_dtype, 0.5),
            on_fp8_grid(qkv[:, 256:], cache_dtype, 2.0),
        )
        qkv[0, 130], qkv[1, 300] = 1e6, -1e6  # out of fp8 range: clamped, not inf / nan
    else:
        qkv = qkv.to(cache_dtype)
    qkv = qkv.to(DEVICE)
    key, value = qkv[:, 128:256].view(6, 2, 64), qkv[:, 256:].view(6, 2, 64)  # token stride 384
    slots = torch.tensor([17, 3, -1, 47, 16, 31], device=DEVICE)
    caches = [torch.zeros(3, BLOCK_SIZE, 2, 64, device=DEVICE).to(cache_dtype) for _ in range(4)]
    store_kv.store_kv(key, value, caches[0], caches[1], slots, k_scale=0.5, v_scale=2.0)
    reference.store_kv(key, value, caches[2], caches[3], slots, k_scale=0.5, v_scale=2.0)
    torch.testing.assert_close(caches[0].float(), caches[2].float(), rtol=0, atol=0)
    torch.testing.assert_close(caches[1].float(), caches[3].float(), rtol=0, atol=0)


DECODE_CASES = [  # num_heads, num_kv_heads, head_dim, cache dtype, query dtype, context lens
    (4, 4, 64, torch.float16, torch.float16, [1, 17, 40, 16]),
    (6, 2, 128, torch.float32, torch.float32, [33, 5, 64]),
    (8, 1, 64, torch.float8_e4m3fn, torch.float32, [100, 3]),
    (3, 1, 64, torch.bfloat16, torch.bfloat16, [1100, 7]),  # long: split-K and the reduce
    (6, 2, 64, torch.float8_e5m2, torch.float32, [700, 1]),
]


@pytest.mark.parametrize("num_heads,num_kv_heads,head_dim,cache_dtype,dtype,context_lens", DECODE_CASES)
def test_paged_decode_attention_matches_reference(num_heads, num_kv_heads, head_dim, cache_dtype, dtype, context_lens):
    g = torch.Generator().manual_seed(1)
    k_scale, v_scale = (0.5, 2.0) if cache_dtype in FP8 else (1.0, 1.0)
    k_cache, v_cache, tables, _, _ = filled_caches(
        context_lens, num_kv_heads, head_dim, cache_dtype, g, k_scale, v_scale
    )
    query = torch.randn(len(context_lens), num_heads, head_dim, generator=g).to(dtype)
    args = [t.to(DEVICE) for t in (query, k_cache, v_cache, tables, torch.tensor(context_lens, dtype=torch.int32))]
    out = decode_attention.paged_decode_attention(*args, head_dim**-0.5, k_scale, v_scale)
    expected = reference.paged_decode_attention(*args, head_dim**-0.5, k_scale, v_scale)
    torch.testing.assert_close(out.float(), expected.float(), **tolerance(dtype))


def test_long_contexts_are_split_and_short_ones_are_not():
    assert decode_attention.choose_num_splits(num_programs=2, max_context=2048) == 4
    assert decode_attention.choose_num_splits(num_programs=512, max_context=2048) == 1
    assert decode_attention.choose_num_splits(num_programs=2, max_context=100) == 1


PREFILL_CASES = [  # num_heads, num_kv_heads, head_dim, cache dtype, query dtype, context lens, chunk lens
    (4, 4, 64, torch.float16, torch.float16, [20, 33, 5], [20, 9, 1]),
    (6, 2, 128, torch.float32, torch.float32, [70, 5], [70, 5]),  # two query tiles
    (8, 1, 64, torch.float8_e5m2, torch.float32, [100, 3], [40, 2]),
    (3, 1, 64, torch.bfloat16, torch.bfloat16, [48, 17], [16, 17]),
]


@pytest.mark.parametrize("num_heads,num_kv_heads,head_dim,cache_dtype,dtype,context_lens,q_lens", PREFILL_CASES)
def test_prefill_attention_matches_reference(
    num_heads, num_kv_heads, head_dim, cache_dtype, dtype, context_lens, q_lens
):
    g = torch.Generator().manual_seed(2)
    k_scale, v_scale = (0.5, 2.0) if cache_dtype in FP8 else (1.0, 1.0)
    k_cache, v_cache, tables, _, _ = filled_caches(
        context_lens, num_kv_heads, head_dim, cache_dtype, g, k_scale, v_scale
    )
    query = torch.randn(sum(q_lens), num_heads, head_dim, generator=g).to(dtype)
    cu_seqlens = torch.tensor([0, *torch.tensor(q_lens).cumsum(0).tolist()], dtype=torch.int32)
    args = [
        t.to(DEVICE)
        for t in (query, k_cache, v_cache, tables, cu_seqlens, torch.tensor(context_lens, dtype=torch.int32))
    ]
    out = prefill_attention.prefill_attention(*args, head_dim**-0.5, k_scale, v_scale)
    expected = reference.prefill_attention(*args, head_dim**-0.5, k_scale, v_scale)
    torch.testing.assert_close(out.float(), expected.float(), **tolerance(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_rms_norm_matches_reference_with_and_without_residual(dtype):
    g = torch.Generator().manual_seed(3)
    x, residual = (torch.randn(5, 96, generator=g).to(dtype).to(DEVICE) for _ in range(2))
    weight = torch.randn(96, generator=g).to(dtype).to(DEVICE)
    torch.testing.assert_close(
        fused_ops.rms_norm(x, weight, 1e-6), reference.rms_norm(x, weight, 1e-6), **tolerance(dtype)
    )
    out, new_residual = fused_ops.rms_norm(x, weight, 1e-6, residual)
    expected, expected_residual = reference.rms_norm(x, weight, 1e-6, residual)
    torch.testing.assert_close(out, expected, **tolerance(dtype))
    torch.testing.assert_close(new_residual, expected_residual, atol=0, rtol=0)


@pytest.mark.parametrize("dtype,head_dim", [(torch.float32, 64), (torch.float16, 128)])
def test_rotary_embedding_matches_reference_on_strided_qkv_views(dtype, head_dim):
    g = torch.Generator().manual_seed(4)
    inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
    freqs = torch.outer(torch.arange(64).float(), inv_freq)
    cos_sin = torch.cat((freqs.cos(), freqs.sin()), dim=-1).to(DEVICE)
    qkv = torch.randn(7, 15 * head_dim, generator=g).to(dtype).to(DEVICE)
    query, key = qkv[:, : 9 * head_dim].view(7, 9, head_dim), qkv[:, 9 * head_dim : 12 * head_dim].view(7, 3, head_dim)
    positions = torch.tensor([0, 1, 5, 17, 33, 62, 63], device=DEVICE)
    # In half precision both round after each product, as HF does: the results are identical.
    exact = {"atol": 0, "rtol": 0} if dtype == torch.float16 else tolerance(dtype)
    for out, expected in zip(
        fused_ops.rotary_embedding(positions, query, key, cos_sin),
        reference.rotary_embedding(positions, query, key, cos_sin),
    ):
        torch.testing.assert_close(out, expected, **exact)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_silu_and_mul_matches_reference(dtype):
    x = torch.randn(4, 2 * 80, generator=torch.Generator().manual_seed(5)).to(dtype).to(DEVICE)
    torch.testing.assert_close(fused_ops.silu_and_mul(x), reference.silu_and_mul(x), **tolerance(dtype))


def test_get_ops_on_cpu_never_imports_triton():
    code = (
        "import sys, torch; from kvtool.kernels import get_ops; ops = get_ops('cpu'); "
        "print(ops.backend, 'triton' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    backend, triton_imported = result.stdout.split()
    assert backend in ("cpu", "torch") and triton_imported == "False"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_get_ops_on_cuda_returns_the_triton_kernels():
    from kvtool.kernels import get_ops

    ops = get_ops("cuda")
    assert ops.backend == "triton"
    assert ops.paged_decode_attention is decode_attention.paged_decode_attention
