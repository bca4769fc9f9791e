"""Stored responses: GET /v1/responses/{id}, cancel, previous_response_id and background mode.

As vLLM 0.33 (VLLM_ENABLE_RESPONSES_API_STORE=1): responses are kept in memory for the server's life, with the
conversation each one answered (for the next turn) and, for a background stream, its events (for a client that
reads them again from GET ...?stream=true). Without the variable nothing is kept: `store` is ignored, and
background mode is refused.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from http import HTTPStatus

from kvtool.engine.server.errors import APIError
from kvtool.engine.sizing import messages

logger = logging.getLogger("kvtool.serve")
STORE_ENV = "VLLM_ENABLE_RESPONSES_API_STORE"
UNFINISHED = ("queued", "in_progress")


def store_enabled() -> bool:
    """vLLM's switch, read as vLLM reads it (an integer: 0 or 1)."""
    return bool(int(os.environ.get(STORE_ENV, "0")))


@dataclass
class EventLog:
    """A background stream's events, sent and to come, for any number of readers."""

    events: list[str] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    done: bool = False

    def add(self, event: str) -> None:
        self.events.append(event)
        self.changed.set()

    def finish(self) -> None:
        self.done = True
        self.changed.set()

    async def read(self, start: int = 0) -> AsyncIterator[str]:
        at = start
        while True:
            while at < len(self.events):
                yield self.events[at]
                at += 1
            if self.done:
                return
            self.changed.clear()
            await self.changed.wait()


@dataclass
class ResponsesStore:
    enabled: bool
    responses: dict[str, dict] = field(default_factory=dict)
    conversations: dict[str, list[dict]] = field(default_factory=dict)
    event_logs: dict[str, EventLog] = field(default_factory=dict)
    tasks: dict[str, asyncio.Task] = field(default_factory=dict)

    def __post_init__(self):
        if self.enabled:
            logger.warning(
                "%s is set: every stored response stays in memory until the server stops (as in vLLM).", STORE_ENV
            )

    def get(self, response_id: str) -> dict:
        response = self.responses.get(response_id)
        if response is None:
            message = messages.RESPONSE_NOT_FOUND.format(response_id=response_id)
            raise APIError(message, HTTPStatus.NOT_FOUND, "invalid_request_error", "response_id")
        return response

    def save(self, response: dict) -> None:
        """Keep (or update) a response, unless it was cancelled meanwhile."""
        stored = self.responses.get(response["id"])
        if stored is None or stored["status"] != "cancelled":
            self.responses[response["id"]] = response

    def run_in_background(self, response_id: str, work) -> None:
        task = asyncio.create_task(self._run(response_id, work), name=f"response {response_id}")
        self.tasks[response_id] = task
        task.add_done_callback(lambda _: self.tasks.pop(response_id, None))

    async def _run(self, response_id: str, work) -> None:
        """Run a background response; one that ends without its answer (an error) is failed."""
        try:
            await work
        except Exception:
            logger.exception("Background response %s failed", response_id)
        finally:
            if response_id in self.event_logs:
                self.event_logs[response_id].finish()
        if self.responses[response_id]["status"] in UNFINISHED:
            self.responses[response_id] = {**self.responses[response_id], "status": "failed"}

    def events(self, response_id: str, starting_after: int | None) -> AsyncIterator[str]:
        log = self.event_logs.get(response_id)
        if log is None:
            message = messages.RESPONSE_NOT_STREAMED.format(response_id=response_id)
            raise APIError(message, param="response_id")
        return log.read(0 if starting_after is None else starting_after + 1)

    async def cancel(self, response_id: str) -> dict:
        response = self.get(response_id)
        if response["status"] not in UNFINISHED:
            raise APIError(messages.CANNOT_CANCEL_SYNCHRONOUS, type="invalid_request_error", param="response_id")
        self.responses[response_id] = response = {**response, "status": "cancelled"}
        task = self.tasks.get(response_id)
        if task is not None:
            task.cancel()  # ends the engine request: the generation's cleanup aborts it
            await asyncio.gather(task, return_exceptions=True)
        return response

    async def shutdown(self) -> None:
        for task in list(self.tasks.values()):
            task.cancel()
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)
