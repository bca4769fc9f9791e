"""The step-time mechanisms that follow vLLM's kernels rather than the roofline: the fused-MoE layer (a fixed
cost, the touched experts streamed at its own share of the bandwidth, rows padded to its tile, grouped GEMMs at
its own share of the peak), block-scaled fp8 GEMMs, and async scheduling hiding the host's work."""

import math
from dataclasses import replace

import pytest

from kvtool.engine.discovery.models import resolve_model_spec
from kvtool.engine.plan.performance.constants import Efficiencies
from kvtool.engine.plan.performance.hardware import catalog_figures, with_given
from kvtool.engine.plan.performance.load import Load
from kvtool.engine.plan.performance.model_cost import model_cost
from kvtool.engine.plan.performance.scheduler import Simulation
from kvtool.engine.plan.performance.sim_request import SchedulerLimits
from kvtool.engine.plan.performance.step_time import StepModel, expected_distinct_experts
from kvtool.engine.plan.request import PlanRequest
from kvtool.engine.sizing.gpus import find_gpu
from kvtool.engine.sizing.vllm_versions import VllmRelease
from kvtool.engine.sizing.weights import model_quant_facts

H200 = catalog_figures("H200")
EFF = Efficiencies()
QWEN3_MOE = resolve_model_spec("Qwen/Qwen3-30B-A3B")  # 48 layers, top-8 of 128 experts of 3 x 2048 x 768


def steps(spec=QWEN3_MOE, gpu=H200, eff=EFF, overlap_host=False, quantization=None):
    cost = model_cost(spec, model_quant_facts(spec, quantization), 1, 0, gpu)
    return StepModel(cost, gpu, eff, overlap_host)


def moe_seconds(model: StepModel, tokens: int) -> float:
    """What the routed experts add to a step: the step less the same step with no experts at all."""
    without = StepModel(replace(model.cost, expert=None), model.gpu, model.eff)
    return model.step(tokens, 0, []).seconds - without.step(tokens, 0, []).seconds


def test_a_moe_decode_pays_the_layers_fixed_cost_and_streams_the_touched_experts():
    """One token: 8 experts of 2 bytes x 3 x 2048 x 768 weights a layer, at the fused-MoE share of 4.8 TB/s."""
    expert_bytes = 2 * 3 * 2048 * 768
    expected = 48 * (EFF.moe_layer_overhead_s + 8 * expert_bytes / (4.8e12 * EFF.moe_hbm))
    assert moe_seconds(steps(), 1) == pytest.approx(expected, rel=0.01)


def test_prefill_expert_gemms_run_at_the_fused_moe_share_of_the_peak():
    """16,384 tokens route 1,024 rows to each expert: whole tiles, so the rows are the routed tokens."""
    rows = 16384 * 8
    flops = 48 * rows * 2 * 3 * 2048 * 768
    expected = flops / (989e12 * EFF.moe_gemm) + 48 * EFF.moe_layer_overhead_s
    assert moe_seconds(steps(), 16384) == pytest.approx(expected, rel=0.01)


def test_a_small_batch_pads_each_touched_experts_rows_to_the_16_row_tile():
    """On a GPU given 1 TFLOP/s the expert GEMMs are FLOP-bound: 16 tokens touch 82 experts, each computing a
    16-row tile, against 8 experts for one token."""
    slow = steps(gpu=with_given(H200, None, {"bf16": 1.0}), eff=Efficiencies(moe_layer_overhead_s=0))
    ratio = moe_seconds(slow, 16) / moe_seconds(slow, 1)
    assert ratio == pytest.approx(expected_distinct_experts(16, 8, 128) / 8, rel=0.02)


def test_block_scaled_fp8_gemms_pay_their_quantization_launches_and_a_lower_rate():
    block = resolve_model_spec("Qwen/Qwen3-235B-A22B-FP8")
    per_tensor = steps(resolve_model_spec("Qwen/Qwen3-235B-A22B"), quantization="fp8")
    blocked = steps(block)
    assert blocked.cost.dense.block_scaled and not per_tensor.cost.dense.block_scaled
    free = steps(block, eff=Efficiencies(block_gemm_overhead_s=0))
    launches = 94 * 2 * EFF.block_gemm_overhead_s  # qkv and o_proj; the experts are the fused-MoE layer's
    assert blocked.step(1, 0, []).seconds - free.step(1, 0, []).seconds == pytest.approx(launches, rel=1e-6)
    long = [(8192, 0)]
    assert blocked.step(0, 0, long).seconds > per_tensor.step(0, 0, long).seconds


def test_async_scheduling_overlaps_the_host_work_with_the_gpu():
    serial, overlapped = steps(), steps(overlap_host=True)
    host = EFF.step_overhead_s + 8 * EFF.sequence_overhead_s
    device = serial.step(8, 8000, []).seconds - host
    assert overlapped.step(8, 8000, []).seconds == pytest.approx(max(device, host))


@pytest.mark.parametrize("load", [Load(120, math.inf, 12), Load(80, 6.0)])
def test_closed_form_decode_runs_equal_stepping_with_the_host_overlapped(load):
    class OneStepAtATime(Simulation):
        def _quiet_steps(self) -> int:
            return 0

    model, limits = steps(overlap_host=True), SchedulerLimits(256, 8192, 20_000, 16)
    fast = Simulation(model, limits, [(800, 300)] * load.num_prompts, load, 0.04, 1.0).run()
    slow = OneStepAtATime(model, limits, [(800, 300)] * load.num_prompts, load, 0.04, 1.0).run()
    for fast_record, slow_record in zip(fast.records, slow.records):
        assert fast_record.finished == pytest.approx(slow_record.finished, rel=1e-6)


@pytest.mark.parametrize(
    ("release", "pp", "expected"), [("0.13.0", 1, False), ("0.14.0", 1, True), ("0.19.0", 2, False)]
)
def test_the_release_decides_async_scheduling(release, pp, expected):
    request = PlanRequest(gpus=[find_gpu("H200")], pp=pp, release=VllmRelease.parse(release))
    assert request.engine_config(8192, 256).scheduler_config.async_scheduling is expected


def test_blackwells_fp8_gemms_reach_a_smaller_share_of_their_peak():
    """A long fp8 prefill of Llama-3.1-70B on a B200: its dense GEMMs (the output layer stays in bf16) run at the
    low-precision share of 4.5 PFLOP/s; on an H200 the same GEMMs keep the cuBLAS share."""
    spec, long, b200 = resolve_model_spec("llama3.1-70b"), [(16384, 0)], catalog_figures("B200")
    as_hopper = Efficiencies(gemm_low_precision_blackwell=EFF.gemm)
    model, hopper_share = steps(spec, b200, quantization="fp8"), steps(spec, b200, as_hopper, quantization="fp8")
    gemm_flops = 80 * model.cost.dense.flops_per_token * 16384
    slower = gemm_flops / 4500e12 * (1 / EFF.gemm_low_precision_blackwell - 1 / EFF.gemm)
    assert model.step(0, 0, long).seconds - hopper_share.step(0, 0, long).seconds == pytest.approx(slower, rel=1e-6)
    h200 = steps(spec, catalog_figures("H200"), quantization="fp8")
    assert steps(spec, catalog_figures("H200"), as_hopper, quantization="fp8").step(0, 0, long) == h200.step(0, 0, long)
