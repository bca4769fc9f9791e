"""The mechanisms of vLLM's memory profile, each pinned on the release that changed it, with the numbers
its formula gives (file and function in vLLM named at each test)."""

import json

import pytest
from typer.testing import CliRunner

from kvtool.cli.app import app
from kvtool.engine.discovery.models import resolve_model_spec
from kvtool.engine.plan.planner import PlanRequest, make_plan
from kvtool.engine.sizing.cudagraphs import CaptureRules, capture_sizes
from kvtool.engine.sizing.engine_config import EngineConfig
from kvtool.engine.sizing.gpus import GpuInfo, find_gpu
from kvtool.engine.sizing.memory_budget import memory_budget
from kvtool.engine.sizing.profile_run import ProfileRules, activation_bytes, forward_bytes_per_token
from kvtool.engine.sizing.release_rules import budget_rules, sampler_path
from kvtool.engine.sizing.units import GiB
from kvtool.engine.sizing.vllm_versions import VllmRelease
from kvtool.engine.sizing.weights import Stage, stage_weights_bytes

MiB = 1 << 20
runner = CliRunner()
QWEN = resolve_model_spec("qwen2.5-7b")  # vocab 152064: the sampler warm-up outweighs the forward


def plan(version: str, spec=QWEN, gpu: GpuInfo | None = None, **settings):
    gpus = [gpu or find_gpu("H100-80GB")]
    return make_plan(spec, PlanRequest(gpus=gpus, release=VllmRelease.parse(version), **settings))


@pytest.mark.parametrize(
    "version, flashinfer, path",
    [
        ("0.10.1", None, "flashinfer"),  # topk_topp_sampler.py: FlashInfer when installed (vLLM's Docker image)
        ("0.10.1", False, "native"),  # VLLM_USE_FLASHINFER_SAMPLER=0, or a pip install without FlashInfer
        ("0.12.0", None, "native"),  # FlashInfer only on VLLM_USE_FLASHINFER_SAMPLER=1
        ("0.12.0", True, "flashinfer"),
        ("0.17.1", None, "triton"),  # apply_top_k_top_p: in-place Triton kernel for >= 8 rows
        ("0.21.0", None, "flashinfer"),  # envs.py: VLLM_USE_FLASHINFER_SAMPLER defaults to True
        ("0.21.0", False, "flashinfer"),  # its PyTorch path masks in place too: the same 14 bytes a logit
    ],
)
def test_the_sampler_path_by_release(version, flashinfer, path):
    assert sampler_path(VllmRelease.parse(version), False, flashinfer) == path


def test_the_profile_peak_is_the_larger_of_forward_and_sampler_not_their_sum():
    # gpu_model_runner.py profile_run: _dummy_run's intermediates are freed before _dummy_sampler_run
    forward = 2048 * forward_bytes_per_token(QWEN)
    sampler = 2048 * 3584 * 2 + 256 * 152064 * 14
    assert activation_bytes(QWEN, 2048, 256) == max(forward, sampler) == sampler
    assert activation_bytes(QWEN, 2048, 1) == forward  # one sequence: the forward decides
    native = activation_bytes(QWEN, 2048, 256, rules=ProfileRules(sampler="native"))
    assert native == 2048 * 3584 * 2 + 256 * 152064 * 38
    assert activation_bytes(QWEN, 2048, 256, last_stage=False) == forward  # only the last stage samples


def test_pipeline_stages_hold_their_layers_and_one_end_each():
    llama = resolve_model_spec("llama3.1-8b")  # untied: input embedding and lm_head of 128256 x 4096 each
    whole = stage_weights_bytes(llama)
    embedding, layers = 128256 * 4096 * 2, whole - 2 * 128256 * 4096 * 2
    assert stage_weights_bytes(llama, stage=Stage(16, first=True, last=False)) == embedding + layers // 2
    assert stage_weights_bytes(llama, stage=Stage(16, first=False, last=True)) == embedding + layers // 2
    assert stage_weights_bytes(llama, stage=Stage(8, first=False, last=False)) == layers // 4


def test_the_smallest_stage_sizes_every_stage(monkeypatch):
    # v1/core/kv_cache_utils.py get_kv_cache_configs: every worker gets the fewest blocks of any worker
    monkeypatch.setenv("VLLM_PP_LAYER_PARTITION", "12,16")
    args = ["plan", "-m", "qwen2.5-7b", "--pp", "2", "--gpu", "L4,H100-80GB", "--max-model-len", "8192", "--json"]
    report = json.loads(runner.invoke(app, args).stdout)
    assert report["memory"]["total_bytes"] == find_gpu("L4").total_bytes  # the 12 layers on the L4 bind
    monkeypatch.setenv("VLLM_PP_LAYER_PARTITION", "12,17")
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "does not split 28 layers over 2 pipeline stages" in result.output


