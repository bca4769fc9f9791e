"""`vllm bench serve`'s result metrics from simulated requests: mean / median / p99 of TTFT, TPOT, ITL and
E2E latency in milliseconds, and the request, output and total token throughputs."""

import math
from dataclasses import dataclass, field

PERCENTILES = (("mean", None), ("median", 50.0), ("p99", 99.0))


@dataclass
class RequestRecord:
    sent: float
    input_tokens: int
    output_tokens: int
    first_token: float = 0.0
    finished: float = 0.0


BIN_RATIO = 1.002  # ITL percentiles come from bins 0.2 % wide
BINS_PER_E = 1 / math.log(BIN_RATIO)


@dataclass
class TokenGaps:
    """Inter-token latencies without one entry per token: runs of steps whose gap grows linearly (first gap,
    growth per step, steps), each shared by `weight` requests, kept as a sum and a histogram."""

    count: int = 0
    total: float = 0.0
    bins: dict[int, int] = field(default_factory=dict)

    def add(self, first: float, step: float, count: int, weight: int) -> None:
        if count <= 0 or weight <= 0 or first <= 0:
            return
        self.count += count * weight
        self.total += (count * first + step * count * (count - 1) / 2) * weight
        low, high = _bin(first), _bin(first + step * (count - 1))
        share = count * weight / (high - low + 1)  # a run's gaps grow evenly: spread over its bins
        for index in range(low, high + 1):
            self.bins[index] = self.bins.get(index, 0) + share

    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def percentile(self, q: float) -> float:
        """The q-th percentile, to the bin's width."""
        target, seen = q / 100 * self.count, 0.0
        for index in sorted(self.bins):
            seen += self.bins[index]
            if seen >= target:
                return BIN_RATIO ** (index + 0.5)
        return 0.0


def _bin(value: float) -> int:
    return math.floor(math.log(value) * BINS_PER_E)


def percentile(values: list[float], q: float) -> float:
    """numpy.percentile's default (linear between the closest ranks)."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def bench_metrics(records: list[RequestRecord], gaps: TokenGaps) -> dict[str, float]:
    """The figures `vllm bench serve` prints, under its JSON names."""
    start = min(r.sent for r in records)
    duration = max(r.finished for r in records) - start
    outputs = sum(r.output_tokens for r in records)
    figures = {
        "duration": duration,
        "completed": len(records),
        "total_input_tokens": sum(r.input_tokens for r in records),
        "total_output_tokens": outputs,
        "request_throughput": len(records) / duration,
        "output_throughput": outputs / duration,
        "total_token_throughput": (outputs + sum(r.input_tokens for r in records)) / duration,
    }
    series = {
        "ttft": [r.first_token - r.sent for r in records],
        "tpot": [(r.finished - r.first_token) / (r.output_tokens - 1) for r in records if r.output_tokens > 1],
        "e2el": [r.finished - r.sent for r in records],
    }
    for name, values in series.items():
        for stat, q in PERCENTILES:
            value = sum(values) / len(values) if q is None and values else percentile(values, q or 0)
            figures[f"{stat}_{name}_ms"] = 1000 * value
    for stat, q in PERCENTILES:
        figures[f"{stat}_itl_ms"] = 1000 * (gaps.mean() if q is None else gaps.percentile(q))
    return figures
