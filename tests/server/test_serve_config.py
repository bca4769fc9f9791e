"""Profile + flags + device -> the EngineArgs serve starts with, with a note for every setting the device cannot
honour."""

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from kvtool.cli.app import app
from kvtool.cli.serve_config import DeviceInfo, build_serve_plan
from kvtool.engine.discovery.models import resolve_model_spec
from kvtool.engine.sizing.context_length import AUTO_MAX_MODEL_LEN
from kvtool.engine.sizing.defaults import CPU_KV_CACHE_CAP
from kvtool.engine.sizing.engine_args import EngineArgs
from kvtool.engine.sizing.kv_cache import KVCacheSpec, KVCacheTooSmallError
from kvtool.errors import UsageError
from kvtool.profiles.workload import load_profile

CPU = DeviceInfo("cpu")
ONE_GPU = DeviceInfo("cuda", 1, "NVIDIA H100 80GB HBM3")


@pytest.fixture(scope="module")
def smollm2():
    return resolve_model_spec("smollm2")


def test_multi_gpu_profile_on_a_cpu_says_what_it_chose_instead(smollm2):
    plan = build_serve_plan(load_profile("multi-gpu-synthesis"), EngineArgs(), CPU, smollm2)
    config = plan.engine_args
    assert (config.tensor_parallel_size, config.kv_cache_dtype, config.max_model_len) == (1, "auto", 8192)
    assert config.device == "cpu" and 0 < config.kv_cache_memory <= CPU_KV_CACHE_CAP
    notes = "\n".join(plan.notes)
    for fragment in (
        "tensor_parallel_size 4",
        "kv_cache_dtype fp8",
        "-> auto (float32)",  # the quantized GGUF's KV cache
        "max_model_len 16384",
        "gpu_memory_utilization 0.92",
    ):
        assert fragment in notes
    assert plan.default_max_tokens == 4096


def test_bf16_on_a_cpu_without_bf16_instructions_is_named_with_the_way_out(smollm2):
    fp32_folder = replace(smollm2, source="a-folder", dtype="float32")  # dense weights: auto runs bf16
    no_bf16 = DeviceInfo("cpu", fast_bf16=False)
    emulated = [note for note in build_serve_plan(None, EngineArgs(), no_bf16, fp32_folder).notes if "emulated" in note]
    assert emulated and "dtype auto" in emulated[0] and "--dtype float32" in emulated[0]
    for overrides, device, spec in [
        (EngineArgs(dtype="float32"), no_bf16, fp32_folder),
        (EngineArgs(), CPU, fp32_folder),  # bf16 instructions or AVX2's column panels: nothing to say
        (EngineArgs(), no_bf16, smollm2),  # the quantized GGUF computes in float32
    ]:
        assert not any("emulated" in note for note in build_serve_plan(None, overrides, device, spec).notes)


def test_on_one_gpu_only_tensor_parallelism_is_lowered(smollm2):
    plan = build_serve_plan(load_profile("long-form-agent"), EngineArgs(), ONE_GPU, smollm2)
    assert plan.notes == []
    assert plan.engine_args.kv_cache_dtype == "fp8" and plan.engine_args.kv_cache_memory is None
    tp_plan = build_serve_plan(load_profile("multi-gpu-synthesis"), EngineArgs(), ONE_GPU, smollm2)
    assert any("found 1 CUDA device(s)" in note for note in tp_plan.notes)


def test_flags_override_the_profile(smollm2):
    overrides = EngineArgs(max_model_len=1024, max_num_seqs=4, overflow="reject", kv_cache_memory=64 << 20)
    plan = build_serve_plan(load_profile("chat-gateway"), overrides, CPU, smollm2, default_max_tokens=64)
    config = plan.engine_args
    assert (config.max_model_len, config.max_num_seqs, config.overflow, config.kv_cache_memory) == (
        1024,
        4,
        "reject",
        64 << 20,
    )
    assert plan.default_max_tokens == 64
    assert not any("gpu_memory_utilization" in note for note in plan.notes)


