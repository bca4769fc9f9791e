"""GenerationJob: one HTTP generation request, answered whole or as a server-sent event stream."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from kvtool.engine.runtime.input_processor import ProcessedRequest
from kvtool.engine.runtime.outputs import CompletionOutput
from kvtool.engine.server.errors import stream_error_body
from kvtool.engine.server.generation import EngineRequest, final_outputs, merged_outputs
from kvtool.engine.server.orca import FORMAT_HEADER, endpoint_load_metrics
from kvtool.engine.server.serving import ServerState, clamp_headers, make_requests, request_id, usage

DISCONNECT_POLL_SECONDS = 0.5
CLIENT_CLOSED_REQUEST = 499  # nginx's status for a client that left before the answer


def sse(data: dict) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


class GenerationJob:
    """Shared by completions and chat; subclasses say how to build the prompt and render choices."""

    id_prefix = ""
    object_name = ""
    chunk_object_name = ""

    def __init__(self, state: ServerState, body, header_id: str | None, processed: list[ProcessedRequest]):
        self.state, self.body, self.header_id = state, body, header_id
        self.id = request_id(header_id, self.id_prefix)
        self.created = int(time.time())
        self.prompt_ids = [request.prompt_token_ids for request in processed]
        self.max_tokens = [request.max_tokens for request in processed]
        self.requests = make_requests(self.id, processed, body.n)

    @property
    def tokenizer(self):
        return self.state.engine.tokenizer

    def headers(self) -> dict[str, str]:
        echoed = header_safe(self.header_id or self.id)
        return {**({"x-request-id": echoed} if echoed else {}), **clamp_headers(self.max_tokens)}

    def response(self, choices: list[dict], usage_: dict | None, chunk: bool = False) -> dict:
        return {
            "id": self.id,
            "object": self.chunk_object_name if chunk else self.object_name,
            "created": self.created,
            "model": self.state.settings.model_name,
            "choices": choices,
            "usage": usage_,
        }

    def usage(self, num_generated: int) -> dict:
        return usage([len(ids) for ids in self.prompt_ids], num_generated)

    def final_choice(self, request: EngineRequest, completion: CompletionOutput) -> dict:
        raise NotImplementedError

    def stream_choices(self, request: EngineRequest, completion: CompletionOutput, first: bool) -> list[dict]:
        raise NotImplementedError

    def on_finished(self, request: EngineRequest, completion: CompletionOutput) -> None:
        pass

    async def full_response(self) -> dict:
        finals = await final_outputs(self.state, self.requests)
        bodies, generated = [], 0
        for request in self.requests:
            for completion in finals[request.prompt_index].outputs:
                self.on_finished(request, completion)
                bodies.append(self.final_choice(request, completion))
                generated += len(completion.token_ids)
        return self.response(bodies, self.usage(generated))

    async def stream(self) -> AsyncIterator[str]:
        generated, started, finished = 0, set(), set()
        try:
            async with contextlib.aclosing(merged_outputs(self.state, self.requests)) as outputs:
                async for request, output in outputs:
                    for completion in output.outputs:
                        index = request.choice_index(completion.index)
                        if index in finished or not (completion.delta_token_ids or completion.finish_reason):
                            continue  # an output of the request that brings nothing new for this sequence
                        generated += len(completion.delta_token_ids)
                        if completion.finish_reason is not None:
                            self.on_finished(request, completion)
                            finished.add(index)
                        running_usage = self.usage(generated) if self.body.continuous_usage() else None
                        for body in self.stream_choices(request, completion, index not in started):
                            yield sse(self.response([body], running_usage, chunk=True))
                        started.add(index)
        except Exception as err:  # the status line is sent already: report in the stream, as vLLM does
            yield sse(stream_error_body(err, self.id))
        if self.body.include_usage():
            yield sse(self.response([], self.usage(generated), chunk=True))
        yield "data: [DONE]\n\n"

    async def respond(self, raw_request: Request) -> Response:
        """The SSE stream, or the whole answer; a client that leaves aborts its engine requests either way."""
        if self.body.stream:
            return StreamingResponse(self.stream(), media_type="text/event-stream", headers=self.headers())
        task = asyncio.ensure_future(self.full_response())
        while not task.done():
            await asyncio.wait({task}, timeout=DISCONNECT_POLL_SECONDS)
            if not task.done() and await raw_request.is_disconnected():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                return Response(status_code=CLIENT_CLOSED_REQUEST)
        load_report = endpoint_load_metrics(raw_request.headers.get(FORMAT_HEADER), self.state.engine.stats())
        return JSONResponse(task.result(), headers=self.headers() | load_report)


def header_safe(request_id: str | None) -> str | None:
    """A body `request_id` an HTTP header cannot carry (not Latin-1) is not echoed; the body still holds it."""
    try:
        return request_id and request_id.encode("latin-1") and request_id
    except UnicodeEncodeError:
        return None
