"""A benchmark run against a server: check it, warm it up, send the workload, summarise."""

import asyncio
import math
import time
import uuid
from collections import deque
from dataclasses import dataclass, field, replace

import httpx

from kvtool.bench.client import RequestRecord, RequestSpec, send_request
from kvtool.bench.datasets import FileDataset, RandomDataset, SampleRequest
from kvtool.bench.metrics import DEFAULT_PERCENTILES, Slo, summarize
from kvtool.bench.schedule import arrival_times
from kvtool.bench.server_view import ServerWatcher
from kvtool.engine.server.defaults import DEFAULT_URL
from kvtool.errors import KvtoolError, NegativeResult, UsageError

START_A_SERVER = "Start one with `kvtool serve --profile chat-gateway`, or point --url at a running server."
# Stop early when this many requests (or all of them, if fewer) finish and none succeeded.
EARLY_STOP_FAILURES = 5
THROUGHPUT_WINDOW_S = 5.0


class AllRequestsFailed(NegativeResult):
    """Every request so far failed; the run stopped early."""


@dataclass(frozen=True)
class BenchConfig:
    dataset: RandomDataset | FileDataset = field(default_factory=RandomDataset)
    base_url: str = DEFAULT_URL
    endpoint: str = "chat"
    model: str | None = None
    num_prompts: int = 100
    request_rate: float = math.inf
    burstiness: float = 1.0
    max_concurrency: int | None = None
    duration_s: float | None = None
    warmups: int = 0
    max_tokens: int | None = None  # overrides the dataset's output lengths
    ignore_eos: bool = False
    seed: int = 0
    slo: Slo | None = None
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES
    request_timeout_s: float = 600.0
    sampling: tuple[tuple[str, object], ...] = (("temperature", 0.0),)  # temperature, top_p, top_k, --extra-body
    engine_args: dict = field(default_factory=dict)  # offline: EngineArgs fields (dtype, quantization)


@dataclass
class RunProgress:
    """What a live display shows; tokens are counted as chunks arrive."""

    total: int
    done: int = 0
    failed: int = 0
    in_flight: int = 0
    started_at: float = field(default_factory=time.perf_counter)
    recent_tokens: deque = field(default_factory=deque)  # (arrival time, tokens) within the window

    def add_tokens(self, count: int) -> None:
        self.recent_tokens.append((time.perf_counter(), count))

    def output_throughput(self, window_s: float = THROUGHPUT_WINDOW_S) -> float:
        """Output tokens per second over the last `window_s` seconds."""
        now = time.perf_counter()
        while self.recent_tokens and self.recent_tokens[0][0] < now - window_s:
            self.recent_tokens.popleft()
        return sum(count for _, count in self.recent_tokens) / max(min(window_s, now - self.started_at), 1e-3)


@dataclass
class BenchResult:
    config: BenchConfig
    model: str
    records: list[RequestRecord]
    summary: dict
    server: dict | None


def workload(config: BenchConfig) -> list[SampleRequest]:
    samples = config.dataset.sample(config.num_prompts)
    if config.max_tokens is None:
        return samples
    return [replace(s, max_tokens=config.max_tokens) for s in samples]


async def resolve_model(client: httpx.AsyncClient, base_url: str, model: str | None) -> str:
    """The model to ask for: --model checked against /v1/models, or the first one served."""
    url = base_url.rstrip("/") + "/v1/models"
    try:
        response = await client.get(url, timeout=10.0)
    except httpx.HTTPError:
        raise KvtoolError(f"no server answers at {base_url}.", fix=START_A_SERVER) from None
    if response.status_code != 200:
        raise KvtoolError(
            f"{url} answered HTTP {response.status_code}.", fix="Point --url at an OpenAI-compatible server."
        )
    served = [m["id"] for m in response.json().get("data", [])]
    if not served:
        raise KvtoolError(f"{url} lists no models.", fix="Check the server's start-up log.")
    if model is not None and model not in served:
        raise UsageError(
            f"model '{model}' is not served at {base_url}.",
            fix=f"Served: {', '.join(served)}. Pass --model {served[0]}.",
        )
    return model or served[0]


