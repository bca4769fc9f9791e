"""Each vLLM sizing boundary, pinned on both sides of the release that introduced it, with the numbers its
formula gives in that release's source (file and function named at each test)."""

import math

import pytest

from kvtool.engine.discovery.models import resolve_model_spec
from kvtool.engine.plan.planner import PlanRequest, make_plan
from kvtool.engine.sizing import release_rules
from kvtool.engine.sizing.gpus import GpuInfo, find_gpu
from kvtool.engine.sizing.kv_cache import KVCacheSpec
from kvtool.engine.sizing.kv_layout import KVLayout
from kvtool.engine.sizing.spec import spec_from_hf_config
from kvtool.engine.sizing.units import GiB
from kvtool.engine.sizing.vllm_versions import (
    BOUNDARIES,
    VllmRelease,
    default_gpu_memory_utilization,
    parse_version,
)
from kvtool.errors import UsageError

MiB = 1 << 20
LLAMA = resolve_model_spec("llama3.1-8b")
GPU_80 = GpuInfo(name="80 GiB GPU", total_bytes=80 * GiB, source="size", arch="sm90")
# Llama-3.1-8B, bf16, per profiled token: residual and normed input, then the larger of q/k/v and the gate-up
# output with its activation: 102,400 B
ACTIVATION_PER_TOKEN = 2 * (2 * 4096 + max((32 + 2 * 8) * 128, 3 * 14336))
HIDDEN_ROW = 4096 * 2  # the forward's hidden states, kept while the sampler runs
# V1 sampler warm-up with FlashInfer (0.8 - 0.11 in vLLM's Docker image, 0.21+): model-dtype logits 2, fp32 copy 4,
# top-k masked logits 4, probs 4 per logit of one sequence
SAMPLER_ROW = 128256 * 14
# V0 sampler inside the profile (model_executor/layers/sampler.py _apply_top_k_top_p, top_k = vocab - 1), its peak
# inside logits.sort(): 2 + 4 + sorted 4 + int64 indices 8 + int64 index input 8 + radix double buffers 12
V0_SAMPLER_ROW = 128256 * 38


def plan(version: str, spec=LLAMA, gpu=GPU_80, **settings):
    return make_plan(spec, PlanRequest(gpus=[gpu], release=VllmRelease.parse(version), **settings))


def test_every_boundary_names_a_modelled_release_once():
    names = [b.name for b in BOUNDARIES]
    assert len(names) == len(set(names))
    assert all((0, 2, 0) <= b.release <= (0, 34, 0) for b in BOUNDARIES)
    assert parse_version("v0.6.3.post1") == (0, 6, 3) and VllmRelease.parse(None).name == "0.33.0"
    with pytest.raises(UsageError):
        parse_version("0.35")


@pytest.mark.parametrize(
    "version, utilization", [("0.2", 0.9), ("0.19.1", 0.9), ("0.20.0", 0.92), ("0.33", 0.92), ("0.34", 1.0)]
)
def test_gpu_memory_utilization_default(version, utilization):
    # config/cache.py gpu_memory_utilization: Field(default=0.9) to 0.19.1, 0.92 from 0.20.0; 0.34's
    # resolved_gpu_memory_utilization: 1.0 with the extensible KV cache
    assert default_gpu_memory_utilization(version) == utilization
    assert plan(version, max_model_len=8192).budget.gpu_memory_utilization == utilization


@pytest.mark.parametrize(
    "version, max_model_len, tokens",
    [
        ("0.5.2", 131072, 131072),  # no automatic chunked prefill: max(max_model_len, 2048) tokens in one profile batch
        ("0.5.3", 131072, 512),  # engine/arg_utils.py: chunked prefill on above 32k; config.py: 512 tokens
        ("0.5.3", 32768, 32768),  # 32768 is not above 32k: chunking stays off
        ("0.6.5", 131072, 2048),  # config.py: the chunk becomes 2048
        ("0.6.5", 1024, 2048),  # off: max(1024, 2048)
        ("0.4.1", 8192, 8192),
    ],
)
def test_v0_profile_token_count_and_chunked_prefill_default(version, max_model_len, tokens):
    report = plan(version, max_model_len=max_model_len, gpu=GpuInfo("big", 640 * GiB, source="size"))
    assert report.v0 and report.max_num_batched_tokens == tokens and report.max_num_seqs == 256
    # worker/model_runner.py profile_run: max_num_seqs dummy prompts holding max_num_batched_tokens in all,
    # sampled through the sampler's sort path (top_k = vocab - 1, top_p = 0.99), one row per sequence
    # the forward's intermediates are freed before the sampler runs: the peak is the larger of the two
    expected = max(tokens * ACTIVATION_PER_TOKEN, tokens * HIDDEN_ROW + 256 * V0_SAMPLER_ROW)
    assert report.budget.activation_bytes == expected


