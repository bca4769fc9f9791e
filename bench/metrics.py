"""Latency and throughput metrics, defined as `vllm bench serve` defines them (same key names).

- TTFT: send to the first chunk that carries a token.
- TPOT: (E2E - TTFT) / (output tokens - 1) per request; the first token is excluded.
- ITL: the gap between token arrivals, per token: a chunk carrying k tokens adds k gaps of
  (its gap to the previous chunk) / k, so servers that batch tokens into chunks are not penalised.
- E2E latency (e2el): send to the last chunk.
- Goodput: completed requests per second that met every SLO (`--slo ttft=500ms,tpot=50ms`).
"""

import math
import re
from collections import Counter
from dataclasses import dataclass

from kvtool.bench.client import RequestRecord
from kvtool.errors import UsageError

DEFAULT_PERCENTILES = (50.0, 90.0, 99.0)
LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el")
SLO_METRICS = ("ttft", "tpot", "e2el")


def request_tpot(record: RequestRecord) -> float | None:
    if record.output_tokens < 2:
        return None
    return (record.latency - record.ttft) / (record.output_tokens - 1)


def request_itls(record: RequestRecord) -> list[float]:
    gaps, last_time = [], record.chunk_times[0] if record.chunk_times else 0.0
    for when, tokens in zip(record.chunk_times[1:], record.chunk_tokens[1:]):
        if tokens > 0:
            gaps += [(when - last_time) / tokens] * tokens
            last_time = when
    return gaps


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile with linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def distribution(name: str, values_s: list[float], percentiles: tuple[float, ...]) -> dict[str, float]:
    """mean/median/std/max/pXX of one metric, in milliseconds, under vLLM's key names."""
    ms = [v * 1000 for v in values_s] or [0.0]
    mean = sum(ms) / len(ms)
    stats = {
        f"mean_{name}_ms": mean,
        f"median_{name}_ms": percentile(ms, 50),
        f"std_{name}_ms": math.sqrt(sum((v - mean) ** 2 for v in ms) / len(ms)),
        f"max_{name}_ms": max(ms),
    }
    stats.update({f"p{q:g}_{name}_ms": percentile(ms, q) for q in percentiles})
    return stats


@dataclass(frozen=True)
class Slo:
    limits_s: dict[str, float]  # metric name ("ttft", "tpot", "e2el") -> limit in seconds

    def met_by(self, record: RequestRecord) -> bool:
        observed = {"ttft": record.ttft, "tpot": request_tpot(record) or 0.0, "e2el": record.latency}
        return all(observed[name] <= limit for name, limit in self.limits_s.items())


def parse_slo(text: str) -> Slo:
    """`ttft=500ms,tpot=50ms,e2el=10s` -> Slo (units: ms or s; a bare number is milliseconds)."""
    limits = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        match = re.fullmatch(r"(\w+)\s*[=:]\s*([\d.]+)\s*(ms|s)?", part)
        if not match or match[1] not in SLO_METRICS:
            raise UsageError(
                f"cannot read SLO '{part}'", fix="Use e.g. --slo ttft=500ms,tpot=50ms (metrics: ttft, tpot, e2el)."
            )
        limits[match[1]] = float(match[2]) / (1 if match[3] == "s" else 1000)
    return Slo(limits)


def parse_percentiles(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(p) for p in text.split(",") if p.strip())
    except ValueError:
        values = ()
    if not values or not all(0 < v <= 100 for v in values):
        raise UsageError(
            f"cannot read --percentiles '{text}'", fix="Use numbers in (0, 100], e.g. --percentiles 50,90,99."
        )
    return values


def summarize(
    records: list[RequestRecord],
    duration_s: float,
    slo: Slo | None = None,
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES,
) -> dict:
    done = [r for r in records if r.success]
    duration_s = max(duration_s, 1e-9)
    summary = _totals(records, done, duration_s)
    if slo is not None:
        good = sum(slo.met_by(r) for r in done)
        summary["request_goodput"] = good / duration_s
        summary["slo_attainment"] = good / len(records) if records else 0.0
    per_metric = {
        "ttft": [r.ttft for r in done],
        "tpot": [t for t in map(request_tpot, done) if t is not None],
        "itl": [gap for r in done for gap in request_itls(r)],
        "e2el": [r.latency for r in done],
    }
    for name in LATENCY_METRICS:
        summary.update(distribution(name, per_metric[name], percentiles))
    summary["failures"] = dict(Counter(r.error for r in records if not r.success).most_common())
    return summary


def _totals(records: list[RequestRecord], done: list[RequestRecord], duration_s: float) -> dict:
    input_tokens = sum(r.prompt_tokens for r in done)
    output_tokens = sum(r.output_tokens for r in done)
    return {
        "completed": len(done),
        "failed": len(records) - len(done),
        "duration": duration_s,
        "total_input_tokens": input_tokens,
        "total_output_tokens": output_tokens,
        "request_throughput": len(done) / duration_s,
        "output_throughput": output_tokens / duration_s,
        "total_token_throughput": (input_tokens + output_tokens) / duration_s,
        "usage_missing": sum(not r.usage_reported for r in done),
    }
