"""The server's own view of a run, from its Prometheus `/metrics` (vLLM's metric names).

Counters are read before and after the run (their difference belongs to the run); gauges are
polled during it and their peak is kept, over the samples taken while the server had requests (a
run shorter than the poll interval may have none: its peaks are then unknown, not 0). A server
without `/metrics` simply has no view.
"""

import asyncio

import httpx

from kvtool.monitor.page import MetricsUnavailable, Page, parse_page

# report key -> the quantity read from the page (kvtool.monitor.names: V1 names, then older ones)
COUNTERS = {
    "preemptions": "num_preemptions",
    "prefix_cache_queries": "prefix_cache_queries",
    "prefix_cache_hits": "prefix_cache_hits",
}
GAUGES = {
    "kv_cache_usage": "kv_cache_usage",
    "num_requests_waiting": "num_requests_waiting",
    "num_requests_running": "num_requests_running",
}


async def scrape(client: httpx.AsyncClient, base_url: str) -> Page | None:
    try:
        response = await client.get(base_url.rstrip("/") + "/metrics", timeout=5.0)
        return parse_page(response.text) if response.status_code == 200 else None
    except (httpx.HTTPError, MetricsUnavailable):
        return None


# Each scrape costs the server a render of every histogram, on the cores that run its steps: polling every
# 0.2 s added about 5 % to the served TPOT of one stream on a one-core server (docs/bench.md).
POLL_INTERVAL_S = 1.0


class ServerWatcher:
    """Scrapes /metrics at start, every `interval_s` during the run, and at the end."""

    def __init__(self, client: httpx.AsyncClient, base_url: str, interval_s: float | None = None):
        self.client, self.base_url = client, base_url
        self.interval_s = POLL_INTERVAL_S if interval_s is None else interval_s
        self.before: Page | None = None
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
            page = await scrape(self.client, self.base_url)
            if page is not None:
                self._record_peaks(page)
            await asyncio.sleep(self.interval_s)

    def _record_peaks(self, page: Page) -> None:
        busy = (page.value("num_requests_running") or 0) + (page.value("num_requests_waiting") or 0)
        if not busy:
            return
        for key, quantity in GAUGES.items():
            value = page.value(quantity, max if key == "kv_cache_usage" else sum)
            if value is not None:
                self.peaks[key] = max(value, self.peaks.get(key, value))

    def _view(self, after: Page) -> dict:
        delta = {key: (after.value(q) or 0.0) - (self.before.value(q) or 0.0) for key, q in COUNTERS.items()}
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
