"""POST /v1/chat/completions: messages rendered with the tokenizer's chat template, replies read for tool calls.

tools, documents and chat_template_kwargs reach the template as vLLM passes them; `echo` prefixes the
assistant message being continued.
"""

from __future__ import annotations

from fastapi import Request

from kvtool.engine.runtime.outputs import CompletionOutput
from kvtool.engine.runtime.structured_output import StructuredOutputsParams
from kvtool.engine.server.beam_search import check_beam_search
from kvtool.engine.server.constraints import precompile, structured_outputs_params
from kvtool.engine.server.errors import APIError
from kvtool.engine.server.generation import EngineRequest
from kvtool.engine.server.job import GenerationJob
from kvtool.engine.server.logprobs import chat_logprobs
from kvtool.engine.server.protocol import ChatCompletionRequest, ChatMessage
from kvtool.engine.server.request_fields import NOT_IMPLEMENTED_CHAT, check_request_fields
from kvtool.engine.server.serving import ServerState, process_prompts
from kvtool.engine.server.tool_stream import ToolCallStream
from kvtool.engine.server.tools import ToolPlan, finish_reason, tool_plan
from kvtool.engine.sizing import messages

TEMPLATE_KWARGS_NOT_ALLOWED = frozenset({"chat_template", "tokenize"})  # set by the server, never by a request
FORWARDED_IDS = "kv_transfer_params.prompt_token_ids"


def chat_prompt_ids(processor, chat: list[ChatMessage], add_generation_prompt: bool = True, **kwargs) -> list[int]:
    return processor.chat_prompt_ids([m.as_template_message() for m in chat], add_generation_prompt, **kwargs)


def template_kwargs(body: ChatCompletionRequest, tools: list[dict], trusted: bool) -> dict:
    """What vLLM passes to the chat template besides the messages (chat_template_kwargs win)."""
    requested = requested_template(body.chat_template, body.chat_template_kwargs, trusted)
    if body.continue_final_message and body.add_generation_prompt:
        raise APIError(messages.CONTINUE_AND_GENERATION_PROMPT, param="continue_final_message")
    kwargs = {
        "tools": tools or None,
        "documents": body.documents,
        "continue_final_message": body.continue_final_message,
    }
    return {**kwargs, **requested}


def requested_template(chat_template: str | None, chat_template_kwargs: dict | None, trusted: bool) -> dict:
    """A request's own template and template kwargs, as vLLM admits them: a template only with
    --trust-request-chat-template, and never `chat_template` or `tokenize` among the kwargs."""
    kwargs = chat_template_kwargs or {}
    if not trusted and (chat_template is not None or kwargs.get("chat_template") is not None):
        raise APIError(messages.UNTRUSTED_CHAT_TEMPLATE)
    unexpected = TEMPLATE_KWARGS_NOT_ALLOWED & kwargs.keys()
    if unexpected:
        raise APIError(messages.UNEXPECTED_TEMPLATE_KWARGS.format(names=unexpected))
    return {**kwargs, **({"chat_template": chat_template} if chat_template is not None else {})}


def forwarded_prompt_ids(body: ChatCompletionRequest, vocab_size: int) -> list[int] | None:
    """Decode-side token reuse (vLLM's disaggregated serving): the prompt token ids a router forwards in
    kv_transfer_params replace the rendered messages, unless `echo` or non-text content needs the messages."""
    ids = (body.kv_transfer_params or {}).pop("prompt_token_ids", None)
    if ids is None or body.echo or any(m.has_non_text_content() for m in body.messages):
        return None
    if not isinstance(ids, list) or not ids or any(type(i) is not int or i < 0 for i in ids):
        raise APIError(messages.with_parameter(messages.FORWARDED_IDS_INVALID, FORWARDED_IDS), param=FORWARDED_IDS)
    if max(ids) >= vocab_size:
        message = messages.TOKEN_OUT_OF_VOCAB.format(token_id=max(ids))
        raise APIError(messages.with_parameter(message, FORWARDED_IDS), param=FORWARDED_IDS)
    return ids


