"""Which metric each quantity is, by vLLM generation (vLLM's docs and source, releases 0.4.3 to 0.33.0).

Counters are exposed with `_total` whatever the name they were created with, so V0 and V1 share the
counter names. V1 renamed the KV-cache gauge (`gpu_cache_usage_perc` -> `kv_cache_usage_perc`, 0.9)
and the per-token latency histogram (`time_per_output_token_seconds` -> `inter_token_latency_seconds`,
0.10.2), and dropped CPU swap (`cpu_cache_usage_perc`, `num_requests_swapped`). Readers try the names
in order, so a 0.8-era V1 server (V1 engine, older names) is read as well.
"""

from dataclasses import dataclass

V0, V1 = "v0", "v1"
VERSIONS = (V0, V1)


@dataclass(frozen=True)
class Quantity:
    key: str
    kind: str  # "gauge" | "counter" | "histogram"
    v1: tuple[str, ...]  # exposed names on V1, newest first
    v0: tuple[str, ...]  # exposed names on V0
    help: str

    def names(self, version: str) -> tuple[str, ...]:
        return self.v1 if version == V1 else self.v0


QUANTITIES = (
    Quantity(
        "kv_cache_usage",
        "gauge",
        ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        ("vllm:gpu_cache_usage_perc",),
        "GPU KV-cache usage, 0-1",
    ),
    Quantity("cpu_cache_usage", "gauge", (), ("vllm:cpu_cache_usage_perc",), "CPU swap space usage, 0-1"),
    Quantity(
        "num_requests_running",
        "gauge",
        ("vllm:num_requests_running",),
        ("vllm:num_requests_running",),
        "requests in the running batch",
    ),
    Quantity(
        "num_requests_waiting",
        "gauge",
        ("vllm:num_requests_waiting",),
        ("vllm:num_requests_waiting",),
        "requests waiting for KV blocks or a batch slot",
    ),
    Quantity("num_requests_swapped", "gauge", (), ("vllm:num_requests_swapped",), "requests swapped out to CPU"),
    Quantity(
        "num_preemptions",
        "counter",
        ("vllm:num_preemptions_total",),
        ("vllm:num_preemptions_total",),
        "preemptions since start",
    ),
    Quantity(
        "prompt_tokens",
        "counter",
        ("vllm:prompt_tokens_total",),
        ("vllm:prompt_tokens_total",),
        "prefill tokens processed",
    ),
    Quantity(
        "generation_tokens",
        "counter",
        ("vllm:generation_tokens_total",),
        ("vllm:generation_tokens_total",),
        "tokens generated",
    ),
    Quantity(
        "prefix_cache_queries",
        "counter",
        ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
        (),
        "prompt tokens looked up in the prefix cache",
    ),
    Quantity(
        "prefix_cache_hits",
        "counter",
        ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
        (),
        "prompt tokens found in the prefix cache",
    ),
    Quantity(
        "prefix_cache_hit_rate", "gauge", (), ("vllm:gpu_prefix_cache_hit_rate",), "prefix-cache hit rate (0.6.x)"
    ),
    Quantity(
        "ttft",
        "histogram",
        ("vllm:time_to_first_token_seconds",),
        ("vllm:time_to_first_token_seconds",),
        "time to first token, seconds",
    ),
    Quantity(
        "itl",
        "histogram",
        ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        ("vllm:time_per_output_token_seconds",),
        "time between output tokens, seconds",
    ),
    Quantity(
        "request_prompt_tokens",
        "histogram",
        ("vllm:request_prompt_tokens",),
        ("vllm:request_prompt_tokens",),
        "prompt tokens per finished request",
    ),
)
BY_KEY = {q.key: q for q in QUANTITIES}
# Only V0 exposes these: their presence tells the generation.
V0_ONLY = ("vllm:num_requests_swapped", "vllm:cpu_cache_usage_perc")
CACHE_CONFIG_INFO = "vllm:cache_config_info"


def name(key: str, version: str = V1) -> str:
    """The current name of a quantity on `version` (what alert rules and dashboards query)."""
    names = BY_KEY[key].names(version)
    if not names:
        raise KeyError(f"{key} has no metric on {version}")
    return names[0]
