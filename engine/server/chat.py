"""POST /v1/chat/completions: messages rendered with the tokenizer's chat template."""

from __future__ import annotations

from fastapi import Request

from kvtool.engine.runtime.outputs import CompletionOutput
from kvtool.engine.server.constraints import compile_constraint, structured_outputs_params
from kvtool.engine.server.errors import APIError
from kvtool.engine.server.generation import Choice
from kvtool.engine.server.job import GenerationJob
from kvtool.engine.server.logprobs import chat_logprobs
from kvtool.engine.server.protocol import ChatCompletionRequest, ChatMessage
from kvtool.engine.server.request_fields import NOT_IMPLEMENTED_CHAT, check_request_fields
from kvtool.engine.server.serving import ServerState, resolve_max_tokens
from kvtool.engine.server.tool_stream import ToolCallStream
from kvtool.engine.server.tools import finish_reason, tool_plan


def render_chat(tokenizer, messages: list[ChatMessage], add_generation_prompt: bool = True, **kwargs) -> str:
    """The conversation as the chat template writes it; kwargs reach the template (tools, documents, ...)."""
    conversation = [m.as_template_message() for m in messages]
    try:
        return tokenizer.apply_chat_template(conversation, add_generation_prompt=add_generation_prompt,
                                             tokenize=False, **kwargs)
    except Exception as err:  # jinja raises for conversations a template refuses (e.g. roles out of order)
        raise APIError(f"The chat template cannot render these messages: {err}", param="messages") from err


def template_kwargs(body: ChatCompletionRequest, tools: list[dict]) -> dict:
    """What vLLM passes to the chat template besides the messages (chat_template_kwargs win)."""
    if body.chat_template is not None:
        raise APIError("Chat template is passed with request, but --trust-request-chat-template is not set. "
                       "Refused request with untrusted chat template.", param="chat_template")
    if body.continue_final_message and body.add_generation_prompt:
        raise APIError("Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
                       param="continue_final_message")
    kwargs = {"tools": tools or None, "documents": body.documents,
              "continue_final_message": body.continue_final_message}
    return {**kwargs, **(body.chat_template_kwargs or {})}


class ChatJob(GenerationJob):
    id_prefix = "chatcmpl"
    object_name = "chat.completion"
    chunk_object_name = "chat.completion.chunk"

    def __init__(self, state: ServerState, body: ChatCompletionRequest, header_id: str | None):
        check_request_fields(body, NOT_IMPLEMENTED_CHAT)
        tokenizer = state.engine.tokenizer
        self.tools = tool_plan(body, state.settings.tool_call_parser)
        if self.tools.mode == "auto":
            body.skip_special_tokens = False  # tool-call tags can be special tokens (vLLM's hermes parser does so)
        kwargs = template_kwargs(body, self.tools.tools)
        text = render_chat(tokenizer, body.messages, body.add_generation_prompt, **kwargs)
        prompt_ids = tokenizer.encode(text, add_special_tokens=body.add_special_tokens)
        requested, param = body.requested_max_tokens()
        max_tokens = [resolve_max_tokens(state.settings, len(prompt_ids), requested, requested is None, param,
                                         len(text))]
        self.constraint = structured_outputs_params(body.structured_outputs, body.response_format,
                                                    self.tools.schema(body))
        super().__init__(state, body, header_id, [prompt_ids], max_tokens, body.num_logprobs(), self.constraint)
        self.echo_text = self._echo_text(body)
        self.tool_streams: dict[int, ToolCallStream] = {}

    @staticmethod
    def _echo_text(body: ChatCompletionRequest) -> str:
        """vLLM's chat `echo`: the last message's text, when it is the assistant's own (a continued reply)."""
        last = body.messages[-1]
        return (last.text() or "") if body.echo and last.role == "assistant" else ""

    def logprobs(self, token_ids, logprobs) -> dict | None:
        if not self.body.logprobs or logprobs is None:
            return None
        return chat_logprobs(self.tokenizer, token_ids, logprobs, self.body.top_logprobs or 0)

    def final_choice(self, choice: Choice, completion: CompletionOutput) -> dict:
        extracted = self.tools.extract(completion.text)
        calls = extracted.tool_calls if self.body.parallel_tool_calls is not False else extracted.tool_calls[:1]
        message = {"role": "assistant", "content": self.echo_text + (extracted.content or "")}
        if calls:
            message["tool_calls"] = [call.as_dict() for call in calls]
        return {"index": choice.index, "message": message,
                "logprobs": self.logprobs(completion.token_ids, completion.logprobs),
                "finish_reason": finish_reason(self.tools, extracted, completion.finish_reason),
                "stop_reason": completion.stop_reason}

    def stream_choices(self, choice: Choice, completion: CompletionOutput, first: bool) -> list[dict]:
        chunks = []
        if first:
            chunks.append({"index": choice.index, "delta": {"role": "assistant", "content": ""},
                           "logprobs": None, "finish_reason": None})
            if self.echo_text:
                chunks.append({"index": choice.index, "delta": {"content": self.echo_text}, "logprobs": None,
                               "finish_reason": None})
        if self.tools.mode != "none":
            return chunks + self._tool_chunks(choice, completion)
        if completion.delta_text or completion.finish_reason is not None:
            chunks.append({"index": choice.index, "delta": {"content": completion.delta_text},
                           "logprobs": self.logprobs(completion.delta_token_ids, completion.delta_logprobs),
                           "finish_reason": completion.finish_reason, "stop_reason": completion.stop_reason})
        return chunks

    def _tool_chunks(self, choice: Choice, completion: CompletionOutput) -> list[dict]:
        """Content and tool-call deltas as vLLM streams them; the last chunk carries the finish_reason."""
        stream = self.tool_streams.setdefault(choice.index, ToolCallStream(self.tools, self.body.parallel_tool_calls))
        finished = completion.finish_reason is not None
        chunks = [{"index": choice.index, "delta": delta, "logprobs": None, "finish_reason": None}
                  for delta in stream.deltas(completion.delta_text, finished)]
        if finished:
            reason = finish_reason(self.tools, stream.extracted, completion.finish_reason)
            chunks.append({"index": choice.index, "delta": {}, "logprobs": None, "finish_reason": reason,
                           "stop_reason": completion.stop_reason})
        return chunks


async def create_chat_completion(state: ServerState, body: ChatCompletionRequest, raw_request: Request):
    state.check_model(body.model)
    job = ChatJob(state, body, raw_request.headers.get("x-request-id") or body.request_id)
    await compile_constraint(state.engine, job.constraint)
    return await job.respond(raw_request)
