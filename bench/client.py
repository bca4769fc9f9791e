"""One streamed request to an OpenAI-compatible server, timed chunk by chunk.

Every request asks for `stream_options.include_usage` (token counts come from the server's usage,
not from counting chunks) and `continuous_usage_stats` (vLLM's running count on each chunk, which
tells how many tokens a chunk carried).
"""

import json
import time
from dataclasses import dataclass, field

import httpx

from kvtool.bench.datasets import SampleRequest

ENDPOINT_PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


@dataclass
class RequestRecord:
    index: int
    request_id: str
    max_tokens: int
    send_time: float = 0.0  # seconds from the start of the run
    queue_time: float = 0.0  # seconds spent waiting for a --max-concurrency slot
    success: bool = False
    error: str = ""
    prompt_tokens: int = 0
    output_tokens: int = 0
    usage_reported: bool = False
    finish_reason: str | None = None
    ttft: float | None = None
    latency: float = 0.0
    chunk_times: list[float] = field(default_factory=list)  # seconds from send, one per chunk with tokens
    chunk_tokens: list[int] = field(default_factory=list)  # tokens each of those chunks carried
    generated_text: str = ""


@dataclass(frozen=True)
class RequestSpec:
    base_url: str
    endpoint: str  # "chat" | "completions"
    model: str
    ignore_eos: bool = False
    temperature: float = 0.0
    extra_body: dict | None = None  # merged into every payload (structured outputs, sampling fields)


def build_payload(spec: RequestSpec, sample: SampleRequest) -> dict:
    payload = {
        "model": spec.model,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "temperature": spec.temperature,
    }
    if spec.endpoint == "chat":
        payload["messages"] = [{"role": "user", "content": sample.prompt}]
        payload["max_completion_tokens"] = sample.max_tokens
    else:
        payload["prompt"] = sample.prompt
        payload["max_tokens"] = sample.max_tokens
    if spec.ignore_eos:
        payload["ignore_eos"] = True
    return {**payload, **(spec.extra_body or {})}


async def send_request(
    client: httpx.AsyncClient, spec: RequestSpec, sample: SampleRequest, record: RequestRecord, on_tokens=None
) -> RequestRecord:
    """Stream one request into `record`; `on_tokens(n)` is called as chunks arrive (for live displays)."""
    url = spec.base_url.rstrip("/") + ENDPOINT_PATHS[spec.endpoint]
    headers = {"x-request-id": record.request_id}
    start = time.perf_counter()
    stream = _ChunkStream(start, on_tokens)
    try:
        async with client.stream("POST", url, json=build_payload(spec, sample), headers=headers) as response:
            if response.status_code != 200:
                record.error = f"HTTP {response.status_code}: {error_message(await response.aread())}"
                return record
            async for line in response.aiter_lines():
                if stream.feed(line):
                    break
    except httpx.HTTPError as err:
        record.error = f"{type(err).__name__}: {err or 'no detail'}"
        return record
    record.latency = time.perf_counter() - start
    return stream.finish(record)


class _ChunkStream:
    """Reads SSE lines; keeps the time and running token count of each chunk that carried tokens."""

    def __init__(self, start: float, on_tokens=None):
        self.start, self.on_tokens = start, on_tokens
        self.times: list[float] = []
        self.texts: list[str] = []
        self.running_counts: list[int | None] = []
        self.last_count = 0
        self.usage: dict | None = None
        self.finish_reason: str | None = None
        self.error = ""

    def feed(self, line: str) -> bool:
        """Take one SSE line; True at the end of the stream."""
        if not line.startswith("data:"):
            return False
        data = line[5:].strip()
        if data == "[DONE]":
            return True
        try:
            chunk = json.loads(data)
        except ValueError:
            self.error = f"unreadable stream chunk: {data[:80]}"
            return True
        self._take_chunk(chunk, time.perf_counter() - self.start)
        return bool(self.error)

    def _take_chunk(self, chunk: dict, now: float) -> None:
        if "error" in chunk:
            self.error = error_message(chunk)
            return
        usage = chunk.get("usage")
        if usage:
            self.usage = usage
        choices = chunk.get("choices") or []
        text = "".join(_choice_text(c) for c in choices)
        self.finish_reason = next((c["finish_reason"] for c in choices if c.get("finish_reason")), self.finish_reason)
        count = usage.get("completion_tokens") if usage and choices else None
        if text or (count is not None and count > self.last_count):
            self.times.append(now)
            self.texts.append(text)
            self.running_counts.append(count)
            if self.on_tokens:
                self.on_tokens(count - self.last_count if count is not None else 1)
        self.last_count = count if count is not None else self.last_count

    def finish(self, record: RequestRecord) -> RequestRecord:
        record.finish_reason = self.finish_reason
        record.generated_text = "".join(self.texts)
        if self.error or not self.times:
            record.error = self.error or "the stream ended without a single token"
            return record
        record.usage_reported = self.usage is not None
        record.prompt_tokens = (self.usage or {}).get("prompt_tokens", 0)
        record.output_tokens = (self.usage or {}).get("completion_tokens", len(self.times))
        record.chunk_times = self.times
        record.chunk_tokens = tokens_per_chunk(self.running_counts, self.texts, record.output_tokens)
        record.ttft = self.times[0]
        record.success = True
        return record


def _choice_text(choice: dict) -> str:
    delta = choice.get("delta")
    if delta is not None:
        return (delta.get("content") or "") + (delta.get("reasoning_content") or "")
    return choice.get("text") or ""


def tokens_per_chunk(running_counts: list[int | None], texts: list[str], total: int) -> list[int]:
    """How many tokens each chunk carried.

    From the server's running count when every chunk has one; one each when the chunk count matches
    the usage total; otherwise the total shared out in proportion to each chunk's characters.
    """
    if running_counts and all(c is not None for c in running_counts):
        return [b - a for a, b in zip([0] + running_counts[:-1], running_counts)]
    if len(texts) == total:
        return [1] * total
    weights = [len(t) for t in texts]
    return _apportion(total, weights) if sum(weights) else _apportion(total, [1] * len(texts))


def _apportion(total: int, weights: list[int]) -> list[int]:
    shares = [total * w / sum(weights) for w in weights]
    counts = [int(s) for s in shares]
    by_remainder = sorted(range(len(shares)), key=lambda i: counts[i] - shares[i])
    for i in by_remainder[: total - sum(counts)]:
        counts[i] += 1
    return counts


def error_message(body: bytes | dict) -> str:
    """The message from either error shape (flat, vLLM <= 0.10.0; nested, later) or the raw body."""
    try:
        data = json.loads(body) if isinstance(body, bytes) else body
    except ValueError:
        return body.decode(errors="replace")[:300]
    if isinstance(data, dict):
        inner = data.get("error") if isinstance(data.get("error"), dict) else data
        if "message" in inner or "detail" in inner:
            return str(inner.get("message") or inner.get("detail"))
    return str(data)[:300]