@pytest.mark.parametrize("version, fits", [("0.13.0", True), ("0.15.1", False), ("0.17.1", True)])
def test_0_14_to_0_16_check_the_whole_model_against_the_smallest_stage(version, fits, monkeypatch):
    # 0.14 - 0.16 get_kv_cache_configs: _check_enough_kv_cache_memory(min(available_memory), whole model);
    # 0.17 projects the groups onto each worker again (vLLM issue #34076)
    # Llama-3.1-8B's 28-layer stage holds about 6.3 GiB of KV: 56,000 tokens of its 28 layers fit (6.0 GiB),
    # 56,000 tokens of all 32 layers (6.8 GiB) do not
    monkeypatch.setenv("VLLM_PP_LAYER_PARTITION", "4,28")
    args = ["plan", "-m", "llama3.1-8b", "--pp", "2", "--gpu", "L4,L4", "--max-model-len", "56000"]
    report = json.loads(runner.invoke(app, [*args, "--vllm-version", version, "--json"]).stdout)
    assert report["fits"] is fits
    assert fits or "(6.84 GiB KV cache is needed" in report["warnings"][0]


@pytest.mark.parametrize(
    "version, seqs, piecewise, full",
    [
        ("0.9.2", 1, 67, 0),  # config.py: 1, 2, 4 and multiples of 8 up to 512, whatever max_num_seqs
        ("0.10.2", 1, 2, 0),  # up to min(2 x max_num_seqs, 512): 1 and 2
        ("0.10.2", 256, 67, 0),
        ("0.11.0", 256, 67, 35),  # FULL_AND_PIECEWISE: FULL graphs for decode batches up to max_num_seqs
        ("0.19.1", 256, 51, 35),  # by 16 from 256 (0.12+): the s-20 log's "PIECEWISE=51, FULL=35"
    ],
)
def test_cuda_graph_capture_sizes_by_release(version, seqs, piecewise, full):
    rules = budget_rules(VllmRelease.parse(version), False, "sm90").capture
    sizes, full_sizes = capture_sizes(rules, seqs, 8192)
    assert (len(sizes), len(full_sizes)) == (piecewise, full)


def test_data_centre_blackwell_captures_up_to_1024_tokens_from_0_28():
    assert capture_sizes(budget_rules(VllmRelease.parse("0.28.0"), False, "sm100").capture, 1024, 16384)[0][-1] == 1024
    assert capture_sizes(CaptureRules(), 1024, 16384)[0][-1] == 512


