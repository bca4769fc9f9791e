"""The step-time model's mechanisms, each against the arithmetic it stands for: bytes over bandwidth for a
decode, FLOPs over the tensor-core peak for a prefill, all-reduce per layer, experts a batch touches, the
sliding window's cap on KV reads, and what a quantization stores and computes in."""

from dataclasses import replace

import pytest

from kvtool.engine.discovery.models import resolve_model_spec
from kvtool.engine.plan.performance.constants import Efficiencies
from kvtool.engine.plan.performance.hardware import catalog_figures, parse_tflops, with_given
from kvtool.engine.plan.performance.model_cost import model_cost
from kvtool.engine.plan.performance.step_time import StepModel, expected_distinct_experts
from kvtool.engine.sizing.weights import model_quant_facts
from kvtool.errors import UsageError

H100, H200, B200 = (catalog_figures(name) for name in ("H100-80GB", "H200", "B200"))
NO_FIXED = Efficiencies(layer_overhead_s=0, step_overhead_s=0, sequence_overhead_s=0, allreduce_latency_s=0)


def steps(model: str, gpu=H100, tp: int = 1, quantization: str | None = None, eff=NO_FIXED, kv: int = 0):
    spec = resolve_model_spec(model)
    return StepModel(model_cost(spec, model_quant_facts(spec, quantization), tp, kv, gpu), gpu, eff)


def test_a_batch_one_decode_reads_every_weight_once():
    """Qwen3-32B in bf16: 64 layers of 487 M weights and the 778 M-weight output layer, 2 bytes each, over
    3.35 TB/s at the achieved share; the elementwise traffic of one token is a rounding error."""
    model = steps("Qwen/Qwen3-32B")
    weights = (64 * (5120 * 128 * (64 + 64 + 8 + 8) + 3 * 5120 * 25600) + 151936 * 5120) * 2
    expected = weights / (3.35e12 * NO_FIXED.hbm)
    assert model.step(1, 0, []).seconds == pytest.approx(expected, rel=0.01)
    assert model.step(1, 0, []).compute_seconds == 0  # bytes, not FLOPs, set the pace


def attention_seconds(tokens: int) -> float:
    """Causal attention of one Qwen3-32B prompt: n (n + 1) / 2 query-key pairs, 4 x 64 heads x 128 FLOPs each."""
    return tokens * (tokens + 1) / 2 * 64 * 4 * 64 * 128 / (989e12 * NO_FIXED.attention)


def test_a_long_prefill_is_flop_bound_linear_in_its_tokens_and_quadratic_in_attention():
    model = steps("Qwen/Qwen3-32B")
    one, two = model.step(0, 0, [(8192, 0)]), model.step(0, 0, [(16384, 0)])
    assert one.compute_seconds > 0.8 * one.seconds
    assert one.seconds > 2 * 32.76e9 * 8192 / (989e12 * NO_FIXED.gemm)
    quadratic = attention_seconds(16384) - 2 * attention_seconds(8192)
    assert two.seconds - 2 * one.seconds == pytest.approx(quadratic, rel=0.02)


def test_fp8_weights_halve_a_decode_and_double_the_prefill_rate():
    bf16, fp8 = steps("llama3.1-70b"), steps("llama3.1-70b", quantization="fp8")
    assert fp8.step(1, 0, []).seconds == pytest.approx(bf16.step(1, 0, []).seconds / 2, rel=0.05)
    assert fp8.step(0, 0, [(8192, 0)]).seconds < 0.6 * bf16.step(0, 0, [(8192, 0)]).seconds


def test_tensor_parallelism_splits_the_weights_and_adds_two_all_reduces_a_layer():
    eff = Efficiencies()
    one, two = steps("llama3.1-70b", eff=eff), steps("llama3.1-70b", tp=2, eff=eff)
    allreduce = 2 * 80 * (eff.allreduce_latency_s + 8192 * 2 / (450e9 * eff.link))  # one token, half of 2 x (tp-1)
    assert two.step(1, 0, []).seconds == pytest.approx(one.step(1, 0, []).seconds / 2 + allreduce, rel=0.08)


def test_the_kv_read_grows_a_decode_step_linearly():
    model = steps("Qwen/Qwen3-32B", kv=262144)
    base, longer = model.step(8, 8 * 1000, []), model.step(8, 8 * 5000, [])
    assert longer.seconds - base.seconds == pytest.approx(8 * 4000 * 262144 / (3.35e12 * NO_FIXED.hbm), rel=1e-6)


def test_sliding_window_layers_read_at_most_their_window():
    """gpt-oss-120b: 18 of its 36 layers keep a 128-token window, so past it only the full layers grow."""
    model = steps("openai/gpt-oss-120b", kv=36 * 2 * 8 * 64 * 2)
    growth = model.step(1, 20_000, []).seconds - model.step(1, 10_000, []).seconds
    assert growth == pytest.approx(10_000 * 18 * 2048 / (3.35e12 * NO_FIXED.hbm), rel=1e-6)


