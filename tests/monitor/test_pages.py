"""Every quantity is read from its V0 or V1 name (hand-written pages of vLLM 0.6.3 and 0.33)."""

import pytest

from kvtool.monitor.page import MetricsUnavailable, parse_page
from kvtool.monitor.window import Reading, histogram_quantile, snapshot
from tests.monitor.conftest import PAGES


def read(name: str):
    return snapshot("page", [Reading(parse_page((PAGES / name).read_text()), 0.0)])


def test_v0_page_is_read_from_the_v0_names():
    view = read("vllm_v0_6_3.prom")
    assert view.vllm_version == "v0" and view.num_engines == 1
    assert view.model_names == ["meta-llama/Llama-3.1-8B-Instruct"]
    assert (view.kv_cache_usage, view.cpu_cache_usage) == (0.9712, 0.125)
    assert (view.num_requests_running, view.num_requests_waiting, view.num_requests_swapped) == (37, 5, 3)
    assert view.num_preemptions_total == 12
    assert view.prefix_cache_hit_rate == 0.42  # V0's own gauge (0.6.x)
    # TTFT: 100 of 200 observations in (0.25, 0.5], 50 in (0.5, 0.75], 40 in (0.75, 1], 10 in (1, 2.5]
    assert view.ttft_p50_s == pytest.approx(0.5) and view.ttft_p99_s == pytest.approx(1.0 + 1.5 * 8 / 10)
    # V0's per-token histogram is time_per_output_token_seconds
    assert view.itl_p50_s == pytest.approx(0.025) and view.itl_p99_s == pytest.approx(0.025 + 0.025 * 0.98)
    assert view.mean_prompt_tokens == pytest.approx(123456 / 200)
    assert view.metric_names["kv_cache_usage"] == "vllm:gpu_cache_usage_perc"
    assert view.metric_names["itl"] == "vllm:time_per_output_token_seconds"
    assert view.cache_config["num_gpu_blocks"] == "2710"


def test_v1_page_is_read_from_the_v1_names_over_two_engines():
    view = read("vllm_v1_0_33.prom")
    assert view.vllm_version == "v1" and view.num_engines == 2
    assert view.kv_cache_usage == 0.9125  # the fuller engine, not the sum or the mean
    assert (view.num_requests_running, view.num_requests_waiting) == (37, 6)  # summed over engines
    assert view.cpu_cache_usage is None and view.num_requests_swapped is None
    assert view.num_preemptions_total == 9
    assert view.prefix_cache_hit_rate == pytest.approx(35000 / 100000)  # hits / queries, both engines
    assert view.ttft_p50_s == pytest.approx(0.25) and view.ttft_p99_s == pytest.approx(0.5)
    assert view.itl_p50_s == pytest.approx(0.05) and view.itl_p99_s == pytest.approx(0.05 + 0.025 * 4900 / 5000)
    assert view.mean_prompt_tokens == pytest.approx(320)
    assert view.metric_names["kv_cache_usage"] == "vllm:kv_cache_usage_perc"
    assert view.metric_names["itl"] == "vllm:inter_token_latency_seconds"


def test_rates_and_quantiles_come_from_the_deltas_between_two_pages():
    text = (PAGES / "vllm_v1_0_33.prom").read_text()
    later = text.replace(
        'vllm:num_preemptions_total{engine="0",model_name="Qwen/Qwen3-8B"} 7.0',
        'vllm:num_preemptions_total{engine="0",model_name="Qwen/Qwen3-8B"} 11.0',
    ).replace(
        'vllm:generation_tokens_total{engine="1",model_name="Qwen/Qwen3-8B"} 30000.0',
        'vllm:generation_tokens_total{engine="1",model_name="Qwen/Qwen3-8B"} 30500.0',
    )
    view = snapshot("page", [Reading(parse_page(text), 10.0), Reading(parse_page(later), 12.0)])
    assert view.window_s == 2.0
    assert (view.preemptions_in_window, view.preemptions_per_s) == (4, 2.0)
    assert view.generation_tokens_per_s == 250.0 and view.prompt_tokens_per_s == 0.0
    assert view.ttft_p99_s is None  # no first token in the window


def test_histogram_quantile_interpolates_inside_the_bucket_as_promql_does():
    before = {0.1: 10, 0.5: 10, 1.0: 10, float("inf"): 10}
    after = {0.1: 10, 0.5: 60, 1.0: 110, float("inf"): 110}
    assert histogram_quantile(0.5, before, after) == pytest.approx(0.5)  # rank 50 of 100: top of (0.1, 0.5]
    assert histogram_quantile(0.75, before, after) == pytest.approx(0.75)
    assert histogram_quantile(0.99, before, {**after, float("inf"): 130}) == pytest.approx(1.0)  # +Inf: last bound
    assert histogram_quantile(0.5, after, after) is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("<html><body>Welcome</body></html>", "not Prometheus text"),
        ("# TYPE up gauge\nup 1\n", "no vLLM metrics"),
        ("", "no vLLM metrics"),
    ],
)
def test_pages_without_vllm_metrics_are_refused_in_one_line(text, problem):
    with pytest.raises(MetricsUnavailable, match=problem):
        parse_page(text)
