"""The monitoring checklist: each check's threshold, its PromQL on V0 or V1 names, and its test on a watch window.

KV-cache usage warns above 0.90 and is critical at 0.95 (the level diagnose calls near full), because
preemption follows; the preemption counter should stay at zero; requests should not wait for long; the
p99 TTFT should stay under an objective; V0 servers should not swap to CPU.
"""

from collections.abc import Callable
from dataclasses import dataclass

from kvtool.engine.sizing.defaults import KV_CACHE_NEAR_FULL_PERCENT, KV_CACHE_PRESSURE_PERCENT
from kvtool.monitor.names import V0, V1, name
from kvtool.monitor.window import Snapshot

KV_USAGE_WARNING = KV_CACHE_PRESSURE_PERCENT / 100
KV_USAGE_CRITICAL = KV_CACHE_NEAR_FULL_PERCENT / 100
TTFT_P99_SECONDS = 2.0
KV_REMEDY = (
    "Lower --max-num-seqs to what the cache holds, cap clients' max_tokens, store the KV cache in fp8 "
    "(--kv-cache-dtype fp8) or raise --gpu-memory-utilization."
)
RULE_WINDOW = "5m"


@dataclass(frozen=True)
class Check:
    alert: str
    severity: str  # "warning" | "critical"
    summary: str
    duration: str  # how long the expression must hold before Prometheus fires (`for:`)
    expr: Callable[[str, float], str | None]  # (vllm version, TTFT objective) -> PromQL, None when the version lacks it
    fires: Callable[[Snapshot, float], float | None]  # the value that breaks the threshold, else None
    remedy: str  # what to change, in general (watch computes the numbers from the live server)
    kv_pressure: bool = True  # the cause is a KV cache too small for the load: diagnose's pressure fixes apply

    def runbook(self) -> str:
        return f"{self.remedy} `kvtool diagnose --url URL` computes the values for a running server."


def _kv(version: str) -> str:
    return f"max by (model_name) ({name('kv_cache_usage', version)})"


def _ttft_p99(version: str, objective: float) -> str:
    buckets = name("ttft", version) + "_bucket"
    return f"histogram_quantile(0.99, sum by (le, model_name) (rate({buckets}[{RULE_WINDOW}]))) > {objective:g}"


def _swap(version: str) -> str | None:
    if version != V0:
        return None
    return (
        f"sum by (model_name) ({name('num_requests_swapped', V0)}) > 0 "
        f"or max by (model_name) ({name('cpu_cache_usage', V0)}) > 0"
    )


def _above(value: float | None, threshold: float, inclusive: bool = False) -> float | None:
    return value if value is not None and (value >= threshold if inclusive else value > threshold) else None


def _swapping(s: Snapshot, _: float) -> float | None:
    return _above(s.num_requests_swapped, 0) or _above(s.cpu_cache_usage, 0)


CHECKS = (
    Check(
        "VllmKvCacheFull",
        "critical",
        "KV-cache usage is at or above 95%: requests are about to be preempted.",
        "1m",
        lambda v, _: f"{_kv(v)} >= {KV_USAGE_CRITICAL:g}",
        lambda s, _: _above(s.kv_cache_usage, KV_USAGE_CRITICAL, inclusive=True),
        KV_REMEDY,
    ),
    Check(
        "VllmKvCacheNearFull",
        "warning",
        "KV-cache usage is above 90%: preemption follows at full.",
        "5m",
        lambda v, _: f"{_kv(v)} > {KV_USAGE_WARNING:g}",
        lambda s, _: _above(s.kv_cache_usage, KV_USAGE_WARNING),
        KV_REMEDY,
    ),
    Check(
        "VllmPreemptions",
        "critical",
        "Requests are being preempted: the KV cache ran out and running requests are recomputed.",
        "0m",
        lambda v, _: f"sum by (model_name) (increase({name('num_preemptions', v)}[{RULE_WINDOW}])) > 0",
        lambda s, _: _above(s.preemptions_in_window, 0),
        KV_REMEDY,
    ),
    Check(
        "VllmRequestsWaiting",
        "warning",
        "Requests keep waiting for KV-cache blocks or a batch slot.",
        "5m",
        lambda v, _: f"sum by (model_name) ({name('num_requests_waiting', v)}) > 0",
        lambda s, _: _above(s.num_requests_waiting_min, 0),
        "Add capacity (replicas, --tensor-parallel-size) or make room in the KV cache. " + KV_REMEDY,
    ),
    Check(
        "VllmTtftP99High",
        "warning",
        "The p99 time to first token is above the objective.",
        "5m",
        _ttft_p99,
        lambda s, objective: _above(s.ttft_p99_s, objective),
        "Queueing or long prefills: lower --max-num-batched-tokens for shorter steps, or add capacity.",
        kv_pressure=False,
    ),
    Check(
        "VllmCpuSwap",
        "warning",
        "Requests are swapped to CPU memory (V0): the GPU KV cache is too small.",
        "1m",
        lambda v, _: _swap(v),
        _swapping,
        "Give the GPU KV cache more room. " + KV_REMEDY,
    ),
)


def checks_for(version: str) -> list[Check]:
    """The checks whose metrics `version` exposes."""
    assert version in (V0, V1)
    return [check for check in CHECKS if check.expr(version, TTFT_P99_SECONDS) is not None]
