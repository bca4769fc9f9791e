"""Prometheus metrics at /metrics, with vLLM 0.33's default names, labels (model_name, engine) and buckets."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from kvtool.engine.runtime.outputs import RequestMetrics
from kvtool.engine.server.metric_families import (
    ADMISSION_REASONS,
    CACHE_HIT_SOURCES,
    FINISHED_REASONS,
    ITERATION_TOKENS_BUCKETS,
    ITL_BUCKETS,
    PROMPT_TOKEN_SOURCES,
    REQUEST_LATENCY_BUCKETS,
    REQUEST_NUM_PREEMPTIONS_BUCKETS,
    REQUEST_PARAMS_N_BUCKETS,
    TTFT_BUCKETS,
    SchedulerStatsCollector,
    request_tokens_buckets,
)

LABELS = ("model_name", "engine")


@dataclass
class FinishedRequest:
    """What one engine request reports when it ends."""

    num_prompt_tokens: int
    num_generated: int
    num_cached_tokens: int
    finish_reason: str
    e2e_seconds: float
    n: int
    max_tokens: int | None
    times: RequestMetrics | None  # the engine's timestamps (None when it never got in)


class ServerMetrics:
    """One registry per app, so several apps (tests) never share counters."""

    def __init__(self, engine, model_name: str, max_model_len: int):
        self.registry = CollectorRegistry()
        self.labels = {"model_name": model_name, "engine": "0"}
        self.registry.register(SchedulerStatsCollector(engine, self.labels))
        tokens = request_tokens_buckets(max_model_len)
        self.prompt_tokens = self._counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.prompt_by_source = self._counter_by(
            "vllm:prompt_tokens_by_source", "Number of prompt tokens by source.", "source", PROMPT_TOKEN_SOURCES
        )
        self.prompt_tokens_cached = self._counter(
            "vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external)."
        )
        self.cached_by_source = self._counter_by(
            "vllm:prompt_tokens_cached_by_source",
            "Prefix-cache hit tokens by the cache tier that supplied them.",
            "source",
            CACHE_HIT_SOURCES,
        )
        self.generation_tokens = self._counter("vllm:generation_tokens", "Number of generation tokens processed.")
        self.request_success = self._counter_by(
            "vllm:request_success", "Count of successfully processed requests.", "finished_reason", FINISHED_REASONS
        )
        admission = Counter(
            "vllm:admission_rejections",
            "Number of admission attempts rejected by a queue limit, by reason.",
            ("model_name", "reason"),
            registry=self.registry,
        )
        for reason in ADMISSION_REASONS:
            admission.labels(model_name=model_name, reason=reason)
        self.request_prompt_tokens = self._histogram(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokens
        )
        self.request_generation_tokens = self._histogram(
            "vllm:request_generation_tokens", "Number of generation tokens processed.", tokens
        )
        self.iteration_tokens = self._histogram(
            "vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", ITERATION_TOKENS_BUCKETS
        )
        self.max_generation_tokens = self._histogram(
            "vllm:request_max_num_generation_tokens",
            "Histogram of maximum number of requested generation tokens.",
            tokens,
        )
        self.params_n = self._histogram(
            "vllm:request_params_n", "Histogram of the n request parameter.", REQUEST_PARAMS_N_BUCKETS
        )
        self.params_max_tokens = self._histogram(
            "vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", tokens
        )
        self.ttft = self._histogram(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS
        )
        self.itl = self._histogram(
            "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS
        )
        self.tpot = self._histogram(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            ITL_BUCKETS,
        )
        self.phases = {
            phase: self._histogram(f"vllm:{name}", doc, REQUEST_LATENCY_BUCKETS)
            for phase, name, doc in (
                ("e2e", "e2e_request_latency_seconds", "Histogram of e2e request latency in seconds."),
                ("queue", "request_queue_time_seconds", "Histogram of time spent in WAITING phase for request."),
                (
                    "inference",
                    "request_inference_time_seconds",
                    "Histogram of time spent in RUNNING phase for request.",
                ),
                ("prefill", "request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request."),
                ("decode", "request_decode_time_seconds", "Histogram of time spent in DECODE phase for request."),
            )
        }
        self.num_preemptions = self._histogram(
            "vllm:request_num_preemptions", "Number of preemptions per request.", REQUEST_NUM_PREEMPTIONS_BUCKETS
        )
        self.prefill_kv_computed = self._histogram(
            "vllm:request_prefill_kv_computed_tokens",
            "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
            tokens,
        )

    def _counter(self, name: str, doc: str):
        return Counter(name, doc, LABELS, registry=self.registry).labels(**self.labels)

    def _counter_by(self, name: str, doc: str, label: str, values) -> dict:
        """A counter with one more label, every series created up front (at 0), as vLLM does."""
        counter = Counter(name, doc, (*LABELS, label), registry=self.registry)
        return {value: counter.labels(**self.labels, **{label: value}) for value in values}

    def _histogram(self, name: str, doc: str, buckets):
        return Histogram(name, doc, LABELS, buckets=buckets, registry=self.registry).labels(**self.labels)

    def observe_first_token(self, seconds: float) -> None:
        self.ttft.observe(seconds)

    def observe_token_gap(self, seconds: float) -> None:
        self.itl.observe(seconds)

    def observe_step(self, num_tokens: int) -> None:
        self.iteration_tokens.observe(num_tokens)

    def observe_finished(self, done: FinishedRequest) -> None:
        computed = done.num_prompt_tokens - done.num_cached_tokens
        self.prompt_tokens.inc(done.num_prompt_tokens)
        self.prompt_by_source["local_compute"].inc(computed)
        self.prompt_by_source["local_cache_hit"].inc(done.num_cached_tokens)
        self.prompt_tokens_cached.inc(done.num_cached_tokens)
        self.cached_by_source["device"].inc(done.num_cached_tokens)
        self.generation_tokens.inc(done.num_generated)
        self.request_prompt_tokens.observe(done.num_prompt_tokens)
        self.request_generation_tokens.observe(done.num_generated)
        self.max_generation_tokens.observe(done.num_generated)
        self.params_n.observe(done.n)
        if done.max_tokens is not None:
            self.params_max_tokens.observe(done.max_tokens)
        self.request_success.get(done.finish_reason, self.request_success["abort"]).inc()
        self.phases["e2e"].observe(done.e2e_seconds)
        self.prefill_kv_computed.observe(computed)
        if done.times is not None:
            self._observe_phases(done.times, done.num_generated)

    def _observe_phases(self, t: RequestMetrics, num_generated: int) -> None:
        self.num_preemptions.observe(t.num_preemptions)
        if t.first_scheduled_time is None or t.first_token_time is None or t.last_token_time is None:
            return
        decode = t.last_token_time - t.first_token_time
        self.phases["queue"].observe(t.first_scheduled_time - t.arrival_time)
        self.phases["prefill"].observe(t.first_token_time - t.first_scheduled_time)
        self.phases["decode"].observe(decode)
        self.phases["inference"].observe(t.last_token_time - t.first_scheduled_time)
        self.tpot.observe(decode / (num_generated - 1) if num_generated > 1 else 0.0)

    def render(self) -> bytes:
        return generate_latest(self.registry)