def test_v0_multimodal_models_profile_at_least_5120_tokens_from_0_6_3():
    config = {
        "model_type": "qwen2_5_vl",
        "text_config": {
            "num_hidden_layers": 2,
            "hidden_size": 256,
            "num_attention_heads": 4,
            "vocab_size": 1000,
            "max_position_embeddings": 4096,
        },
        "vision_config": {
            "depth": 2,
            "hidden_size": 128,
            "intermediate_size": 256,
            "patch_size": 14,
            "spatial_merge_size": 2,
        },
    }
    spec = spec_from_hf_config(config, "tiny-vl")
    assert plan("0.6.3", spec, max_model_len=4096).max_num_batched_tokens == 5120
    assert plan("0.6.2", spec, max_model_len=4096).max_num_batched_tokens == 4096


def test_v1_sampler_warm_up_runs_on_max_num_seqs_rows():
    # v1/worker/gpu_model_runner.py _dummy_sampler_run (0.8.0+): max_num_seqs rows of fp32 logits
    report = plan("0.8.5", max_model_len=8192)
    assert (report.max_num_batched_tokens, report.max_num_seqs) == (8192, 1024)
    sampler = 8192 * HIDDEN_ROW + 1024 * SAMPLER_ROW
    assert report.budget.activation_bytes == max(8192 * ACTIVATION_PER_TOKEN, sampler) == sampler


def test_cpu_swap_blocks_in_v0_only():
    # worker/worker.py: num_cpu_blocks = int(swap_space_bytes // cache_block_size), swap_space 4 GiB; V1: 0
    assert plan("0.6.3", max_model_len=8192).num_cpu_blocks == 4 * GiB // (2 * MiB) == 2048
    assert plan("0.8.5", max_model_len=8192).num_cpu_blocks == 0


def test_cuda_graph_memory_is_subtracted_from_0_20():
    # v1/worker/gpu_worker.py determine_available_memory: the estimate is subtracted by default from 0.20.0
    assert plan("0.19.1", max_model_len=8192).budget.cudagraph_bytes == 0
    assert plan("0.20.0", max_model_len=8192).budget.cudagraph_bytes > 0
    assert plan("0.20.0", max_model_len=8192, enforce_eager=True).budget.cudagraph_bytes == 0


@pytest.mark.parametrize(
    "version, kv_dtype, arch, v0",
    [
        ("0.7.3", "auto", "sm90", True),
        ("0.8.0", "auto", "sm90", False),  # envs.py VLLM_USE_V1 default "1" in 0.8.0
        ("0.8.4", "fp8", "sm90", True),
        ("0.8.5", "fp8", "sm90", False),  # arg_utils.py: fp8 KV fell back to V0
        ("0.10.2", "auto", "sm75", True),
        ("0.11.0", "auto", "sm75", False),  # T4 stayed on V0 while V0 existed
    ],
)
def test_the_v1_switch(version, kv_dtype, arch, v0):
    gpu = GpuInfo("gpu", 80 * GiB, source="size", arch=arch)
    assert plan(version, gpu=gpu, kv_cache_dtype=kv_dtype, max_model_len=8192).v0 is v0


@pytest.mark.parametrize(
    "window, batched, length, one_step, two_steps",
    [(128, 8192, 131072, 521, 1033), (1024, 8192, 131072, 577, 1089), (4096, 2048, 32768, 385, 513)],
)
def test_sliding_window_blocks_per_request(window, batched, length, one_step, two_steps):
    # v1/kv_cache_interface.py SlidingWindowSpec: cdiv(min(W - 1 + B, L), 16) + 1 (0.8.3-0.25),
    # config/vllm.py max_concurrent_batches: two batches in flight with async scheduling (0.26+)
    spec = spec_from_hf_config(
        {
            "num_hidden_layers": 1,
            "hidden_size": 64,
            "num_attention_heads": 1,
            "vocab_size": 10,
            "sliding_window": window,
            "max_position_embeddings": length,
        }
    )
    page = 16 * 2 * 64 * 2
    for version, blocks in (("0.25.1", one_step), ("0.26.0", two_steps)):
        rules = release_rules.kv_rules(VllmRelease.parse(version), False, 1, False)
        layout = KVLayout(max_num_batched_tokens=batched, rules=rules)
        assert KVCacheSpec(spec, layout).request_bytes(length) == blocks * page
    full = release_rules.kv_rules(VllmRelease.parse("0.8.2"), False, 1, False)  # no SlidingWindowSpec yet
    layout = KVLayout(max_num_batched_tokens=batched, rules=full)
    assert KVCacheSpec(spec, layout).request_bytes(length) == length // 16 * page
    mixed = release_rules.kv_rules(VllmRelease.parse("0.9.0"), False, 1, True)  # mixed models: all full until 0.9.1
    assert mixed.sliding_batches == 0


