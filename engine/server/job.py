"""GenerationJob: one HTTP generation request, answered whole or as a server-sent event stream.

Shapes as vLLM 0.33 writes them: a whole answer carries every field of vLLM's response model, null when unset
(clients read them as attributes); a streamed chunk carries the fields vLLM sets on it, and the final usage
chunk no null field at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from kvtool.engine.runtime.input_processor import ProcessedRequest
from kvtool.engine.runtime.outputs import CompletionOutput, RequestOutput
from kvtool.engine.server.beam_search import beam_search_finals, beam_search_outputs, beam_search_params
from kvtool.engine.server.errors import stream_error_body
from kvtool.engine.server.generation import EngineRequest, final_outputs, merged_outputs
from kvtool.engine.server.logprobs import TokenNames
from kvtool.engine.server.orca import FORMAT_HEADER, endpoint_load_metrics
from kvtool.engine.server.serving import ServerState, clamp_headers, make_requests, request_id
from kvtool.engine.server.usage import request_metrics, running_usage, usage, without_nulls

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
        self.options = state.settings.output
        self.id = request_id(header_id, self.id_prefix)
        self.created = int(time.time())
        self.prompt_ids = [request.prompt_token_ids for request in processed]
        self.max_tokens = [request.max_tokens for request in processed]
        self.requests = make_requests(self.id, processed, body.n)
        as_ids = body.return_tokens_as_token_ids  # the request's choice, else the server's
        as_ids = self.options.return_tokens_as_token_ids if as_ids is None else as_ids
        self.names = TokenNames(state.engine.tokenizer, as_ids)
        self.continuous_usage = False

    @property
    def tokenizer(self):
        return self.state.engine.tokenizer

    @property
    def return_token_ids(self) -> bool:
        return bool(self.body.return_token_ids)

    def headers(self) -> dict[str, str]:
        echoed = header_safe(self.header_id or self.id)
        return {**({"x-request-id": echoed} if echoed else {}), **clamp_headers(self.max_tokens)}

    def response(self, choices: list[dict], finals: list[RequestOutput], num_generated: int) -> dict:
        """The whole answer, every field of vLLM's response model present."""
        last = finals[-1]
        return {
            **self.chunk(choices),
            "object": self.object_name,
            "service_tier": None,
            "system_fingerprint": None,
            "usage": usage(sum(map(len, self.prompt_ids)), num_generated, self.cached_tokens(last)),
            **self.response_fields(finals),
            "kv_transfer_params": None,
            "ec_transfer_params": None,
            "metrics": self.metrics(last, num_generated),
        }

    def chunk(self, choices: list[dict], usage_: dict | None = None, **fields) -> dict:
        body = {
            "id": self.id,
            "object": self.chunk_object_name,
            "created": self.created,
            "model": self.state.settings.model_name,
            "choices": choices,
            **fields,
        }
        return body if usage_ is None else {**body, "usage": usage_}

    def running_usage(self, request: EngineRequest, num_generated: int) -> dict | None:
        """continuous_usage_stats: this choice's prompt and its tokens so far, in every chunk."""
        if not self.continuous_usage:
            return None
        return running_usage(len(request.processed.prompt_token_ids), num_generated)

    def cached_tokens(self, output: RequestOutput | None) -> int | None:
        return output.num_cached_tokens if self.options.enable_prompt_tokens_details and output else None

    def metrics(self, output: RequestOutput | None, num_generated: int) -> dict | None:
        """vLLM's per-request metrics, for one prompt and one sequence (whose timing they are) only."""
        if not self.options.enable_per_request_metrics or len(self.requests) != 1 or self.body.n != 1:
            return None
        return request_metrics(output.metrics if output else None, num_generated)

    def response_fields(self, finals: list[RequestOutput]) -> dict:
        """The route's own top-level fields of a whole answer."""
        return {}

    def final_choice(self, request: EngineRequest, output: RequestOutput, completion: CompletionOutput) -> dict:
        raise NotImplementedError

    def stream_chunks(
        self, request: EngineRequest, output: RequestOutput, completion: CompletionOutput, first: bool, count: int
    ) -> list[dict]:
        """The chunks for one output of a sequence; `count` is its tokens so far."""
        raise NotImplementedError

    def on_finished(self, request: EngineRequest, completion: CompletionOutput) -> None:
        pass

    def outputs(self) -> AsyncIterator[tuple[EngineRequest, RequestOutput]]:
        """(request, output) as they come, from the engine requests or from their beam searches."""
        if self.body.use_beam_search:
            return beam_search_outputs(self.state, self.requests, self.beam_search_params)
        return merged_outputs(self.state, self.requests)

    async def final_outputs(self) -> dict[int, RequestOutput]:
        if self.body.use_beam_search:
            return await beam_search_finals(self.state, self.requests, self.beam_search_params)
        return await final_outputs(self.state, self.requests)

    def beam_search_params(self, request: EngineRequest):
        return beam_search_params(self.body, request.processed.max_tokens.value)

    async def full_response(self) -> dict:
        by_prompt = await self.final_outputs()
        bodies, generated = [], 0
        for request in self.requests:
            output = by_prompt[request.prompt_index]
            for completion in output.outputs:
                self.on_finished(request, completion)
                bodies.append(self.final_choice(request, output, completion))
                generated += len(completion.token_ids)
        return self.response(bodies, [by_prompt[r.prompt_index] for r in self.requests], generated)

    async def stream(self) -> AsyncIterator[str]:
        include_usage, self.continuous_usage = self.body.usage_in_stream(self.options.enable_force_include_usage)
        counts: dict[int, int] = {}
        finished, first, last = set(), None, None
        try:
            async with contextlib.aclosing(self.outputs()) as outputs:
                async for request, output in outputs:
                    first, last = first or output, output
                    for completion in output.outputs:
                        index = request.choice_index(completion.index)
                        if index in finished or not (completion.delta_token_ids or completion.finish_reason):
                            continue  # an output of the request that brings nothing new for this sequence
                        started = index in counts
                        counts[index] = counts.get(index, 0) + len(completion.delta_token_ids)
                        if completion.finish_reason is not None:
                            self.on_finished(request, completion)
                            finished.add(index)
                        for body in self.stream_chunks(request, output, completion, not started, counts[index]):
                            yield sse(body)
            if include_usage:
                yield sse(self.usage_chunk(first, last, sum(counts.values())))
        except Exception as err:  # the status line is sent already: report in the stream, as vLLM does
            yield sse(stream_error_body(err, self.id))
        yield "data: [DONE]\n\n"

    def usage_chunk(self, first: RequestOutput | None, last: RequestOutput | None, num_generated: int) -> dict:
        """The last chunk: no choices, the whole usage, and the per-request metrics (vLLM drops its nulls)."""
        whole = usage(sum(map(len, self.prompt_ids)), num_generated, self.cached_tokens(first))
        return without_nulls(self.chunk([], whole, metrics=self.metrics(last, num_generated)))

    async def respond(self, raw_request: Request) -> Response:
        """The SSE stream, or the whole answer; a client that leaves aborts its engine requests either way."""
        if self.body.stream:
            return StreamingResponse(self.stream(), media_type="text/event-stream", headers=self.headers())
        answer, left = asyncio.ensure_future(self.full_response()), asyncio.ensure_future(client_left(raw_request))
        try:
            await asyncio.wait({answer, left}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            left.cancel()
            answer.cancel()  # nothing to do once it is answered
            await asyncio.gather(answer, return_exceptions=True)
        if answer.cancelled():
            return Response(status_code=CLIENT_CLOSED_REQUEST)
        load_report = endpoint_load_metrics(raw_request.headers.get(FORMAT_HEADER), self.state.engine.stats())
        return JSONResponse(answer.result(), headers=self.headers() | load_report)


async def client_left(raw_request: Request) -> None:
    """Returns when the client closes the connection (the body was read already, so nothing else arrives)."""
    while (await raw_request.receive())["type"] != "http.disconnect":
        pass


def header_safe(request_id: str | None) -> str | None:
    """A body `request_id` an HTTP header cannot carry (not Latin-1) is not echoed; the body still holds it."""
    try:
        return request_id and request_id.encode("latin-1") and request_id
    except UnicodeEncodeError:
        return None
