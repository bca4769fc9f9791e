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
FIRST_CLIENTS = 4  # the concurrency search's first probe
GROWTH = 8  # the most a probe reaches past the largest load met so far, while none has failed
TINY = 1e-9  # a metric of 0 (no gaps to time) still has a logarithm


@dataclass(frozen=True)
class Slo:
    limits_ms: dict[str, float]  # a `vllm bench serve` key (p99_ttft_ms) -> its limit

    def met_by(self, metrics: dict[str, float]) -> bool:
        return self.slack(metrics) <= 1

    def slack(self, metrics: dict[str, float]) -> float:
        """The worst metric over its limit: 1 or less meets every target."""
        return max(metrics[key] / limit for key, limit in self.limits_ms.items())


def parse_slo(text: str) -> Slo:
    """`ttft_p99=2s,tpot_mean=50ms`: METRIC_STATISTIC=VALUE pairs (ms or s; a bare number is ms)."""
    limits = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        match = re.fullmatch(r"([a-z0-9]+)_([a-z0-9]+)\s*=\s*(\d+\.?\d*|\.\d+)\s*(ms|s)?", part.lower())
        if not match or match[1] not in SLO_METRICS or match[2] not in SLO_STATISTICS:
            raise UsageError(
                f"--slo '{part}' is not METRIC_STATISTIC=VALUE (metrics {', '.join(SLO_METRICS)}; "
                f"statistics {', '.join(SLO_STATISTICS)}).",
                f"Use e.g. {SLO_EXAMPLE}.",
            )
        limit = float(match[3]) * (1000 if match[4] == "s" else 1)
        if limit <= 0:
            raise UsageError(f"--slo '{part}' sets a limit of 0, which no load meets.", f"Use e.g. {SLO_EXAMPLE}.")
        limits[f"{SLO_STATISTICS[match[2]]}_{match[1]}_ms"] = limit
    if not limits:
        raise UsageError(f"--slo '{text}' names no target.", f"Use e.g. {SLO_EXAMPLE}.")
    return Slo(limits)


def largest_concurrency(slack: Callable[[Load], float], base: Load, ceiling: int) -> int:
    """The most clients of a closed loop that still meet the targets (0: not even one). `slack` is the load's
    worst metric over its limit (<= 1 meets); it grows with the clients, so each probe narrows a bracket, the
    next one placed where the two nearest probes' slacks, interpolated on log scales, reach the limit."""
    search = _Bracket(lambda clients: slack(replace(base, max_concurrency=round(clients))), 0.0, ceiling + 1.0)
    guess = min(FIRST_CLIENTS, ceiling)
    while search.high - search.low > 1:
        search.probe(guess)
        guess = round(min(max(search.next_guess(), search.low + 1), search.high - 1))
    return int(search.low)


def largest_rate(slack: Callable[[Load], float], base: Load, ceiling: float) -> float:
    """The highest Poisson request rate that still meets the targets, within RATE_PRECISION; `ceiling` is the
    rate the GPU saturates at (beyond it the queue only grows)."""
    poisson = replace(base, max_concurrency=None)
    if not ceiling > 0:
        return 0.0
    search = _Bracket(lambda rate: slack(replace(poisson, request_rate=rate)), 0.0, ceiling * (1 + RATE_PRECISION))
    for rate in (ceiling, ceiling * RATE_PRECISION):  # the ends: everything meets, or nothing
        if search.probe(rate) == (rate == ceiling):
            return rate if rate == ceiling else 0.0
    while search.high / search.low - 1 > RATE_PRECISION:
        guess = search.next_guess()
        search.probe(min(max(guess, search.low * (1 + RATE_PRECISION / 2)), search.high / (1 + RATE_PRECISION / 2)))
    return search.low


class _Bracket:
    """The largest load that meets, between the largest probe that met and the smallest that did not."""

    def __init__(self, slack: Callable[[float], float], low: float, high: float):
        self.slack, self.low, self.high = slack, low, high
        self.met: list[tuple[float, float]] = []  # (load, slack) of the probes that met, in order
        self.failed: list[tuple[float, float]] = []
        self.repeats = 0  # probes in a row that moved the same end: the next one halves the bracket
        self.last_side: list | None = None

    def probe(self, value: float) -> bool:
        slack = max(self.slack(value), TINY)
        met = slack <= 1
        side = self.met if met else self.failed
        self.repeats = self.repeats + 1 if self.last_side is side else 0
        self.last_side = side
        side.append((value, slack))
        self.low, self.high = (value, self.high) if met else (self.low, value)
        return met

    def next_guess(self) -> float:
        """Where the slack reaches 1 on a line through two probes in log-log: the two ends of the bracket, or
        the last two on the one side probed so far; halving where that keeps missing."""
        if not self.met:  # nothing met yet: as if the slack grew in proportion to the load
            return self.high / max(self.failed[-1][1], 2.0)
        if self.failed and self.repeats:
            return math.sqrt(self.low * self.high)
        pair = (self.met[-1], self.failed[-1]) if self.failed else tuple(self.met[-2:])
        if len(pair) < 2 or pair[0][0] == pair[1][0] or pair[0][1] == pair[1][1]:
            return self.low * GROWTH if not self.failed else math.sqrt(self.low * self.high)
        (x0, s0), (x1, s1) = pair
        guess = math.exp(math.log(x0) + math.log(s0) / (math.log(s0) - math.log(s1)) * (math.log(x1) - math.log(x0)))
        return guess if self.failed else min(max(guess, self.low * 2), self.low * GROWTH)
