"""Run the engine requests behind one HTTP request (n choices, batched prompts) and merge their streams.

`state` is the app's ServerState: its engine, metrics and the set of engine requests in flight.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio

from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.runtime.outputs import RequestOutput
from kvtool.engine.server.metrics import FinishedRequest, ServerMetrics

_DONE = object()


@dataclass
class Choice:
    """One engine request: choice `index` of the response."""

    index: int
    prompt_index: int
    prompt_token_ids: list[int]
    params: SamplingParams
    request_id: str
    n: int = 1  # the request's n, for vllm:request_params_n


@dataclass
class RequestTracker:
    """Records one engine request's latencies into the server metrics as its outputs arrive."""

    metrics: ServerMetrics
    num_prompt_tokens: int
    arrival: float
    choice: Choice | None = None
    last_token_time: float | None = None
    num_generated: int = 0
    finish_reason: str = "abort"
    last: RequestOutput | None = None

    def on_output(self, output: RequestOutput) -> None:
        completion = output.outputs[0]
        if completion.delta_token_ids:
            now = time.monotonic()
            if self.last_token_time is None:
                self.metrics.observe_first_token(now - self.arrival)
            else:
                self.metrics.observe_token_gap(now - self.last_token_time)
            self.last_token_time = now
        self.num_generated = len(completion.token_ids)
        self.finish_reason = completion.finish_reason or self.finish_reason
        self.last = output

    def on_end(self) -> None:
        last, choice = self.last, self.choice
        self.metrics.observe_finished(FinishedRequest(
            self.num_prompt_tokens, self.num_generated, last.num_cached_tokens if last else 0, self.finish_reason,
            time.monotonic() - self.arrival, choice.n if choice else 1, choice.params.max_tokens if choice else None,
            last.metrics if last else None))


async def _run_choice(state, choice: Choice, queue: asyncio.Queue) -> None:
    tracker = RequestTracker(state.metrics, len(choice.prompt_token_ids), time.monotonic(), choice)
    stream = state.engine.generate(choice.prompt_token_ids, choice.params, choice.request_id)
    state.active_request_ids.add(choice.request_id)
    try:
        async for output in stream:
            tracker.on_output(output)
            await queue.put((choice, output))
    except BaseException as err:
        await queue.put((choice, err))
        raise
    finally:
        state.active_request_ids.discard(choice.request_id)
        await stream.aclose()
        tracker.on_end()


async def merged_outputs(state, choices: list[Choice]) -> AsyncIterator[tuple[Choice, RequestOutput]]:
    """Yield (choice, output) from all engine requests as they arrive; closing this aborts every one left."""
    queue: asyncio.Queue = asyncio.Queue()
    tasks = [asyncio.create_task(_run_choice(state, c, queue)) for c in choices]
    for task in tasks:
        task.add_done_callback(lambda _: queue.put_nowait(_DONE))
    try:
        remaining = len(tasks)
        while remaining:
            item = await queue.get()
            if item is _DONE:
                remaining -= 1
                continue
            choice, output = item
            if isinstance(output, BaseException):
                raise output
            yield choice, output
    finally:
        with anyio.CancelScope(shield=True):  # a client that went away cancels us; the cleanup must still run
            await _cancel(state.engine, tasks, choices)


async def _cancel(engine, tasks: list[asyncio.Task], choices: list[Choice]) -> None:
    unfinished = [c for t, c in zip(tasks, choices) if not t.done()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for choice in unfinished:
        await engine.abort(choice.request_id)


async def final_outputs(state, choices: list[Choice]) -> dict[int, RequestOutput]:
    """The last output of every choice, by choice index."""
    last: dict[int, RequestOutput] = {}
    stream = merged_outputs(state, choices)
    try:
        async for choice, output in stream:
            last[choice.index] = output
    finally:
        await stream.aclose()
    return last
