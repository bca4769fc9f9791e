"""`usage` and vLLM's per-request `metrics` as responses carry them (vLLM 0.33's UsageInfo, PerRequestMetrics)."""

from __future__ import annotations

from kvtool.engine.runtime.outputs import RequestMetrics


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int | None = None) -> dict:
    """The whole usage object; `cached_tokens` (prompt tokens found in the prefix cache) when the server
    reports prompt token details (--enable-prompt-tokens-details)."""
    details = None
    if cached_tokens is not None:
        details = {"cached_tokens": cached_tokens, "created_cache_tokens": None, "multimodal_tokens": None}
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": details,
        "completion_tokens_details": None,
    }


def running_usage(prompt_tokens: int, completion_tokens: int) -> dict:
    """The usage a streamed chunk carries with continuous_usage_stats: its prompt and its choice so far."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def request_metrics(timing: RequestMetrics | None, num_generated: int) -> dict:
    """vLLM's per-request timing (--enable-per-request-metrics), in milliseconds: time to first token from
    scheduling, decode time (first to last token), time queued, mean inter-token latency, and tokens per second
    from scheduling to the last token; null where a timestamp it needs is missing."""
    scheduled, first, last = (None, None, None) if timing is None else _times(timing)
    decode = None if first is None or last is None else last - first
    inference = None if scheduled is None or last is None else last - scheduled
    return {
        "time_to_first_token_ms": _ms(first - scheduled) if scheduled is not None and first is not None else None,
        "generation_time_ms": _ms(decode),
        "queue_time_ms": _ms(scheduled - timing.arrival_time) if scheduled is not None else None,
        "mean_itl_ms": _ms(decode / (num_generated - 1)) if decode is not None and num_generated > 1 else None,
        "tokens_per_second": num_generated / inference if inference else None,
        "speculative_decoding": None,
    }


def without_nulls(body):
    """A body as vLLM writes its final usage chunk (exclude_none): no null field at any depth."""
    if isinstance(body, dict):
        return {key: without_nulls(value) for key, value in body.items() if value is not None}
    if isinstance(body, list):
        return [without_nulls(item) for item in body]
    return body


def _times(timing: RequestMetrics) -> tuple:
    return timing.first_scheduled_time, timing.first_token_time, timing.last_token_time


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000