async def run_benchmark(config: BenchConfig, progress: RunProgress | None = None) -> BenchResult:
    samples = workload(config)
    progress = progress or RunProgress(total=len(samples))
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    timeout = httpx.Timeout(config.request_timeout_s, connect=10.0)
    async with httpx.AsyncClient(timeout=timeout, limits=limits) as client:
        model = await resolve_model(client, config.base_url, config.model)
        spec = RequestSpec(config.base_url, config.endpoint, model, config.ignore_eos, config.sampling)
        await warm_up(client, spec, samples, config.warmups)
        watcher = ServerWatcher(client, config.base_url)
        await watcher.start()
        try:
            records, duration_s = await _Run(client, spec, config, progress).send_all(samples)
        finally:
            server = await watcher.stop()
    summary = summarize(records, duration_s, config.slo, config.percentiles)
    return BenchResult(config, model, records, summary, server)


async def warm_up(client: httpx.AsyncClient, spec: RequestSpec, samples: list[SampleRequest], count: int) -> None:
    for i in range(min(count, len(samples))):
        record = await send_request(
            client, spec, samples[i], RequestRecord(i, f"kvtool-bench-warmup-{i}", samples[i].max_tokens)
        )
        if not record.success:
            raise AllRequestsFailed(f"the warm-up request failed: {record.error}")


class _Run:
    """Sends the samples on their arrival schedule, at most --max-concurrency at a time."""

    def __init__(self, client: httpx.AsyncClient, spec: RequestSpec, config: BenchConfig, progress: RunProgress):
        self.client, self.spec, self.config, self.progress = client, spec, config, progress
        self.slots = asyncio.Semaphore(config.max_concurrency) if config.max_concurrency else None
        self.tag = uuid.uuid4().hex[:8]
        self.records: list[RequestRecord] = []
        self.all_failed = asyncio.Event()

    async def send_all(self, samples: list[SampleRequest]) -> tuple[list[RequestRecord], float]:
        times = arrival_times(len(samples), self.config.request_rate, self.config.burstiness, self.config.seed)
        self.progress.started_at = start = time.perf_counter()
        tasks = []
        for i, (sample, at) in enumerate(zip(samples, times)):
            if not await self._wait_until(start, at):
                break
            tasks.append(asyncio.create_task(self._one(i, sample, start)))
        await self._finish(tasks)
        return sorted(self.records, key=lambda r: r.index), time.perf_counter() - start

    async def _wait_until(self, start: float, at: float) -> bool:
        """Sleep until the send time; False when the run should send nothing more."""
        delay = at - (time.perf_counter() - start)
        if delay > 0 and not self.all_failed.is_set():
            waiter = asyncio.ensure_future(self.all_failed.wait())
            await asyncio.wait([waiter], timeout=delay)
            waiter.cancel()
        over_time = self.config.duration_s is not None and time.perf_counter() - start > self.config.duration_s
        return not (over_time or self.all_failed.is_set())

    async def _finish(self, tasks: list[asyncio.Task]) -> None:
        stopper = asyncio.ensure_future(self.all_failed.wait())
        gathered = asyncio.gather(*tasks)
        await asyncio.wait([gathered, stopper], return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if self.all_failed.is_set():
            gathered.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            first = min((r for r in self.records if not r.success), key=lambda r: r.index)
            raise AllRequestsFailed(
                f"every request failed ({len(self.records)} of {self.progress.total} finished); "
                f"the run stopped early. First error: {first.error}"
            )
        await gathered

    async def _one(self, index: int, sample: SampleRequest, start: float) -> None:
        record = RequestRecord(index, f"kvtool-bench-{self.tag}-{index}", sample.max_tokens)
        queued = time.perf_counter()
        if self.slots:
            await self.slots.acquire()
        try:
            record.send_time = time.perf_counter() - start
            record.queue_time = time.perf_counter() - queued
            self.progress.in_flight += 1
            await send_request(self.client, self.spec, sample, record, self.progress.add_tokens)
        finally:
            self.progress.in_flight -= 1
            if self.slots:
                self.slots.release()
        self._record(record)

    def _record(self, record: RequestRecord) -> None:
        self.records.append(record)
        self.progress.done += record.success
        self.progress.failed += not record.success
        limit = min(EARLY_STOP_FAILURES, self.progress.total)
        if self.progress.done == 0 and self.progress.failed >= limit:
            self.all_failed.set()