def test_the_graph_estimate_follows_pieces_and_is_subtracted_from_0_20():
    # gpu_worker.py determine_available_memory: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to 1 from 0.20
    eager = plan("0.20.0", max_model_len=8192, enforce_eager=True).budget.cudagraph_bytes
    graphs = plan("0.20.0", max_model_len=8192).budget.cudagraph_bytes
    assert eager == 0 and plan("0.19.1", max_model_len=8192).budget.cudagraph_bytes == 0
    # 0.1 GiB for the first capture and 0.25 MiB per piece: 51 sizes x (28 layers + 1) + 51 FULL graphs
    assert graphs == int(GiB // 10 + (51 * 29 + 51) * MiB / 4)


@pytest.mark.parametrize(
    "version, non_torch",
    [
        ("0.2.5", 0),  # the allocator's peak only
        ("0.2.6", 450 * MiB),  # total - free: this process's CUDA context too
        ("0.6.3", 50 * MiB),  # free at init - free after: after the context
        ("0.6.4", 450 * MiB),  # total - free - torch allocated
        ("0.7.3", 50 * MiB),  # the non-torch increase since a baseline snapshot
        ("0.8.5", 450 * MiB),  # V1 to 0.9.0: total - free - torch allocated
        ("0.9.1", 20 * MiB),  # V1: the snapshot follows the CUDA context
    ],
)
def test_non_torch_memory_follows_what_each_release_measures(version, non_torch):
    release = VllmRelease.parse(version)
    assert budget_rules(release, release.uses_v0()).non_torch_bytes == non_torch


def test_nccl_buffers_are_charged_per_peer_where_the_baseline_precedes_them():
    spec = resolve_model_spec("llama3.1-8b")
    for version, arch, per_peer in (
        ("0.10.1", "sm80", 120 * MiB),
        ("0.10.0", "sm90", 333 * MiB),
        ("0.11.0", "sm90", 0),
    ):
        rules = budget_rules(VllmRelease.parse(version), False, arch)
        budget = memory_budget(
            spec, 80 * GiB, EngineConfig.of(gpu_memory_utilization=0.9, tensor_parallel_size=4), rules=rules
        )
        assert budget.non_torch_bytes - rules.non_torch_bytes == 3 * per_peer


def test_a_size_without_a_name_says_which_scheduler_tier_it_assumed():
    args = ["plan", "-m", "qwen2.5-7b", "--gpu-mem", "79.2GiB", "--vllm-version", "0.10.1", "--json"]
    report = json.loads(runner.invoke(app, args).stdout)
    assert (report["max_num_batched_tokens"], report["max_num_seqs"]) == (8192, 1024)  # H100, H800, A800
    (note,) = [w for w in report["warnings"] if w.startswith("a GPU given by its size only")]
    assert "on A100-80GB vLLM 0.10.1 uses 2048 / 256: +" in note and "--gpu" in note
    named = json.loads(runner.invoke(app, [*args, "--gpu", "A100-80GB"]).stdout)
    assert (named["max_num_batched_tokens"], named["max_num_seqs"]) == (2048, 256)
    assert not any(w.startswith("a GPU given by its size only") for w in named["warnings"])


def test_plan_says_when_estimates_decide_much_of_the_kv_cache():
    small = ["plan", "-m", "qwen2.5-7b", "--gpu", "RTX-4090", "--max-model-len", "8192", "--json"]
    (line,) = [w for w in json.loads(runner.invoke(app, small).stdout)["warnings"] if w.startswith("estimated")]
    assert "activation peak" in line and "CUDA graphs" in line and "--from-log" in line
    big = ["plan", "-m", "llama3.2-1b", "--gpu", "H200", "--max-model-len", "8192", "--json"]
    assert not any(w.startswith("estimated") for w in json.loads(runner.invoke(app, big).stdout)["warnings"])
    pip_era = [*small, "--vllm-version", "0.10.1"]
    (line,) = [w for w in json.loads(runner.invoke(app, pip_era).stdout)["warnings"] if w.startswith("estimated")]
    assert "assumes FlashInfer" in line and "VLLM_USE_FLASHINFER_SAMPLER=0" in line


def test_0_34_sizes_the_kv_cache_from_the_whole_device_less_a_margin():
    # v1/worker/extensible_kv_cache.py measure_kv_cache_bytes: min(requested - used, free - margin) - transient,
    # margin = max(1 GiB, 0.75 x transient peak); config/cache.py: utilization 1.0 when unset
    budget = plan("0.34", max_model_len=8192).budget
    margin = max(GiB, int(0.75 * budget.activation_bytes))
    assert (budget.gpu_memory_utilization, budget.kv_headroom_bytes) == (1.0, margin)
    used = budget.weights_bytes + budget.activation_bytes + budget.non_torch_bytes + budget.cudagraph_bytes
    assert budget.kv_cache_bytes == budget.total_bytes - used - margin
    capped = plan("0.34", max_model_len=8192, gpu_memory_utilization=0.9).budget
    assert capped.kv_headroom_bytes == max(0, margin - (capped.total_bytes - capped.requested_bytes)) == 0
    held = find_gpu("H100-80GB")
    busy = plan(
        "0.34", gpu=GpuInfo(held.name, held.total_bytes, free_bytes=held.total_bytes - 20 * GiB), max_model_len=8192
    )
    assert busy.budget.kv_headroom_bytes == margin + 20 * GiB  # other processes: only free memory is committed
    assert [check.name for check in busy.checks] == ["weights", "kv_memory", "one_request"]  # no free-memory check


def test_v0_without_chunked_prefill_profiles_max_model_len_tokens_and_that_decides_the_start():
    # config.py SchedulerConfig: max_num_batched_tokens = max(max_model_len, 2048) unchunked; the forward of
    # 32,768 tokens (3.1 GiB) outgrows the sort of 256 x 128,256 logits (1.2 GiB) and leaves too little KV
    llama, gpu = resolve_model_spec("llama3.1-8b"), find_gpu("RTX-4090")
    short, long = (plan("0.5.2", llama, gpu, max_model_len=length) for length in (8192, 32768))
    assert short.fits and not long.fits
    assert long.budget.activation_bytes == 32768 * forward_bytes_per_token(llama) > short.budget.activation_bytes


@pytest.mark.parametrize("name, value", [("VLLM_USE_FLASHINFER_SAMPLER", "yes"), ("VLLM_PP_LAYER_PARTITION", "a,b")])
def test_vllm_environment_it_cannot_read_is_one_line(name, value, monkeypatch):
    monkeypatch.setenv(name, value)
    result = runner.invoke(app, ["plan", "-m", "llama3.1-8b", "--gpu", "H100-80GB", "--pp", "2"])
    assert result.exit_code == 2 and name in result.output and "Traceback" not in result.output
