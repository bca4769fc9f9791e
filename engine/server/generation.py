"""Run the engine requests behind one HTTP request (one per prompt, each with n sequences) and merge their streams.

`state` is the app's ServerState: its engine, metrics and the set of engine requests in flight.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio

from kvtool.engine.runtime.input_processor import ProcessedRequest
from kvtool.engine.runtime.outputs import RequestMetrics, RequestOutput
from kvtool.engine.server.metrics import FinishedRequest, ServerMetrics

_DONE = object()


@dataclass
class EngineRequest:
    """One prompt of the HTTP request, run as one engine request with n sequences (choices i*n .. i*n+n-1)."""

    prompt_index: int
    processed: ProcessedRequest
    request_id: str
    n: int

    def choice_index(self, sequence_index: int) -> int:
        return self.prompt_index * self.n + sequence_index


@dataclass
class RequestTracker:
    """Records one engine request into the server metrics from the engine's own timestamps (RequestMetrics)."""

    metrics: ServerMetrics
    request: EngineRequest
    last_token_time: float | None = None
    num_generated: int = 0
    num_cached_tokens: int = 0
    finish_reason: str = "abort"
    timing: RequestMetrics | None = None

    def on_output(self, output: RequestOutput) -> None:
        timing = self.timing = output.metrics
        if timing is not None and timing.last_token_time is not None and timing.last_token_time != self.last_token_time:
            if self.last_token_time is None:
                self.metrics.observe_first_token(timing.first_token_time - timing.arrival_time)
            else:
                self.metrics.observe_token_gap(timing.last_token_time - self.last_token_time)
            self.last_token_time = timing.last_token_time
        self.num_generated = sum(len(c.token_ids) for c in output.outputs)
        reasons = [c.finish_reason for c in output.outputs if c.finish_reason]
        self.finish_reason = reasons[-1] if output.finished and reasons else self.finish_reason
        self.num_cached_tokens = output.num_cached_tokens

    def on_end(self) -> None:
        timing = self.timing
        end = timing.finished_time if timing and timing.finished_time else time.monotonic()
        start = timing.arrival_time if timing else end
        processed = self.request.processed
        self.metrics.observe_finished(
            FinishedRequest(
                len(processed.prompt_token_ids),
                self.num_generated,
                self.num_cached_tokens,
                self.finish_reason,
                end - start,
                self.request.n,
                processed.max_tokens.value,
                timing,
            )
        )


async def _run_request(state, request: EngineRequest, queue: asyncio.Queue) -> None:
    tracker = RequestTracker(state.metrics, request)
    stream = state.engine.generate(request.processed, None, request.request_id)
    state.active_request_ids.add(request.request_id)
    try:
        async for output in stream:
            tracker.on_output(output)
            await queue.put((request, output))
    except BaseException as err:
        tracker.finish_reason = "abort" if isinstance(err, asyncio.CancelledError) else "error"
        await queue.put((request, err))
        raise
    finally:
        state.active_request_ids.discard(request.request_id)
        await stream.aclose()
        tracker.on_end()


async def merged_outputs(state, requests: list[EngineRequest]) -> AsyncIterator[tuple[EngineRequest, RequestOutput]]:
    """Yield (request, output) from all engine requests as they arrive; closing this aborts every one left."""
    queue: asyncio.Queue = asyncio.Queue()
    tasks = [asyncio.create_task(_run_request(state, r, queue)) for r in requests]
    for task in tasks:
        task.add_done_callback(lambda _: queue.put_nowait(_DONE))
    try:
        remaining = len(tasks)
        while remaining:
            item = await queue.get()
            if item is _DONE:
                remaining -= 1
                continue
            request, output = item
            if isinstance(output, BaseException):
                raise output
            yield request, output
    finally:
        with anyio.CancelScope(shield=True):  # a client that went away cancels us; the cleanup must still run
            await _cancel(tasks)


async def _cancel(tasks: list[asyncio.Task]) -> None:
    """Cancel the engine requests' tasks: a generate() that is cancelled, at any point, aborts its request."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def final_outputs(state, requests: list[EngineRequest]) -> dict[int, RequestOutput]:
    """The last output of every engine request, by prompt index."""
    last: dict[int, RequestOutput] = {}
    stream = merged_outputs(state, requests)
    try:
        async for request, output in stream:
            last[request.prompt_index] = output
    finally:
        await stream.aclose()
    return last
