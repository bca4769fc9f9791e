"""The C kernels of the CPU path against the torch references and token-by-token ground truth,
the packed linear layers against nn.Linear, and the build's fallbacks."""

import contextlib
import logging

import pytest
import torch
from paged_cases import CONFIG, filled_caches, naive_attention, one_rounding_step, ops_from, run_two_steps

from kvtool.engine.runtime.models.rotary import build_cos_sin_cache
from kvtool.kernels import cpu_build, cpu_linear, cpu_ops, get_ops, reference

pytestmark = pytest.mark.skipif(not cpu_ops.available(), reason="no C compiler to build the CPU kernels")

DTYPES = [torch.float32, torch.bfloat16]


def tolerance(dtype):
    return {"atol": 1e-5, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}


@contextlib.contextmanager
def library_built_anew(monkeypatch, tmp_path, caplog):
    """The kernels' library built anew in tmp_path under the variables the test set; yields the warnings that
    get_ops logged, which must have left the references in charge. The session's library is back after."""
    monkeypatch.setenv("KVTOOL_CACHE_DIR", str(tmp_path))
    cpu_build.compiled_library.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="kvtool.kernels"):
            assert get_ops("cpu").backend == "torch"
        yield caplog.text
    finally:
        monkeypatch.undo()
        cpu_build.compiled_library.cache_clear()


def test_get_ops_on_cpu_takes_the_c_kernels_and_the_references_for_the_rest():
    ops = get_ops("cpu")
    assert ops.backend == "cpu"
    assert ops.paged_decode_attention is cpu_ops.paged_decode_attention and ops.store_kv is cpu_ops.store_kv
    assert ops.prefill_attention is reference.prefill_attention


def test_kvtool_cpu_kernels_0_keeps_plain_torch(monkeypatch):
    monkeypatch.setenv("KVTOOL_CPU_KERNELS", "0")
    ops = get_ops("cpu")
    assert ops.backend == "torch" and ops.rms_norm is reference.rms_norm
    assert not cpu_linear.can_pack(torch.device("cpu"), torch.bfloat16)
    assert not cpu_linear.can_pack(torch.device("cpu"), torch.float32)


# a cache in the model's dtype, a 16-bit one beside an fp32 model, and fp8 (the reference's)
CACHE_CASES = [
    (torch.float32, torch.float32),
    (torch.bfloat16, torch.bfloat16),
    (torch.float32, torch.bfloat16),
    (torch.float32, torch.float8_e4m3fn),
]


@pytest.mark.parametrize("dtype,cache_dtype", CACHE_CASES)
def test_store_kv_writes_what_the_reference_writes(dtype, cache_dtype):
    g = torch.Generator().manual_seed(3)
    qkv = torch.randn(5, 6 * 64, generator=g).to(dtype)  # k and v as views of a fused projection, as the model has them
    key, value = qkv[:, 128:256].view(5, 2, 64), qkv[:, 256:].view(5, 2, 64)
    slots = torch.tensor([3, -1, 17, 0, 31])
    caches = [torch.zeros(2, 16, 2, 64, dtype=cache_dtype) for _ in range(4)]
    cpu_ops.store_kv(key, value, caches[0], caches[1], slots, 0.5, 2.0)
    reference.store_kv(key, value, caches[2], caches[3], slots, 0.5, 2.0)
    for got, expected in zip(caches[:2], caches[2:]):
        assert torch.equal(got.view(torch.uint8), expected.view(torch.uint8))  # copies or torch's rounding, bit for bit
    written = caches[0].flatten(0, 1).float().abs().sum((1, 2))
    assert written[17] > 0 and written[1] == 0  # slot -1 wrote nothing


