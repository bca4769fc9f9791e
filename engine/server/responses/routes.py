"""POST /v1/responses (OpenAI's Responses API as vLLM 0.33 serves it), GET /v1/responses/{id} and its cancel.

A Responses request runs as a chat request (input.py builds it): the chat template, tools, structured
outputs and generation are the chat route's. What differs is the answer: output items and usage in the response
object, or a stream of typed events, and the store of store.py (previous_response_id, background).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from openai.types.responses import Response as ResponseObject

from kvtool.engine.runtime.outputs import CompletionOutput, RequestOutput
from kvtool.engine.server.chat.completions import ChatJob
from kvtool.engine.server.chat.tool_stream import ToolCallStream
from kvtool.engine.server.chat.tools import tool_plan
from kvtool.engine.server.constraints import precompile, structured_outputs_params
from kvtool.engine.server.errors import APIError, stream_error_body
from kvtool.engine.server.generation import final_outputs, merged_outputs
from kvtool.engine.server.openapi import streamed
from kvtool.engine.server.request_fields import NOT_IMPLEMENTED_RESPONSES, check_request_fields
from kvtool.engine.server.responses.events import ResponseEvents
from kvtool.engine.server.responses.input import ResponsesChatRequest, chat_request, conversation, previous_turns
from kvtool.engine.server.responses.output import (
    ResponseEnvelope,
    item_status,
    new_id,
    output_items,
    raw_messages,
    usage,
)
from kvtool.engine.server.responses.protocol import ResponsesRequest
from kvtool.engine.server.responses.store import EventLog, ResponsesStore, store_enabled
from kvtool.engine.server.responses.tools import ToolNames, echoed_tool_choice, tool_names
from kvtool.engine.server.serving import ServerState
from kvtool.engine.sizing import messages

SSE = "text/event-stream"


@dataclass
class Turn:
    """One Responses request as it runs: the request, the chat request it runs as, and where it is kept."""

    request: ResponsesRequest
    chat: ResponsesChatRequest
    conversation: list[dict]
    names: ToolNames
    store: ResponsesStore

    @property
    def stored(self) -> bool:
        return bool(self.request.store) and self.store.enabled


class ResponsesJob(ChatJob):
    id_prefix = "resp"

    def __init__(self, state: ServerState, turn: Turn, header_id: str | None, tools, constraint):
        super().__init__(state, turn.chat, header_id, tools, constraint, [turn.chat.messages])
        self.turn, self.request = turn, turn.request
        self.tool_stream = ToolCallStream(tools, turn.chat.parallel_tool_calls)
        self.pending_logprobs: list[dict] = []  # of tokens whose text is not sent yet
        processed = self.requests[0].processed
        self.envelope = ResponseEnvelope(
            self.request,
            self.request.request_id or new_id("resp"),
            state.settings.model_name,
            processed.params,
            processed.max_tokens.value,
            echoed_tool_choice(turn.chat.tool_choice),
        )

    async def full_response(self) -> dict:
        output = (await final_outputs(self.state, self.requests))[0]
        choice = self.final_choice(self.requests[0], output, output.outputs[0])
        return self.finish(output_items(choice, self.turn.names), output)

    async def stream(self) -> AsyncIterator[str]:
        events, last = ResponseEvents(self.turn.names), None
        started = self.envelope.body("in_progress", [])
        yield events.envelope("response.created", started)
        yield events.envelope("response.in_progress", started)
        try:
            async with contextlib.aclosing(merged_outputs(self.state, self.requests)) as outputs:
                async for _, last in outputs:
                    for event in self._events(events, last.outputs[0]):
                        yield event
        except Exception as err:  # the status line is sent already: report in the stream, as vLLM does
            yield f"event: error\ndata: {json.dumps(stream_error_body(err, self.id), ensure_ascii=False)}\n\n"
            return
        for event in events.close(item_status(last.outputs[0].finish_reason)):
            yield event
        final = self.finish(events.items, last)
        yield events.envelope(f"response.{'incomplete' if final['status'] == 'incomplete' else 'completed'}", final)

    def _events(self, events: ResponseEvents, completion: CompletionOutput) -> list[str]:
        """The events of one engine output; logprobs go with the first text that follows their tokens (a token
        whose text is held back keeps its logprobs for the next text)."""
        logprobs = self.logprobs(completion.delta_token_ids, completion.delta_logprobs)
        self.pending_logprobs += logprobs["content"] if logprobs else []
        sent = []
        for delta in self._deltas(completion):
            if delta.get("content"):
                sent += events.delta(delta, self.pending_logprobs)
                self.pending_logprobs = []
            else:
                sent += events.delta(delta, [])
        return sent

    def _deltas(self, completion: CompletionOutput) -> list[dict]:
        if self.tools.mode != "none":
            return self.tool_stream.deltas(completion.delta_text, completion.finish_reason)
        return [{"content": completion.delta_text}] if completion.delta_text else []

    def finish(self, items: list[dict], output: RequestOutput) -> dict:
        """The finished response, kept when the request asks for it (and the store is on)."""
        completion = output.outputs[0]
        status = "incomplete" if completion.finish_reason == "length" else "completed"
        tokens = usage(len(output.prompt_token_ids), len(completion.token_ids), output.num_cached_tokens)
        raw = (None, None)
        if self.request.enable_response_messages:
            raw = (
                raw_messages(output.prompt or "", output.prompt_token_ids),
                raw_messages(completion.text, completion.token_ids),
            )
        body = self.envelope.body(status, items, tokens, raw)
        if self.turn.stored:
            self.turn.store.save(body)
        return body

    def start_background(self) -> Response:
        """Answer at once with the queued response; the generation goes on without the client."""
        store, queued = self.turn.store, self.envelope.body("queued", [])
        store.save(queued)
        if not self.request.stream:
            store.run_in_background(queued["id"], self.full_response())
            return JSONResponse(queued, headers=self.headers())
        log = store.event_logs[queued["id"]] = EventLog()
        store.run_in_background(queued["id"], self._log_events(log))
        return StreamingResponse(log.read(), media_type=SSE, headers=self.headers())

    async def _log_events(self, log: EventLog) -> None:
        async for event in self.stream():
            log.add(event)


async def create_response(state: ServerState, store: ResponsesStore, body: ResponsesRequest, raw_request: Request):
    state.check_model(body.model)
    check_request_fields(body, NOT_IMPLEMENTED_RESPONSES)
    _check_modes(body, store)
    history = previous_turns(store, body.previous_response_id)
    names = tool_names(body.tools)
    chat_messages = conversation(body, history)
    chat = chat_request(body, chat_messages, names)
    tools = tool_plan(chat, state.settings.tool_call_parser)
    constraint = structured_outputs_params(chat.structured_outputs, chat.response_format, tools.schema(chat))
    await precompile(state.engine.input_processor, constraint)
    turn = Turn(body, chat, chat_messages, names, store)
    job = ResponsesJob(state, turn, raw_request.headers.get("x-request-id"), tools, constraint)
    if turn.stored:
        store.conversations[job.envelope.response_id] = chat_messages
    if body.background:
        return job.start_background()
    return await job.respond(raw_request)


def _check_modes(body: ResponsesRequest, store: ResponsesStore) -> None:
    if body.prompt is not None:
        raise APIError(messages.PROMPT_TEMPLATE_NOT_SUPPORTED, param="prompt")
    if body.background and not body.store:
        raise APIError(messages.BACKGROUND_WITHOUT_STORE, param="background")
    if body.background and not store.enabled:
        raise APIError(messages.BACKGROUND_STORE_DISABLED, type="invalid_request_error", param="background")


def add_responses_routes(app: FastAPI, state: ServerState) -> ResponsesStore:
    store = ResponsesStore(store_enabled())

    @app.post("/v1/responses", response_model=None, responses=streamed(ResponseObject, "The response"))
    async def create(body: ResponsesRequest, raw_request: Request):
        return await create_response(state, store, body, raw_request)

    @app.get("/v1/responses/{response_id}", response_model=None, responses=streamed(ResponseObject, "The response"))
    async def retrieve(response_id: str, starting_after: int | None = None, stream: bool | None = False):
        """A stored response; with stream=true, a background stream's events (after `starting_after`)."""
        response = store.get(response_id)
        if stream:
            return StreamingResponse(store.events(response_id, starting_after), media_type=SSE)
        return JSONResponse(response)

    @app.post("/v1/responses/{response_id}/cancel", response_model=ResponseObject)
    async def cancel(response_id: str):
        """Cancel a background response that is queued or running."""
        return JSONResponse(await store.cancel(response_id))

    return store
