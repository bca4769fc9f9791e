"""GenerationJob: one HTTP generation request, answered whole or as a server-sent event stream."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from kvtool.engine.runtime.outputs import CompletionOutput
from kvtool.engine.server.errors import error_body
from kvtool.engine.server.generation import Choice, final_outputs, merged_outputs
from kvtool.engine.server.serving import MaxTokens, ServerState, clamp_headers, make_choices, request_id, usage
from kvtool.errors import KvtoolError

logger = logging.getLogger("kvtool.serve")
DISCONNECT_POLL_SECONDS = 0.5
CLIENT_CLOSED_REQUEST = 499  # nginx's status for a client that left before the answer


def sse(data: dict) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


class GenerationJob:
    """Shared by completions and chat; subclasses say how to build the prompt and render choices."""

    id_prefix = ""
    object_name = ""
    chunk_object_name = ""

    def __init__(self, state: ServerState, body, header_id: str | None, prompt_ids: list[list[int]],
                 max_tokens: list[MaxTokens], num_logprobs: int | None, structured_outputs=None):
        self.state, self.body, self.header_id = state, body, header_id
        self.id = request_id(header_id, self.id_prefix)
        self.created = int(time.time())
        self.prompt_ids, self.max_tokens = prompt_ids, max_tokens
        self.choices = make_choices(self.id, prompt_ids, body.n,
                                    lambda i: body.to_sampling_params(max_tokens[i].value, num_logprobs,
                                                                      structured_outputs))

    @property
    def tokenizer(self):
        return self.state.engine.tokenizer

    def headers(self) -> dict[str, str]:
        return {"x-request-id": self.header_id or self.id, **clamp_headers(self.max_tokens)}

    def response(self, choices: list[dict], usage_: dict | None, chunk: bool = False) -> dict:
        return {"id": self.id, "object": self.chunk_object_name if chunk else self.object_name,
                "created": self.created, "model": self.state.settings.model_name, "choices": choices, "usage": usage_}

    def usage(self, num_generated: int) -> dict:
        return usage([len(ids) for ids in self.prompt_ids], num_generated)

    def final_choice(self, choice: Choice, completion: CompletionOutput) -> dict:
        raise NotImplementedError

    def stream_choices(self, choice: Choice, completion: CompletionOutput, first: bool) -> list[dict]:
        raise NotImplementedError

    def on_finished(self, choice: Choice, completion: CompletionOutput) -> None:
        pass

    async def full_response(self) -> dict:
        finals = await final_outputs(self.state, self.choices)
        bodies, generated = [], 0
        for choice in self.choices:
            completion = finals[choice.index].outputs[0]
            self.on_finished(choice, completion)
            bodies.append(self.final_choice(choice, completion))
            generated += len(completion.token_ids)
        return self.response(bodies, self.usage(generated))

    async def stream(self) -> AsyncIterator[str]:
        generated, started = 0, set()
        try:
            async with contextlib.aclosing(merged_outputs(self.state, self.choices)) as outputs:
                async for choice, output in outputs:
                    completion = output.outputs[0]
                    generated += len(completion.delta_token_ids)
                    if completion.finish_reason is not None:
                        self.on_finished(choice, completion)
                    running_usage = self.usage(generated) if self.body.continuous_usage() else None
                    for body in self.stream_choices(choice, completion, choice.index not in started):
                        yield sse(self.response([body], running_usage, chunk=True))
                    started.add(choice.index)
        except KvtoolError as err:  # the status line is sent already: report in the stream, as vLLM does
            yield sse(error_body(err.message, "BadRequestError", 400, getattr(err, "param", None)))
        except Exception as err:
            logger.exception("Request %s failed while streaming", self.id)
            yield sse(error_body(f"{type(err).__name__}: {err}", "InternalServerError", 500))
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
        return JSONResponse(task.result(), headers=self.headers())
