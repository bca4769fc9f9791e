"""Latency targets (`--slo ttft_p99=2s,tpot_mean=50ms`) and the largest load that meets them: the most
concurrent clients of a closed loop, and the highest Poisson request rate."""

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from kvtool.engine.plan.performance.load import Load
from kvtool.errors import UsageError

SLO_METRICS = ("ttft", "tpot", "itl", "e2el")
SLO_STATISTICS = {"mean": "mean", "median": "median", "p50": "median", "p99": "p99"}
SLO_EXAMPLE = "--slo ttft_p99=2s,tpot_mean=50ms"
RATE_PRECISION = 0.02  # the request-rate search stops within 2 %


@dataclass(frozen=True)
class Slo:
    limits_ms: dict[str, float]  # a `vllm bench serve` key (p99_ttft_ms) -> its limit

    def met_by(self, metrics: dict[str, float]) -> bool:
        return all(metrics[key] <= limit for key, limit in self.limits_ms.items())


def parse_slo(text: str) -> Slo:
    """`ttft_p99=2s,tpot_mean=50ms`: METRIC_STATISTIC=VALUE pairs (ms or s; a bare number is ms)."""
    limits = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        match = re.fullmatch(r"([a-z0-9]+)_([a-z0-9]+)\s*=\s*([\d.]+)\s*(ms|s)?", part.lower())
        if not match or match[1] not in SLO_METRICS or match[2] not in SLO_STATISTICS or match[3].count(".") > 1:
            raise UsageError(
                f"--slo '{part}' is not METRIC_STATISTIC=VALUE (metrics {', '.join(SLO_METRICS)}; "
                f"statistics {', '.join(SLO_STATISTICS)}).",
                f"Use e.g. {SLO_EXAMPLE}.",
            )
        limits[f"{SLO_STATISTICS[match[2]]}_{match[1]}_ms"] = float(match[3]) * (1000 if match[4] == "s" else 1)
    if not limits:
        raise UsageError(f"--slo '{text}' names no target.", f"Use e.g. {SLO_EXAMPLE}.")
    return Slo(limits)


def largest_concurrency(meets: Callable[[Load], bool], base: Load, ceiling: int) -> int:
    """The most clients of a closed loop that still meet the targets (0: not even one), by doubling and
    then bisection; latency grows with clients, so the first failure bounds the search."""
    good, bad = 0, None
    clients = 1
    while clients <= ceiling and bad is None:
        good, bad = (clients, None) if meets(replace(base, max_concurrency=clients)) else (good, clients)
        clients *= 2
    bad = bad or ceiling + 1
    while bad - good > 1:
        middle = (good + bad) // 2
        good, bad = (middle, bad) if meets(replace(base, max_concurrency=middle)) else (good, middle)
    return good


def largest_rate(meets: Callable[[Load], bool], base: Load, ceiling: float) -> float:
    """The highest Poisson request rate that still meets the targets, within RATE_PRECISION; `ceiling` is the
    rate the GPU saturates at (beyond it the queue only grows)."""
    poisson = replace(base, max_concurrency=None)
    if not ceiling > 0 or not meets(replace(poisson, request_rate=ceiling * RATE_PRECISION)):
        return 0.0
    good, bad = ceiling * RATE_PRECISION, ceiling
    if meets(replace(poisson, request_rate=bad)):
        return bad
    while bad / good - 1 > RATE_PRECISION:
        middle = math.sqrt(good * bad)
        good, bad = (middle, bad) if meets(replace(poisson, request_rate=middle)) else (good, middle)
    return good
