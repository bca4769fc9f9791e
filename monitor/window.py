"""Two pages apart in time: counter deltas and rates, and p50/p99 from the histograms' bucket deltas."""

from dataclasses import asdict, dataclass, field

from kvtool.monitor.page import Page

QUANTILES = (0.5, 0.99)


@dataclass(frozen=True)
class Reading:
    """One page, when it was taken (monotonic seconds)."""

    page: Page
    taken_at: float


@dataclass
class Snapshot:
    """What `kvtool watch` shows: the newest page's gauges and the window's rates and latencies."""

    url: str
    vllm_version: str  # "v0" | "v1": which metric names the server exposes
    model_names: list[str]
    num_engines: int
    window_s: float
    kv_cache_usage: float | None
    kv_cache_usage_peak: float | None  # highest reading in the window
    cpu_cache_usage: float | None  # V0 only
    num_requests_running: float | None
    num_requests_waiting: float | None
    num_requests_waiting_min: float | None  # lowest reading in the window: > 0 means requests waited throughout
    num_requests_swapped: float | None  # V0 only
    num_preemptions_total: float | None
    preemptions_in_window: float | None
    preemptions_per_s: float | None
    prompt_tokens_per_s: float | None
    generation_tokens_per_s: float | None
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    itl_p50_s: float | None
    itl_p99_s: float | None
    prefix_cache_hit_rate: float | None
    mean_prompt_tokens: float | None
    cache_config: dict[str, str] = field(default_factory=dict)
    metric_names: dict[str, str] = field(default_factory=dict)  # quantity -> the metric it was read from

    def to_dict(self) -> dict:
        return asdict(self)


def histogram_quantile(q: float, before: dict[float, float] | None, after: dict[float, float] | None) -> float | None:
    """The q-quantile of the observations between two cumulative bucket readings, interpolated linearly
    inside its bucket as PromQL's histogram_quantile does; None when nothing was observed."""
    if not after:
        return None
    before = before or {}
    delta = [(le, after[le] - before.get(le, 0.0)) for le in sorted(after)]
    total = delta[-1][1]
    if total <= 0:
        return None
    rank, lower, below = q * total, 0.0, 0.0
    for le, count in delta:
        if count >= rank:
            if le == float("inf"):
                return lower  # beyond the last finite bound: PromQL answers that bound
            return lower + (le - lower) * (rank - below) / max(count - below, 1e-12)
        lower, below = le, count
    return lower


def snapshot(url: str, history: list[Reading]) -> Snapshot:
    """The snapshot over `history` (oldest first). With one reading, deltas and quantiles cover the time
    since the server started, and rates are unknown."""
    first, last = history[0], history[-1]
    page, elapsed = last.page, last.taken_at - first.taken_at
    before = first.page if len(history) > 1 else None
    delta = _deltas(before, page)
    usage = [r.page.value("kv_cache_usage", max) for r in history]
    waiting = [r.page.value("num_requests_waiting") for r in history]
    ttft, itl = _quantiles(before, page, "ttft"), _quantiles(before, page, "itl")
    return Snapshot(
        url=url,
        vllm_version=page.version,
        model_names=page.model_names(),
        num_engines=page.num_engines(),
        window_s=round(elapsed, 3),
        kv_cache_usage=page.value("kv_cache_usage", max),
        kv_cache_usage_peak=_extreme(max, usage),
        cpu_cache_usage=page.value("cpu_cache_usage", max),
        num_requests_running=page.value("num_requests_running"),
        num_requests_waiting=page.value("num_requests_waiting"),
        num_requests_waiting_min=_extreme(min, waiting),
        num_requests_swapped=page.value("num_requests_swapped"),
        num_preemptions_total=page.value("num_preemptions"),
        preemptions_in_window=delta.get("num_preemptions"),
        preemptions_per_s=_rate(delta.get("num_preemptions"), elapsed),
        prompt_tokens_per_s=_rate(delta.get("prompt_tokens"), elapsed),
        generation_tokens_per_s=_rate(delta.get("generation_tokens"), elapsed),
        ttft_p50_s=ttft[0],
        ttft_p99_s=ttft[1],
        itl_p50_s=itl[0],
        itl_p99_s=itl[1],
        prefix_cache_hit_rate=_hit_rate(page, delta),
        mean_prompt_tokens=_mean(page, "request_prompt_tokens"),
        cache_config=page.cache_config(),
        metric_names=_names(page),
    )


def _deltas(before: Page | None, after: Page) -> dict[str, float]:
    """Counter increases between the pages (since start without `before`); a counter that went down (a
    restart) counts from 0, as PromQL does."""
    out = {}
    for key in ("num_preemptions", "prompt_tokens", "generation_tokens", "prefix_cache_queries", "prefix_cache_hits"):
        end = after.value(key)
        if end is not None:
            start = (before.value(key) if before else None) or 0.0
            out[key] = end - start if end >= start else end
    return out


def _quantiles(before: Page | None, after: Page, key: str) -> tuple[float | None, ...]:
    buckets_before = before.buckets(key) if before else None
    return tuple(histogram_quantile(q, buckets_before, after.buckets(key)) for q in QUANTILES)


def _hit_rate(page: Page, delta: dict[str, float]) -> float | None:
    queries = delta.get("prefix_cache_queries")
    if queries:
        return delta.get("prefix_cache_hits", 0.0) / queries
    return page.value("prefix_cache_hit_rate", max)  # V0 0.6.x: the server's own gauge


def _mean(page: Page, key: str) -> float | None:
    total, count = page.histogram_total(key, "sum"), page.histogram_total(key, "count")
    return total / count if total is not None and count else None


def _rate(value: float | None, elapsed: float) -> float | None:
    return value / elapsed if value is not None and elapsed > 0 else None


def _extreme(pick, values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return pick(present) if present else None


def _names(page: Page) -> dict[str, str]:
    from kvtool.monitor.names import QUANTITIES

    return {q.key: name for q in QUANTITIES if (name := page.metric_name(q.key))}
