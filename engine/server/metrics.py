"""Prometheus metrics at /metrics, with vLLM v1's names and labels (model_name, engine)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
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
E2E_BUCKETS = (
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
TOKEN_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000)
LABELS = ("model_name", "engine")


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
        yield self._gauge(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", stats.kv_cache_usage
        )
        yield self._counter(
            "vllm:num_preemptions", "Cumulative number of preemptions from the engine.", stats.num_preemptions
        )
        yield self._counter(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
            stats.prefix_cache_queries,
        )
        yield self._counter(
            "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", stats.prefix_cache_hits
        )
        yield self._cache_config_info()

    def _cache_config_info(self) -> GaugeMetricFamily:
        """vLLM's info gauge (value 1): the cache settings as labels."""
        config, info = self.engine.config, self.engine.kv_cache_info
        labels = {
            "block_size": info.block_size,
            "cache_dtype": config.kv_cache_dtype,
            "num_gpu_blocks": info.num_blocks,
            "gpu_memory_utilization": config.gpu_memory_utilization,
            "enable_prefix_caching": config.enable_prefix_caching,
        }
        family = GaugeMetricFamily(
            "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", labels=list(labels)
        )
        family.add_metric([str(v) for v in labels.values()], 1)
        return family

    def _gauge(self, name: str, doc: str, value: float) -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, doc, labels=list(self.labels))
        family.add_metric(list(self.labels.values()), value)
        return family

    def _counter(self, name: str, doc: str, value: float) -> CounterMetricFamily:
        family = CounterMetricFamily(name, doc, labels=list(self.labels))
        family.add_metric(list(self.labels.values()), value)
        return family


class ServerMetrics:
    """One registry per app, so several apps (tests) never share counters."""

    def __init__(self, engine, model_name: str):
        self.registry = CollectorRegistry()
        self.labels = {"model_name": model_name, "engine": "0"}
        self.registry.register(SchedulerStatsCollector(engine, self.labels))
        self.prompt_tokens = self._counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = self._counter("vllm:generation_tokens", "Number of generation tokens processed.")
        self.request_success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            LABELS + ("finished_reason",),
            registry=self.registry,
        )
        self.ttft = self._histogram(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS
        )
        self.itl = self._histogram(
            "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS
        )
        self.e2e = self._histogram(
            "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", E2E_BUCKETS
        )
        self.request_prompt_tokens = self._histogram(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", TOKEN_BUCKETS
        )
        self.request_generation_tokens = self._histogram(
            "vllm:request_generation_tokens", "Number of generation tokens processed.", TOKEN_BUCKETS
        )

    def _counter(self, name: str, doc: str):
        return Counter(name, doc, LABELS, registry=self.registry).labels(**self.labels)

    def _histogram(self, name: str, doc: str, buckets):
        return Histogram(name, doc, LABELS, buckets=buckets, registry=self.registry).labels(**self.labels)

    def observe_first_token(self, seconds: float) -> None:
        self.ttft.observe(seconds)

    def observe_token_gap(self, seconds: float) -> None:
        self.itl.observe(seconds)

    def observe_finished(self, num_prompt_tokens: int, num_generated: int, finish_reason: str, seconds: float) -> None:
        self.prompt_tokens.inc(num_prompt_tokens)
        self.generation_tokens.inc(num_generated)
        self.request_prompt_tokens.observe(num_prompt_tokens)
        self.request_generation_tokens.observe(num_generated)
        self.request_success.labels(**self.labels, finished_reason=finish_reason).inc()
        self.e2e.observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
