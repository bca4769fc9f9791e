"""The ORCA load report vLLM 0.33 answers as an `endpoint-load-metrics` response header.

A request asks for it with `endpoint-load-metrics-format: TEXT` or `JSON` (any case); vLLM sends it on the whole
(non-streamed) answers of /v1/completions and /v1/chat/completions, with its gauges `num_requests_waiting` and
`kv_cache_usage_perc` at the time of the answer (vllm/entrypoints/serve/utils/orca_metrics.py). Another format
gets no header, and a warning in the log.
"""

from __future__ import annotations

import json
import logging

logger = logging.getLogger("kvtool.serve")
FORMAT_HEADER = "endpoint-load-metrics-format"
REPORT_HEADER = "endpoint-load-metrics"


def endpoint_load_metrics(metrics_format: str | None, stats) -> dict[str, str]:
    """The header for the format asked (none when none was asked), from the engine's SchedulerStats."""
    if not metrics_format:
        return {}
    kind = metrics_format.lower()
    if kind not in ("text", "json"):
        logger.warning("`%s` format is not supported in the ORCA response header", metrics_format)
        return {}
    named = {"num_requests_waiting": float(stats.num_waiting), "kv_cache_usage_perc": float(stats.kv_cache_usage)}
    if kind == "text":
        return {REPORT_HEADER: "TEXT " + ", ".join(f"named_metrics.{name}={value}" for name, value in named.items())}
    return {REPORT_HEADER: "JSON " + json.dumps({"named_metrics": named})}
