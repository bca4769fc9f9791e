"""/metrics of the real server: vLLM v1 names and labels, counters that match the requests sent."""

import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.slow


def scrape(base_url: str) -> dict[tuple[str, frozenset], float]:
    text = httpx.get(f"{base_url}/metrics").text
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    """The sum over every sample of `name` whose labels include `labels`."""
    return sum(v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= ls)


def test_vllm_v1_metric_names_and_labels(kvtool_server):
    samples = scrape(kvtool_server)
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:num_preemptions_total",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
    ):
        labels = [dict(ls) for n, ls in samples if n == name]
        assert labels and labels[0]["model_name"] == "smollm2" and labels[0]["engine"] == "0", name
    info = [dict(ls) for n, ls in samples if n == "vllm:cache_config_info"]
    assert info and info[0]["block_size"] == "16" and int(info[0]["num_gpu_blocks"]) > 0
    for histogram in (
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:e2e_request_latency_seconds",
    ):
        assert any(n == f"{histogram}_bucket" for n, _ in samples), histogram


# Every metric vLLM 0.33 exports by default (vllm/v1/metrics/loggers.py), as exposed: counters end in _total.
VLLM_033_GAUGES = (
    "num_requests_running",
    "num_requests_waiting",
    "num_requests_waiting_by_reason",
    "engine_sleep_state",
    "kv_cache_usage_perc",
    "cache_config_info",
)
VLLM_033_COUNTERS = (
    "prefix_cache_queries",
    "prefix_cache_hits",
    "external_prefix_cache_queries",
    "external_prefix_cache_hits",
    "mm_cache_queries",
    "mm_cache_hits",
    "num_preemptions",
    "prompt_tokens",
    "prompt_tokens_by_source",
    "prompt_tokens_cached",
    "prompt_tokens_cached_by_source",
    "generation_tokens",
    "request_success",
    "admission_rejections",
)
VLLM_033_HISTOGRAMS = (
    "request_prompt_tokens",
    "request_generation_tokens",
    "iteration_tokens_total",
    "request_max_num_generation_tokens",
    "request_params_n",
    "request_params_max_tokens",
    "time_to_first_token_seconds",
    "inter_token_latency_seconds",
    "request_time_per_output_token_seconds",
    "e2e_request_latency_seconds",
    "request_queue_time_seconds",
    "request_inference_time_seconds",
    "request_prefill_time_seconds",
    "request_decode_time_seconds",
    "request_num_preemptions",
    "request_prefill_kv_computed_tokens",
)


def test_every_default_vllm_033_metric_is_exported(kvtool_server):
    names = {name for name, _ in scrape(kvtool_server)}
    expected = (
        [f"vllm:{n}" for n in VLLM_033_GAUGES]
        + [f"vllm:{n}_total" for n in VLLM_033_COUNTERS]
        + [f"vllm:{n}_count" for n in VLLM_033_HISTOGRAMS]
    )
    assert [name for name in expected if name not in names] == []


def test_series_buckets_and_cache_config_as_vllm_033(kvtool_server):
    samples = scrape(kvtool_server)
    reasons = {dict(ls)["finished_reason"] for n, ls in samples if n == "vllm:request_success_total"}
    assert reasons == {"stop", "length", "abort", "error", "repetition"}
    bounds = sorted(float(dict(ls)["le"]) for n, ls in samples if n == "vllm:request_prompt_tokens_bucket")
    assert bounds == [1, 2, 5, 10, 20, 50, 100, 200, 500, float("inf")]  # 1-2-5 capped at max_model_len 512
    info = [dict(ls) for n, ls in samples if n == "vllm:cache_config_info"][0]
    assert info["engine"] == "0" and len(info) >= 37
    assert int(info["kv_cache_size_tokens"]) == int(info["num_gpu_blocks"]) * int(info["block_size"])


def test_counters_grow_by_what_the_requests_used(kvtool_server):
    before = scrape(kvtool_server)
    usages = []
    for prompt, max_tokens in [("Hello there", 4), ("The sky is", 7), ("One two three", 5)]:
        body = {"prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True}
        usages.append(httpx.post(f"{kvtool_server}/v1/completions", json=body, timeout=120).json()["usage"])
    after = scrape(kvtool_server)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("vllm:prompt_tokens_total") == sum(u["prompt_tokens"] for u in usages)
    assert grew("vllm:generation_tokens_total") == sum(u["completion_tokens"] for u in usages) == 16
    assert grew("vllm:request_success_total", finished_reason="length") == 3
    assert grew("vllm:e2e_request_latency_seconds_count") == 3
    assert grew("vllm:time_to_first_token_seconds_count") == 3
    assert grew("vllm:inter_token_latency_seconds_count") == 16 - 3  # one gap per token after the first
    assert grew("vllm:prefix_cache_queries_total") >= sum(u["prompt_tokens"] for u in usages) - 3
    for phase in ("queue_time", "prefill_time", "decode_time", "inference_time", "time_per_output_token"):
        assert grew(f"vllm:request_{phase}_seconds_count") == 3, phase
    assert grew("vllm:request_params_max_tokens_sum") == 4 + 7 + 5
    # every prompt token, and every sampled one: the prefill step's token included, as vLLM counts it
    assert grew("vllm:iteration_tokens_total_sum") == sum(u["total_tokens"] for u in usages)


def wait_until_idle(base_url: str, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        samples = scrape(base_url)
        idle = value(samples, "vllm:kv_cache_usage_perc") == 0 and value(samples, "vllm:num_requests_running") == 0
        if idle or time.monotonic() > deadline:
            return samples
        time.sleep(0.2)


LONG_REQUEST = {"prompt": "Write a very long story about a dragon.", "max_tokens": 490, "ignore_eos": True}


def test_a_client_leaving_mid_stream_frees_its_kv_blocks(kvtool_server):
    aborted_before = value(scrape(kvtool_server), "vllm:request_success_total", finished_reason="abort")
    with httpx.stream(
        "POST", f"{kvtool_server}/v1/completions", json={**LONG_REQUEST, "stream": True}, timeout=120
    ) as response:
        events = (line for line in response.iter_lines() if line.startswith("data:"))
        first_three = [next(events) for _ in range(3)]
        assert all('"finish_reason": null' in event for event in first_three)
        assert value(scrape(kvtool_server), "vllm:kv_cache_usage_perc") > 0
    samples = wait_until_idle(kvtool_server)
    assert value(samples, "vllm:kv_cache_usage_perc") == 0
    assert value(samples, "vllm:num_requests_running") == 0
    assert value(samples, "vllm:request_success_total", finished_reason="abort") == aborted_before + 1


def test_a_client_giving_up_on_a_whole_answer_frees_its_kv_blocks(kvtool_server):
    aborted_before = value(scrape(kvtool_server), "vllm:request_success_total", finished_reason="abort")
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{kvtool_server}/v1/completions", json=LONG_REQUEST, timeout=2.0)
    samples = wait_until_idle(kvtool_server)
    assert value(samples, "vllm:kv_cache_usage_perc") == 0
    assert value(samples, "vllm:request_success_total", finished_reason="abort") == aborted_before + 1
