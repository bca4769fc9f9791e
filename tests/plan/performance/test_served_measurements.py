"""kvtool's served-performance forecast against 213 real vLLM runs (serving_cases.py says where each comes
from): every run is a test that states kvtool's figure, the measured one and the tolerance it holds, and the
medians are held to the figures docs/plan.md reports."""

import pytest
from serving_cases import Comparison, comparisons, errors, median_error, rows

from kvtool.engine.plan.performance.accuracy import BANDS

TOLERANCE = {"tpot": 0.20, "ttft": 0.60, "output_throughput": 0.35}
PREFILL_FREE = (
    "the run's TPOT is a decode step alone (with an fp8 KV cache) and its TTFT a third of one prefill: its prompts "
    "never cost a prefill between the decodes (prefix-cache hits on repeated prompts, which kvtool does not assume)"
)
MORE_KV = (
    "the run queued far less than plan's KV cache (bf16, vLLM 0.12's utilization 0.9) makes clients that need more "
    "tokens than it holds queue: it held more KV than the defaults kvtool plans with (an fp8 KV cache, or more "
    "memory), which the source does not state"
)
TP8_LONG_PREFILL = (
    "tp 8 prefill of 8,192-token prompts: each chunk's two all-reduces per layer (134 MB each) are slower in kvtool "
    "than in the run, which first-wave queueing then multiplies"
)
FLOOD = (
    "1,000 requests of 128 tokens sent at once: the measured first tokens start 10 - 14 s late and the run is 2 - 3x "
    "slower than its GPU work, a front-end limit kvtool does not model"
)
KNOWN = {  # row id -> why kvtool misses it by more than the tolerance
    "aic-qwen3_32b_qwen3_32b_h100_sxm_vllm_agg_4000x1000_c_tp8_0_epnone_1": PREFILL_FREE,
    "aic-qwen3_32b_qwen3_32b_h100_sxm_vllm_agg_4000x1000_c_tp2_0_epnone_3": PREFILL_FREE,
    "aic-qwen3_32b_qwen3_32b_h100_sxm_vllm_agg_4000x1000_c_tp1_0_epnone_4": PREFILL_FREE,
    "aic-2026_04_06_llama_3_1_70b_h200_sxm_vllm_fp8_agg_1024x8192_c64_tp1_ep1_467": MORE_KV,
    "aic-2026_04_06_llama_3_1_70b_h200_sxm_vllm_fp8_agg_1024x8192_c32_tp1_ep1_523": MORE_KV,
    "aic-2026_04_06_llama_3_1_70b_h200_sxm_vllm_fp8_agg_8192x1024_c32_tp1_ep1_639": MORE_KV,
    "aic-2026_04_06_llama_3_1_70b_h200_sxm_vllm_fp8_agg_8192x1024_c64_tp1_ep1_846": MORE_KV,
    "aic-2026_04_06_llama_3_1_70b_h100_sxm_vllm_fp8_agg_8192x1024_c32_tp2_ep1_863": MORE_KV,
    "aic-2026_04_06_llama_3_1_70b_h100_sxm_vllm_fp8_agg_8192x1024_c16_tp8_ep1_769": TP8_LONG_PREFILL,
    "aic-2026_04_06_llama_3_1_70b_h200_sxm_vllm_fp8_agg_8192x1024_c16_tp8_ep1_800": TP8_LONG_PREFILL,
    "aic-2026_04_06_llama_3_1_70b_h100_sxm_vllm_fp8_agg_8192x1024_c32_tp8_ep1_814": TP8_LONG_PREFILL,
    "gpustack-qwen3-14b-h100-vllm-other-benchmark-cases-random-128-input": FLOOD,
    "gpustack-qwen3-32b-h100-vllm-other-benchmark-cases-random-128-input": FLOOD,
}
# The medians docs/plan.md reports ("Served performance"), held here; the throughput at saturation misses the
# 15 % aimed for (the rows on H100 PCIe run about 20 % slower than its datasheet peak; two are KNOWN floods).
MEDIANS = {("tpot", False): 0.05, ("ttft", False): 0.20, ("output_throughput", True): 0.25}


def _cases():
    for item in rows():
        mark = pytest.mark.xfail(strict=True, reason=KNOWN[item["id"]]) if item["id"] in KNOWN else ()
        yield pytest.param(item["id"], id=item["id"], marks=mark)


def _stated(comparison: Comparison) -> str:
    unit = "tok/s" if comparison.figure == "output_throughput" else "ms"
    return (
        f"{comparison.figure}: kvtool {comparison.kvtool:,.1f} {unit}, measured {comparison.measured:,.1f} {unit}, "
        f"error {comparison.error:+.0%}, tolerance ±{TOLERANCE[comparison.figure]:.0%}"
    )


@pytest.mark.parametrize("row_id", list(_cases()))
def test_measured_run(row_id):
    results = comparisons(row_id)
    misses = [_stated(c) for c in results if abs(c.error) > TOLERANCE[c.figure]]
    assert not misses, "; ".join(misses)


@pytest.mark.parametrize(("figure", "in_saturation"), list(MEDIANS))
def test_median_error(figure, in_saturation):
    assert median_error(figure, in_saturation) <= MEDIANS[figure, in_saturation]


@pytest.mark.parametrize(("band", "figure"), [("tpot", "tpot"), ("ttft", "ttft"), ("throughput", "output_throughput")])
def test_band_holds_four_runs_in_five(band, figure):
    """The band plan prints around each figure is what the model's error on these runs supports."""
    measured = errors(figure)
    assert sum(error <= BANDS[band] for error in measured) >= 0.8 * len(measured)


def test_every_known_miss_is_a_measured_run():
    assert set(KNOWN) <= {item["id"] for item in rows()}