@pytest.mark.parametrize(
    "version, arch, block",
    [
        ("0.7.3", "sm90", 16),
        ("0.8.0", "sm90", 64),
        ("0.8.0", "sm100", 16),
        ("0.10.0", "sm100", 128),
        ("0.17.0", "sm100", 64),
        ("0.17.1", "sm90", 64),
        ("0.18.0", "sm90", 16),
        ("0.18.0", "sm100", 32),
        ("0.33", "sm80", 16),
    ],
)
def test_mla_block_size_by_backend_and_gpu(version, arch, block):
    # platforms/cuda.py: FlashMLA forced 64 (0.8+), CUTLASS MLA 128 on SM100 (0.10+);
    # 0.18+ the backend's preferred size (FlashAttention MLA 16 on Hopper, FlashInfer MLA 32 on Blackwell)
    gpu = GpuInfo("gpu", 180 * GiB, source="size", arch=arch)
    assert plan(version, resolve_model_spec("deepseek-v3"), gpu, tp=8, max_model_len=8192).kv.block_size == block


def test_nccl_is_charged_until_the_baseline_moved_after_distributed_init():
    # v1/worker/gpu_worker.py init_device: the memory snapshot follows init_worker_distributed_environment from 0.11.0
    # the communicators' buffers per peer rank are plan's estimate: 333 MiB on Hopper (GPU_80 is sm90)
    before, after = plan("0.10.2", tp=2, max_model_len=8192), plan("0.11.0", tp=2, max_model_len=8192)
    assert before.budget.non_torch_bytes - after.budget.non_torch_bytes == 333 * MiB


def test_requested_memory_is_rounded_up_from_0_14():
    gpu = GpuInfo("odd", 80 * GiB + 7, source="size")
    assert plan("0.13.0", gpu=gpu, max_model_len=8192).budget.requested_bytes == int((80 * GiB + 7) * 0.9)
    assert plan("0.14.0", gpu=gpu, max_model_len=8192).budget.requested_bytes == math.ceil((80 * GiB + 7) * 0.9)


def test_the_null_block_is_kept_back_in_the_check_from_0_29():
    # v1/core/kv_cache_utils.py check_enough_kv_cache_memory: available - one block from 0.29.0
    exact = 8192 * 131072  # one 8192-token request of Llama-3.1-8B, no block to spare
    for version, fits in (("0.28.0", True), ("0.29.0", False)):
        rules = release_rules.kv_rules(VllmRelease.parse(version), False, 1, False)
        assert KVCacheSpec(LLAMA, KVLayout(rules=rules)).plan(exact, 8192).fits is fits


@pytest.mark.parametrize(
    "version, gpu, limits",
    [
        ("0.8.4", "H100-80GB", (8192, 1024)),
        ("0.8.4", "A100-80GB", (2048, 256)),  # by name before 0.8.5
        ("0.8.5", "A100-80GB", (8192, 1024)),
        ("0.9.0", "A100-80GB", (2048, 256)),  # A100 back to small in 0.9.0
        ("0.27.1", "B200", (8192, 1024)),
        ("0.28.0", "B200", (16384, 1024)),  # >= 160 GiB tier from 0.28
        ("0.32.0", "GB10", (8192, 1024)),
        ("0.33", "GB10", (2048, 256)),  # GB10 small from 0.33
    ],
)
def test_scheduler_defaults_by_release_and_gpu(version, gpu, limits):
    # engine/arg_utils.py _set_default_args / get_batch_defaults
    report = plan(version, gpu=find_gpu(gpu), max_model_len=8192)
    assert (report.max_num_batched_tokens, report.max_num_seqs) == limits


@pytest.mark.parametrize(
    "version, choices",
    [
        ("0.2.7", ("auto",)),
        ("0.3.0", ("auto", "fp8_e5m2")),
        ("0.4.1", ("auto", "fp8")),
        ("0.10.2", ("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc")),
        ("0.11.0", ("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc")),
        ("0.18.0", ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc")),
    ],
)
def test_kv_cache_dtype_choices_by_release(version, choices):
    assert VllmRelease.parse(version).kv_cache_dtypes() == choices
    assert "float32" not in VllmRelease.parse(version).kv_cache_dtypes()  # never accepted