@pytest.mark.parametrize(("tokens", "touched"), [(1, 8.0), (2, 15.5), (16, 82.35), (10_000, 128.0)])
def test_expected_distinct_experts_of_a_batch(tokens, touched):
    """E x (1 - (1 - k/E)^T) for top-8 of 128 experts."""
    assert expected_distinct_experts(tokens, 8, 128) == pytest.approx(touched, rel=1e-3)


def test_a_moe_decode_reads_only_the_experts_its_tokens_touch():
    model = steps("Qwen/Qwen3-30B-A3B")
    one, many = model.step(1, 0, []).seconds, model.step(256, 0, []).seconds
    assert many / one > 5  # 8 of 128 experts at batch 1; all of them at 256


def test_mxfp4_experts_run_weight_only_before_blackwell_and_in_fp4_on_it():
    hopper, blackwell = steps("openai/gpt-oss-120b").cost.expert, steps("openai/gpt-oss-120b", gpu=B200).cost.expert
    assert (hopper.dtype, hopper.dequantize) == ("bf16", True)
    assert (blackwell.dtype, blackwell.dequantize) == ("fp4", False)
    assert hopper.weight_bytes == blackwell.weight_bytes


def test_datasheets_by_board_and_given_figures():
    assert (H100.hbm_gbps, H100.peak_flops("bf16"), H100.link) == (3350, 989e12, "nvlink")
    pcie = catalog_figures("H100-80GB", "h100-pcie")
    assert (pcie.hbm_gbps, pcie.link) == (2000, "pcie")
    assert catalog_figures("A10G").hbm_gbps is None
    given = with_given(catalog_figures("A10G"), 600.0, parse_tflops("bf16=70,fp8=140", "bf16"))
    assert (given.hbm_bytes_per_s, given.peak_flops("fp16"), given.peak_flops("fp8")) == (600e9, 70e12, 140e12)
    assert parse_tflops("312", "bf16") == {"bf16": 312.0}
    with pytest.raises(UsageError, match="not a positive TFLOP/s"):
        parse_tflops("bf16=fast", "bf16")


@pytest.mark.parametrize(
    ("device", "bandwidth"),
    [
        ("NVIDIA H100 80GB HBM3", 3350),
        ("NVIDIA H100 PCIe", 2000),
        ("NVIDIA GeForce RTX 4090", 1008),
        ("NVIDIA L4", 300),
    ],
)
def test_a_device_named_as_nvml_reads_it_finds_its_datasheet(device, bandwidth):
    assert catalog_figures(device).hbm_gbps == bandwidth


def test_an_infinity_fabric_mesh_gives_tp_only_the_links_to_its_peers():
    mi300x = catalog_figures("MI300X")
    assert mi300x.link_bytes_per_s(2) == pytest.approx(64e9)
    assert mi300x.link_bytes_per_s(8) == pytest.approx(7 * 64e9)
    assert H200.link_bytes_per_s(2) == H200.link_bytes_per_s(8) == pytest.approx(450e9)


def test_a_board_whose_power_limit_feeds_less_than_its_gemms_draw_prefills_at_lower_clocks():
    """The H100 PCIe (350 W) sustains 1.2 TFLOP/s per watt of Hopper tensor work, 420 of the 567 TFLOP/s its
    GEMMs would reach at full clocks: a prefill's FLOP-bound time grows by that ratio, a decode's bytes do not.
    The SXM board's 700 W feed more than its GEMMs draw, and an architecture without a measured figure keeps
    its clocks."""
    pcie = catalog_figures("H100-80GB", given_as="h100-pcie")
    full_clocks = replace(pcie, board_watts=None)
    share = 1.2e12 * 350 / (NO_FIXED.gemm * 756e12)
    limited, unlimited = steps("Qwen/Qwen3-32B", gpu=pcie), steps("Qwen/Qwen3-32B", gpu=full_clocks)
    prefill, prefill_full = limited.step(0, 0, [(8192, 0)]), unlimited.step(0, 0, [(8192, 0)])
    assert prefill.compute_seconds == pytest.approx(prefill_full.compute_seconds / share, rel=1e-6)
    assert limited.step(1, 0, []).seconds == pytest.approx(unlimited.step(1, 0, []).seconds)
    assert steps("Qwen/Qwen3-32B").step(0, 0, [(8192, 0)]) == steps(
        "Qwen/Qwen3-32B", gpu=replace(H100, board_watts=None)
    ).step(0, 0, [(8192, 0)])
    l4 = catalog_figures("L4")
    assert steps("qwen3-8b", gpu=replace(l4, board_watts=10)).step(0, 0, [(4096, 0)]) == steps("qwen3-8b", gpu=l4).step(
        0, 0, [(4096, 0)]
    )
