"""vLLM 0.33's metric families at scrape time: scheduler gauges and counters, and cache_config_info.

Bucket bounds are vLLM's (vllm/v1/metrics/buckets.py); cache_config_info carries every CacheConfig
field vLLM 0.33 exports as a label, with this engine's values where it has the setting.
"""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
REQUEST_LATENCY_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
ITERATION_TOKENS_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
REQUEST_PARAMS_N_BUCKETS = (1, 2, 5, 10, 20)
REQUEST_NUM_PREEMPTIONS_BUCKETS = (1, 2, 3, 4, 5, 10, 20)
FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")
WAITING_REASONS = ("capacity", "deferred")
PROMPT_TOKEN_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
CACHE_HIT_SOURCES = ("device", "host", "p2p", "disk", "external_unspecified")
ADMISSION_REASONS = ("max_num_queued_reqs", "max_num_queued_tokens")
SLEEP_STATES = {"awake": 1, "weights_offloaded": 0, "discard_all": 0}


def request_tokens_buckets(max_model_len: int) -> list[int]:
    """vLLM's 1-2-5 series (1, 2, 5, 10, 20, ...) up to max_model_len."""
    buckets, scale = [], 1
    while True:
        for mantissa in (1, 2, 5):
            if mantissa * scale > max_model_len:
                return buckets
            buckets.append(mantissa * scale)
        scale *= 10


class SchedulerStatsCollector:
    """Reads the engine's scheduler stats at scrape time: request counts, KV usage, preemptions, prefix cache."""

    def __init__(self, engine, labels: dict[str, str]):
        self.engine = engine
        self.labels = labels

    def collect(self):
        stats = self.engine.stats()
        yield self._gauge(
            "vllm:num_requests_running", "Number of requests in model execution batches.", stats.num_running
        )
        yield self._gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", stats.num_waiting)
        yield self._by_label(
            GaugeMetricFamily,
            "vllm:num_requests_waiting_by_reason",
            "Number of waiting requests by reason.",
            "reason",
            {"capacity": stats.num_waiting, "deferred": 0},
        )
        yield self._by_label(
            GaugeMetricFamily,
            "vllm:engine_sleep_state",
            "Engine sleep state; awake = 1 means engine is awake.",
            "sleep_state",
            SLEEP_STATES,
        )
        yield self._gauge(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", stats.kv_cache_usage
        )
        yield self._counter(
            "vllm:num_preemptions", "Cumulative number of preemption from the engine.", stats.num_preemptions
        )
        yield self._counter(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
            stats.prefix_cache_queries,
        )
        yield self._counter(
            "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", stats.prefix_cache_hits
        )
        for name in (
            "external_prefix_cache_queries",
            "external_prefix_cache_hits",
            "mm_cache_queries",
            "mm_cache_hits",
        ):
            yield self._counter(f"vllm:{name}", "Not used by this engine (no KV connector, no multi-modal cache).", 0)
        yield self._cache_config_info()

    def _cache_config_info(self) -> GaugeMetricFamily:
        """vLLM's info gauge (value 1): the cache settings as labels, with the `engine` label."""
        labels = {key: str(value) for key, value in cache_config_labels(self.engine).items()}
        labels["engine"] = self.labels["engine"]
        family = GaugeMetricFamily(
            "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", labels=list(labels)
        )
        family.add_metric(list(labels.values()), 1)
        return family

    def _gauge(self, name: str, doc: str, value: float) -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, doc, labels=list(self.labels))
        family.add_metric(list(self.labels.values()), value)
        return family

    def _counter(self, name: str, doc: str, value: float) -> CounterMetricFamily:
        family = CounterMetricFamily(name, doc, labels=list(self.labels))
        family.add_metric(list(self.labels.values()), value)
        return family

    def _by_label(self, kind, name: str, doc: str, label: str, values: dict):
        family = kind(name, doc, labels=[*self.labels, label])
        for key, value in values.items():
            family.add_metric([*self.labels.values(), key], value)
        return family


def cache_config_labels(engine) -> dict:
    """vLLM 0.33's CacheConfig fields, in its order: the engine's values, vLLM's defaults for what it lacks."""
    config, info = engine.config.cache_config, engine.kv_cache_info
    return {
        "block_size": info.block_size,
        "user_specified_block_size": False,
        "kv_cache_layout": None,
        "prefix_match_unit": None,
        "gpu_memory_utilization": config.gpu_memory_utilization,
        "cache_dtype": config.kv_cache_dtype,
        "is_attention_free": False,
        "num_gpu_blocks_override": None,
        "sliding_window": None,
        "enable_prefix_caching": config.enable_prefix_caching,
        "prefix_caching_hash_algo": "sha256",
        "prefix_cache_retention_interval": 0,
        "kv_cache_dtype_skip_layers": [],
        "mamba_page_size_padded": None,
        "skip_page_size_padded": None,
        "mamba_block_size": None,
        "mamba_cache_dtype": "auto",
        "mamba_ssm_cache_dtype": "auto",
        "mamba_cache_mode": "none",
        "enable_mamba_shared_prefix_checkpoint": False,
        "replayssm_buffer_len": 16,
        "use_replayssm": False,
        "use_kda_recoverssm": False,
        "num_gpu_blocks": info.num_blocks,
        "num_cpu_blocks": None,
        "simple_cpu_offload_num_blocks": None,
        "effective_attention_block_size": info.block_size,
        "kv_cache_size_tokens": info.kv_cache_tokens,
        "kv_cache_max_concurrency": info.max_concurrency,
        "hash_block_size": info.block_size,
        "cache_hit_alignment_tokens": None,
        "kv_sharing_fast_prefill": False,
        "swa_bounded_replay": True,
        "kv_cache_memory_bytes": config.kv_cache_memory,
        "kv_offloading_size": None,
        "kv_offloading_backend": "native",
        "_block_size_resolved": True,
    }