@pytest.mark.parametrize("num_heads,num_kv_heads,head_dim", [(4, 4, 64), (9, 3, 64), (6, 2, 128), (8, 1, 64)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_decode_attention_matches_token_by_token(num_heads, num_kv_heads, head_dim, dtype):
    check_decode_attention(num_heads, num_kv_heads, head_dim, dtype)


def test_decode_attention_reads_a_bf16_cache_beside_an_fp32_query_in_place(monkeypatch):
    monkeypatch.setattr(reference, "paged_decode_attention", None)  # no fallback: the C kernel reads it
    check_decode_attention(9, 3, 64, torch.float32, torch.bfloat16)


@pytest.mark.parametrize("build", ["avx2_library", "portable_library"])
@pytest.mark.parametrize("dtype,cache_dtype", CACHE_CASES[:3])
def test_decode_attention_of_the_avx2_and_portable_builds(build, dtype, cache_dtype, request, monkeypatch):
    """The loops a CPU without AVX-512 (AVX2) or without AVX2 runs, on the same cases."""
    monkeypatch.setattr(cpu_ops, "compiled_library", lambda library=request.getfixturevalue(build): library)
    for shape in [(9, 3, 64), (6, 2, 128)]:
        check_decode_attention(*shape, dtype, cache_dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_decode_attention_of_a_sequence_is_the_same_alone_in_a_batch_and_on_any_thread_count(dtype):
    """Work is split by (sequence, KV head): which thread takes a piece, and what else is in the batch,
    must not change a bit of any sequence's result."""
    g = torch.Generator().manual_seed(4)
    context_lens = [300, 1, 40, 17]
    k_cache, v_cache, tables, _, _ = filled_caches(context_lens, 3, 64, dtype, g)
    query = torch.randn(len(context_lens), 9, 64, generator=g).to(dtype)
    lens, threads = torch.tensor(context_lens, dtype=torch.int32), torch.get_num_threads()
    runs = []
    try:
        for count in (1, 2, 3):
            torch.set_num_threads(count)
            runs.append(cpu_ops.paged_decode_attention(query, k_cache, v_cache, tables, lens, 0.125))
        alone = [
            cpu_ops.paged_decode_attention(
                query[b : b + 1], k_cache, v_cache, tables[b : b + 1], lens[b : b + 1], 0.125
            )
            for b in range(4)
        ]
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(run, runs[0]) for run in runs[1:])
    assert torch.equal(torch.cat(alone), runs[0])


def check_decode_attention(num_heads, num_kv_heads, head_dim, dtype, cache_dtype=None):
    """Against attention in fp64 over the values the cache holds: the math is fp32 whatever the cache's dtype."""
    g = torch.Generator().manual_seed(1)
    context_lens = [1, 15, 16, 17, 40, 300]  # one token, block edges, a partial last score tile
    k_cache, v_cache, tables, keys, values = filled_caches(
        context_lens, num_kv_heads, head_dim, cache_dtype or dtype, g
    )
    query = torch.randn(len(context_lens), num_heads, head_dim, generator=g).to(dtype)
    lens, scale = torch.tensor(context_lens, dtype=torch.int32), head_dim**-0.5
    out = cpu_ops.paged_decode_attention(query, k_cache, v_cache, tables, lens, scale)
    assert out.dtype == dtype and out.shape == query.shape
    for b, n in enumerate(context_lens):
        expected = naive_attention(query[b : b + 1], keys[b], values[b], scale, [n - 1])
        torch.testing.assert_close(out[b : b + 1].double(), expected, **tolerance(dtype))


@pytest.mark.parametrize("cache_dtype,head_dim", [(torch.float8_e4m3fn, 64), (torch.float32, 72)])
def test_decode_attention_leaves_what_it_does_not_cover_to_the_reference(cache_dtype, head_dim):
    g = torch.Generator().manual_seed(2)
    k_cache, v_cache, tables, _, _ = filled_caches([5, 33], 2, head_dim, cache_dtype, g, 0.5, 2.0)
    query, lens = torch.randn(2, 4, head_dim, generator=g), torch.tensor([5, 33], dtype=torch.int32)
    args = (query, k_cache, v_cache, tables, lens, 0.125, 0.5, 2.0)
    torch.testing.assert_close(
        cpu_ops.paged_decode_attention(*args), reference.paged_decode_attention(*args), atol=0, rtol=0
    )


@pytest.mark.parametrize("with_residual", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_matches_the_reference(with_residual, dtype):
    g = torch.Generator().manual_seed(3)
    x, residual = (torch.randn(70, 576, generator=g).to(dtype) for _ in range(2))
    weight = (torch.rand(576, generator=g) + 0.5).to(dtype)
    got = cpu_ops.rms_norm(x, weight, 1e-5, residual if with_residual else None)
    expected = reference.rms_norm(x, weight, 1e-5, residual if with_residual else None)
    got, expected = (got, expected) if with_residual else ((got,), (expected,))
    # The sum of squares is a reduction whose order the compiler and the CPU choose: one rounding step apart.
    torch.testing.assert_close(got[0], expected[0], **one_rounding_step(dtype))
    if with_residual:  # x + residual is one addition per element: identical everywhere
        torch.testing.assert_close(got[1], expected[1], atol=0, rtol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_silu_and_mul_matches_the_reference(dtype):
    x = (torch.randn(33, 2 * 1536, generator=torch.Generator().manual_seed(4)) * 4).to(dtype)
    x[0, :4] = torch.tensor([-100.0, 100.0, 0.0, -0.0])  # saturated exponentials, and zero
    # within one bf16 rounding step: the exponential is computed differently
    torch.testing.assert_close(
        cpu_ops.silu_and_mul(x), reference.silu_and_mul(x), atol=1e-5, rtol=1e-5 if dtype == torch.float32 else 2**-8
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_rotary_on_a_strided_qkv_view_matches_the_reference(dtype):
    g = torch.Generator().manual_seed(5)
    qkv = torch.randn(40, 6 * 64 + 2 * 2 * 64, generator=g).to(dtype)
    query, key = qkv[:, :384].view(40, 6, 64), qkv[:, 384:512].view(40, 2, 64)  # rows 640 apart
    positions = torch.randint(0, 128, (40,), generator=g)
    cos_sin = build_cos_sin_cache(CONFIG, 128)
    # The compiler may fuse x1 * cos - x2 * sin into one multiply-add: one rounding step apart.
    for got, expected in zip(
        cpu_ops.rotary_embedding(positions, query, key, cos_sin),
        reference.rotary_embedding(positions, query, key, cos_sin),
    ):
        torch.testing.assert_close(got, expected, **one_rounding_step(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_cpu_ops_drive_the_model_like_the_references(dtype):
    for got, expected in zip(
        run_two_steps(ops_from(cpu_ops, "cpu"), dtype), run_two_steps(ops_from(reference, "torch"), dtype)
    ):
        torch.testing.assert_close(got, expected, **tolerance(dtype))


@pytest.mark.skipif(
    not torch.ops.mkldnn._is_mkldnn_bf16_supported() or cpu_ops.panel_linear_wins(),
    reason="PackedLinear's bf16 runs through oneDNN only with bf16 instructions and no AVX2 panels",
)
@pytest.mark.parametrize("rows", [7, 64, 300])  # bf16 above 4 rows is oneDNN's: test_small_linear.py has the rest
def test_packed_linear_gives_nn_linear_bit_for_bit(rows):
    g = torch.Generator().manual_seed(6)
    linear = torch.nn.Linear(96, 160).to(torch.bfloat16)
    x = torch.randn(rows, 96, generator=g).to(torch.bfloat16)
    with torch.inference_mode():
        torch.testing.assert_close(cpu_linear.PackedLinear(linear.weight, linear.bias)(x), linear(x), atol=0, rtol=0)


@pytest.mark.parametrize("rows", [1, 7, 64, 300])
def test_fp32_packed_linear_is_within_one_rounding_step_of_nn_linear(rows):
    assert cpu_linear.can_pack(torch.device("cpu"), torch.float32)
    g = torch.Generator().manual_seed(7)
    linear = torch.nn.Linear(576, 160)
    x = torch.randn(rows, 576, generator=g)
    with torch.inference_mode():
        packed = cpu_linear.PackedLinear(linear.weight, linear.bias)
        torch.testing.assert_close(packed(x), linear(x), **one_rounding_step(torch.float32))


def test_an_fp32_engine_runs_packed_weights_and_no_reference_op(smollm2_llm, monkeypatch):
    """Every fp32 op with a C kernel takes it: prefill and decode steps call no reference fallback."""
    calls = []
    for name in ("paged_decode_attention", "rms_norm", "rotary_embedding", "silu_and_mul"):
        original = getattr(reference, name)
        monkeypatch.setattr(reference, name, lambda *a, _n=name, _f=original, **k: calls.append(_n) or _f(*a, **k))
    from kvtool.engine.runtime.config import SamplingParams

    prompts = [[1, 2, 3, 4, 5], list(range(10, 60))]
    outputs = smollm2_llm.generate(prompts, SamplingParams(max_tokens=4, ignore_eos=True), use_tqdm=False)
    assert [len(o.outputs[0].token_ids) for o in outputs] == [4, 4]
    assert calls == []
    model = smollm2_llm.engine.model_runner.model
    assert not any(isinstance(m, torch.nn.Linear) for m in model.modules())


@pytest.mark.skipif(not cpu_linear.can_pack(torch.device("cpu"), torch.bfloat16), reason="no oneDNN bf16")
def test_pack_linears_swaps_every_linear_of_a_tied_model_and_keeps_its_logits():
    from kvtool.engine.runtime.worker.loader import load_model
    from kvtool.engine.sizing.engine_config import ModelConfig

    tied = CONFIG.__class__(**{**CONFIG.to_dict(), "tie_word_embeddings": True})
    model = load_model(
        None,
        tied,
        ops_from(reference, "torch"),
        torch.bfloat16,
        torch.device("cpu"),
        128,
        ModelConfig(load_format="dummy"),
    )
    assert model.lm_head.weight is model.model.embed_tokens.weight
    hidden = torch.randn(3, CONFIG.hidden_size).to(torch.bfloat16)
    with torch.inference_mode():
        before = model.compute_logits(hidden)
        swapped = cpu_linear.pack_linears(model)
        after = model.compute_logits(hidden)
    assert swapped == 4 * CONFIG.num_hidden_layers + 1
    assert not any(isinstance(m, torch.nn.Linear) for m in model.modules())
    # oneDNN's bf16 matmul sums as nn.Linear's does; panel_linear in another order
    exact = {"atol": 0, "rtol": 0} if not cpu_ops.panel_linear_wins() else one_rounding_step(torch.bfloat16)
    torch.testing.assert_close(after, before, **exact)


def test_the_build_is_cached_per_source_and_flags(tmp_path):
    compiler = cpu_build.c_compiler()
    first = cpu_build.build_library(compiler, tmp_path)
    stamp = first.stat().st_mtime_ns
    assert cpu_build.build_library(compiler, tmp_path) == first and first.stat().st_mtime_ns == stamp
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # no scratch left behind


@pytest.mark.skipif(not {"avx2", "fma"} <= cpu_build.cpu_flags(), reason="x86-64-v3 code needs a CPU with AVX2 and FMA")
def test_kvtool_cpu_march_builds_the_avx2_class_paths(monkeypatch, tmp_path):
    import ctypes

    monkeypatch.delenv("KVTOOL_CPU_MARCH", raising=False)
    native = cpu_build.build_library(cpu_build.c_compiler(), tmp_path)
    monkeypatch.setenv("KVTOOL_CPU_MARCH", "x86-64-v3")
    built = cpu_build.build_library(cpu_build.c_compiler(), tmp_path)
    library = cpu_build.with_signatures(ctypes.CDLL(str(built)))
    assert built != native  # its own cache entry: the flags are in the key
    assert library.kvtool_panel_linear_vectorized() > 0 and library.kvtool_small_linear_vectorized() == 0
    assert library.kvtool_amx_linear_built() == 0 and library.kvtool_quant_amx_linear_built() == 0


def test_an_unknown_cpu_march_leaves_the_references_in_charge(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("KVTOOL_CPU_MARCH", "no-such-cpu")
    with library_built_anew(monkeypatch, tmp_path, caplog) as warnings:
        assert "CPU kernels unavailable" in warnings and "no-such-cpu" in warnings


@pytest.mark.skipif(not {"avx2", "fma"} <= cpu_build.cpu_flags(), reason="needs an x86 CPU with AVX2 and FMA")
def test_a_cpu_march_beyond_the_cpu_is_refused_naming_what_it_lacks(monkeypatch, tmp_path, caplog):
    monkeypatch.setattr(cpu_build, "cpu_flags", lambda: frozenset({"avx2", "fma", "f16c"}))  # an AVX2 laptop
    monkeypatch.setenv("KVTOOL_CPU_MARCH", "x86-64-v4")
    with library_built_anew(monkeypatch, tmp_path, caplog) as warnings:  # not one that dies of an illegal instruction
        assert "KVTOOL_CPU_MARCH=x86-64-v4 uses avx512bw, avx512f, which this CPU lacks" in warnings
        monkeypatch.setenv("KVTOOL_CPU_MARCH", "x86-64-v3")
        assert cpu_build.build_library(cpu_build.c_compiler(), tmp_path).exists()


def test_a_failing_compiler_leaves_the_references_in_charge(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("CC", "false")
    with library_built_anew(monkeypatch, tmp_path, caplog) as warnings:
        assert "CPU kernels unavailable" in warnings
        x = torch.randn(4, 64)
        torch.testing.assert_close(cpu_ops.silu_and_mul(x), reference.silu_and_mul(x), atol=0, rtol=0)
    assert cpu_ops.available()