def test_cpu_budget_is_what_max_num_seqs_full_sequences_need_when_small(smollm2):
    """SmolLM2's GGUF file keeps its weights quantized by default: the engine's KV cache is float32."""
    flags = EngineArgs(max_model_len=512, max_num_seqs=2)
    quantized, dequantized = (
        build_serve_plan(None, flags, CPU, smollm2),
        build_serve_plan(None, replace(flags, dtype="bfloat16"), CPU, smollm2),
    )
    for plan, spec in ((quantized, replace(smollm2, dtype="float32")), (dequantized, smollm2)):
        need = 2 * KVCacheSpec(spec).request_bytes(512) + KVCacheSpec(spec).block_bytes
        assert plan.engine_args.kv_cache_memory == need
        assert plan.default_max_tokens is None
    assert quantized.engine_args.kv_cache_memory > dequantized.engine_args.kv_cache_memory
    assert any("GGUF weights kept quantized" in note for note in quantized.notes)
    assert not any("GGUF" in note for note in dequantized.notes)


def test_a_flag_longer_than_the_model_context_is_refused(smollm2):
    with pytest.raises(
        UsageError,
        match=r"max_model_len \(9000\) is greater than the derived max_model_len \(max_position_embeddings=8192",
    ):
        build_serve_plan(None, EngineArgs(max_model_len=9000), CPU, smollm2)


def test_auto_max_model_len_is_the_length_plan_predicts_for_the_same_budget(smollm2):
    """`--max-model-len auto` on the CPU: the largest length one request of which fits, as vLLM's auto-fit,
    and what `kvtool plan --max-model-len auto` gives for the same model and KV budget."""
    budget = 16 << 20
    plan = build_serve_plan(None, EngineArgs(max_model_len=AUTO_MAX_MODEL_LEN, kv_cache_memory=budget), CPU, smollm2)
    planned = CliRunner().invoke(
        app, ["plan", "--model", "smollm2", "--kv-cache-memory", "16MiB", "--max-model-len", "auto", "--json"]
    )
    length = plan.engine_args.max_model_len
    assert length == json.loads(planned.stdout)["max_model_len"] < smollm2.derived_max_model_len
    cache = KVCacheSpec(replace(smollm2, dtype="float32"))  # the GGUF's weights stay quantized: float32 KV
    cache.check_fits(budget, length)  # the engine's start-up check
    with pytest.raises(KVCacheTooSmallError):
        cache.check_fits(budget, length + 1)
    assert (
        f"Auto-fit max_model_len: reduced from 8192 to {length} to fit in available KV cache memory" in plan.notes[-1]
    )


def test_auto_max_model_len_keeps_the_full_context_when_it_fits(smollm2):
    plan = build_serve_plan(None, EngineArgs(max_model_len=AUTO_MAX_MODEL_LEN), CPU, smollm2)
    assert plan.engine_args.max_model_len == smollm2.derived_max_model_len
    assert not any("Auto-fit" in note for note in plan.notes)


def test_auto_max_model_len_on_a_gpu_needs_a_kv_budget(smollm2):
    with pytest.raises(UsageError, match="--max-model-len auto on a GPU needs --kv-cache-memory"):
        build_serve_plan(None, EngineArgs(max_model_len=AUTO_MAX_MODEL_LEN), ONE_GPU, smollm2)
    given = build_serve_plan(
        None, EngineArgs(max_model_len=AUTO_MAX_MODEL_LEN, kv_cache_memory=16 << 20), ONE_GPU, smollm2
    )
    assert given.engine_args.max_model_len == KVCacheSpec(smollm2).estimate_max_model_len(16 << 20)


@pytest.mark.slow
def test_the_engine_starts_at_the_auto_length(smollm2):
    from kvtool.engine.runtime.llm_engine import LLMEngine

    plan = build_serve_plan(None, EngineArgs(max_model_len=AUTO_MAX_MODEL_LEN, kv_cache_memory=16 << 20), CPU, smollm2)
    engine = LLMEngine(plan.engine_args)
    assert engine.config.model_config.max_model_len == plan.engine_args.max_model_len < smollm2.derived_max_model_len