class ChatJob(GenerationJob):
    id_prefix = "chatcmpl"
    object_name = "chat.completion"
    chunk_object_name = "chat.completion.chunk"

    def __init__(
        self,
        state: ServerState,
        body: ChatCompletionRequest,
        header_id: str | None,
        tools: ToolPlan,
        constraint: StructuredOutputsParams | None,
    ):
        self.tools = tools
        if tools.mode == "auto":
            body.skip_special_tokens = False  # tool-call tags can be special tokens (vLLM's hermes parser does so)
        conversation = [m.as_template_message() for m in body.messages]
        kwargs = template_kwargs(body, tools.tools, state.settings.trust_request_chat_template)
        processor = state.engine.input_processor
        forwarded = forwarded_prompt_ids(body, processor.vocab_size)
        prompt = forwarded or processor.render_chat(conversation, body.add_generation_prompt, **kwargs)
        requested, param = body.requested_max_tokens()
        processed = process_prompts(
            state,
            [prompt],
            requested,
            lambda max_tokens: body.to_sampling_params(max_tokens, body.num_logprobs(), constraint),
            requested is None,
            param,
            add_special_tokens=body.add_special_tokens,
            truncation=None if forwarded else body.truncation(),
        )
        super().__init__(state, body, header_id, processed)
        last = body.messages[-1]  # vLLM's chat echo: the last message, when it is the assistant's own
        self.echo_text = (last.text() or "") if body.echo and last.role == "assistant" else ""
        self.tool_streams: dict[int, ToolCallStream] = {}

    def logprobs(self, token_ids, logprobs) -> dict | None:
        if not self.body.logprobs or logprobs is None:
            return None
        return chat_logprobs(self.tokenizer, token_ids, logprobs, self.body.top_logprobs or 0)

    def final_choice(self, request: EngineRequest, completion: CompletionOutput) -> dict:
        extracted = self.tools.extract(completion.text, completion.finish_reason)
        calls = extracted.tool_calls if self.body.parallel_tool_calls is not False else extracted.tool_calls[:1]
        message = {"role": "assistant", "content": self.echo_text + (extracted.content or "")}
        if calls:
            message["tool_calls"] = [call.as_dict() for call in calls]
        return {
            "index": request.choice_index(completion.index),
            "message": message,
            "logprobs": self.logprobs(completion.token_ids, completion.logprobs),
            "finish_reason": finish_reason(self.tools, extracted, completion.finish_reason),
            "stop_reason": completion.stop_reason,
        }

    def stream_choices(self, request: EngineRequest, completion: CompletionOutput, first: bool) -> list[dict]:
        index, chunks = request.choice_index(completion.index), []
        if first:
            role = {
                "index": index,
                "delta": {"role": "assistant", "content": ""},
                "logprobs": None,
                "finish_reason": None,
            }
            chunks.append(role)
            if self.echo_text:
                chunks.append(
                    {"index": index, "delta": {"content": self.echo_text}, "logprobs": None, "finish_reason": None}
                )
        if self.tools.mode != "none":
            return chunks + self._tool_chunks(index, completion)
        if completion.delta_text or completion.finish_reason is not None:
            chunks.append(
                {
                    "index": index,
                    "delta": {"content": completion.delta_text},
                    "logprobs": self.logprobs(completion.delta_token_ids, completion.delta_logprobs),
                    "finish_reason": completion.finish_reason,
                    "stop_reason": completion.stop_reason,
                }
            )
        return chunks

    def _tool_chunks(self, index: int, completion: CompletionOutput) -> list[dict]:
        """Content and tool-call deltas as vLLM streams them; the last chunk carries the finish_reason."""
        stream = self.tool_streams.setdefault(index, ToolCallStream(self.tools, self.body.parallel_tool_calls))
        chunks = [
            {"index": index, "delta": delta, "logprobs": None, "finish_reason": None}
            for delta in stream.deltas(completion.delta_text, completion.finish_reason)
        ]
        if completion.finish_reason is not None:
            reason = finish_reason(self.tools, stream.extracted, completion.finish_reason)
            chunks.append(
                {
                    "index": index,
                    "delta": {},
                    "logprobs": None,
                    "finish_reason": reason,
                    "stop_reason": completion.stop_reason,
                }
            )
        return chunks


async def create_chat_completion(state: ServerState, body: ChatCompletionRequest, raw_request: Request):
    state.check_model(body.model)
    check_request_fields(body, NOT_IMPLEMENTED_CHAT)
    check_beam_search(body)
    tools = tool_plan(body, state.settings.tool_call_parser)
    constraint = structured_outputs_params(body.structured_outputs, body.response_format, tools.schema(body))
    await precompile(state.engine.input_processor, constraint)
    header_id = raw_request.headers.get("x-request-id") or body.request_id
    return await ChatJob(state, body, header_id, tools, constraint).respond(raw_request)
