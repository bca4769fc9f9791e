"""The server's own view of a run, from its Prometheus `/metrics` (vLLM's metric names).

Counters are read before and after the run (their difference belongs to the run); gauges are
polled during it and their peak is kept, over the samples taken while the server had requests (a
run shorter than the poll interval may have none: its peaks are then unknown, not 0). A server
without `/metrics` simply has no view.
"""

import asyncio
from collections import defaultdict

import httpx

COUNTERS = {
    "preemptions": ("vllm:num_preemptions_total",),
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
}
GAUGES = {
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "num_requests_waiting": ("vllm:num_requests_waiting",),
    "num_requests_running": ("vllm:num_requests_running",),
}


def parse_metrics(text: str) -> dict[str, float]:
    """Sample name -> value summed over label sets (engines, models)."""
    from prometheus_client.parser import text_string_to_metric_families

    totals: dict[str, float] = defaultdict(float)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            totals[sample.name] += sample.value
    return dict(totals)


def pick(samples: dict[str, float], names: tuple[str, ...]) -> float | None:
    return next((samples[n] for n in names if n in samples), None)


async def scrape(client: httpx.AsyncClient, base_url: str) -> dict[str, float] | None:
    try:
        response = await client.get(base_url.rstrip("/") + "/metrics", timeout=5.0)
        return parse_metrics(response.text) if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


class ServerWatcher:
    """Scrapes /metrics at start, every `interval_s` during the run, and at the end."""

    def __init__(self, client: httpx.AsyncClient, base_url: str, interval_s: float = 0.2):
        self.client, self.base_url, self.interval_s = client, base_url, interval_s
        self.before: dict[str, float] | None = None
        self.peaks: dict[str, float] = {}
        self._poller: asyncio.Task | None = None

    async def start(self) -> None:
        self.before = await scrape(self.client, self.base_url)
        if self.before is not None:
            self._poller = asyncio.create_task(self._poll())

    async def stop(self) -> dict | None:
        if self._poller is None:
            return None
        self._poller.cancel()
        after = await scrape(self.client, self.base_url)
        if after is None:
            return None
        self._record_peaks(after)
        return self._view(after)

    async def _poll(self) -> None:
        while True:
            samples = await scrape(self.client, self.base_url)
            if samples is not None:
                self._record_peaks(samples)
            await asyncio.sleep(self.interval_s)

    def _record_peaks(self, samples: dict[str, float]) -> None:
        busy = (pick(samples, GAUGES["num_requests_running"]) or 0) + (pick(samples, GAUGES["num_requests_waiting"]) or 0)
        if not busy:
            return
        for key, names in GAUGES.items():
            value = pick(samples, names)
            if value is not None:
                self.peaks[key] = max(value, self.peaks.get(key, value))

    def _view(self, after: dict[str, float]) -> dict:
        delta = {key: (pick(after, names) or 0.0) - (pick(self.before, names) or 0.0) for key, names in COUNTERS.items()}
        queries = delta["prefix_cache_queries"]
        return {
            "preemptions": int(delta["preemptions"]),
            "peak_kv_cache_usage": self.peaks.get("kv_cache_usage"),
            "peak_num_requests_waiting": self.peaks.get("num_requests_waiting"),
            "peak_num_requests_running": self.peaks.get("num_requests_running"),
            "prefix_cache_queries": int(queries),
            "prefix_cache_hit_rate": delta["prefix_cache_hits"] / queries if queries else None,
            "poll_interval_s": self.interval_s,
        }
