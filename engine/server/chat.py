"""POST /v1/chat/completions: messages rendered with the tokenizer's chat template, replies read for tool calls.

tools, documents and chat_template_kwargs reach the template as vLLM passes them; `echo` prefixes the
assistant message being continued.
"""

from __future__ import annotations

from fastapi import Request

from kvtool.engine.runtime.outputs import CompletionOutput, RequestOutput
from kvtool.engine.runtime.structured_output import StructuredOutputsParams
from kvtool.engine.server.beam_search import check_beam_search
from kvtool.engine.server.constraints import precompile, structured_outputs_params
from kvtool.engine.server.errors import APIError
from kvtool.engine.server.generation import EngineRequest
from kvtool.engine.server.job import GenerationJob
from kvtool.engine.server.logprobs import chat_logprobs, chat_top_limit, prompt_logprobs_body
from kvtool.engine.server.protocol import ChatCompletionRequest, ChatMessage
from kvtool.engine.server.request_fields import NOT_IMPLEMENTED_CHAT, check_request_fields
from kvtool.engine.server.serving import ServerState, process_prompts
from kvtool.engine.server.token_fields import check_chat_fields
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
        limit = chat_top_limit(self.body.top_logprobs, bool(self.body.logprob_token_ids))
        return chat_logprobs(self.names, token_ids, logprobs, limit)

    def token_ids(self, token_ids: list[int]) -> list[int] | None:
        return list(token_ids) if self.return_token_ids else None

    def response_fields(self, finals: list[RequestOutput]) -> dict:
        output = finals[0]
        return {
            "prompt_logprobs": prompt_logprobs_body(output.prompt_logprobs),
            "prompt_token_ids": output.prompt_token_ids if self.return_token_ids else None,
            "prompt_text": None,
        }

    def final_choice(self, request: EngineRequest, output: RequestOutput, completion: CompletionOutput) -> dict:
        extracted = self.tools.extract(completion.text, completion.finish_reason)
        calls = extracted.tool_calls if self.body.parallel_tool_calls is not False else extracted.tool_calls[:1]
        message = {"role": "assistant", "content": self.echo_text + (extracted.content or "")}
        message |= {"refusal": None, "annotations": None, "audio": None, "function_call": None}
        if calls:  # vLLM leaves tool_calls out when there are none
            message["tool_calls"] = [call.as_dict() for call in calls]
        return {
            "index": request.choice_index(completion.index),
            "message": {**message, "reasoning": None},
            "logprobs": self.logprobs(completion.token_ids, completion.logprobs),
            "finish_reason": finish_reason(self.tools, extracted, completion.finish_reason),
            "stop_reason": completion.stop_reason,
            "token_ids": self.token_ids(completion.token_ids),
            "routed_experts": None,
            "weight_versions": None,
        }

    def stream_chunks(
        self, request: EngineRequest, output: RequestOutput, completion: CompletionOutput, first: bool, count: int
    ) -> list[dict]:
        index, usage_ = request.choice_index(completion.index), self.running_usage(request, count)
        chunks = self._opening_chunks(request, output, index) if first else []
        if self.tools.mode != "none":
            choices = self._tool_choices(index, completion)
        else:  # a sequence that ended without a token at all sends an empty delta
            delta = {"content": completion.delta_text} if completion.token_ids else {}
            choices = [self._choice(index, delta, completion, completion.finish_reason, completion.stop_reason)]
        return chunks + [self.chunk([choice], usage_, kv_transfer_params=None) for choice in choices]

    def _opening_chunks(self, request: EngineRequest, output: RequestOutput, index: int) -> list[dict]:
        """The role (with the prompt's token ids when asked), then the echoed text: no completion tokens yet."""
        usage_ = self.running_usage(request, 0)
        role = {"index": index, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
        prompt_ids = output.prompt_token_ids if self.return_token_ids else None
        chunks = [self.chunk([role], usage_, prompt_token_ids=prompt_ids, prompt_text=None)]
        if self.echo_text:
            echo = {"index": index, "delta": {"content": self.echo_text}, "logprobs": None, "finish_reason": None}
            chunks.append(self.chunk([echo], usage_))
        return chunks

    def _choice(
        self, index: int, delta: dict, tokens: CompletionOutput | None, reason: str | None = None, stop_reason=None
    ) -> dict:
        """A streamed choice; `tokens` is the output whose new tokens it carries (logprobs, token ids), and a
        choice with a finish_reason says what stopped it."""
        ids, logprobs = (tokens.delta_token_ids, tokens.delta_logprobs) if tokens else ([], None)
        choice = {"index": index, "delta": delta, "logprobs": self.logprobs(ids, logprobs), "finish_reason": reason}
        if reason is not None:
            choice |= {"stop_reason": stop_reason, "weight_versions": None}
        return {**choice, "token_ids": self.token_ids(ids)}

    def _tool_choices(self, index: int, completion: CompletionOutput) -> list[dict]:
        """Content and tool-call deltas as vLLM streams them: the output's tokens ride on the first, the
        finish_reason on the last (an empty delta)."""
        stream = self.tool_streams.setdefault(index, ToolCallStream(self.tools, self.body.parallel_tool_calls))
        finished = completion.finish_reason is not None
        deltas = stream.deltas(completion.delta_text, completion.finish_reason)
        if finished or (not deltas and (self.body.logprobs or self.return_token_ids)):
            deltas.append({})
        reason = finish_reason(self.tools, stream.extracted, completion.finish_reason) if finished else None
        choices = [self._choice(index, delta, completion if i == 0 else None) for i, delta in enumerate(deltas)]
        if finished:
            tokens = completion if len(deltas) == 1 else None
            choices[-1] = self._choice(index, {}, tokens, reason, completion.stop_reason)
        return choices


async def create_chat_completion(state: ServerState, body: ChatCompletionRequest, raw_request: Request):
    check_chat_fields(body)
    state.check_model(body.model)
    check_request_fields(body, NOT_IMPLEMENTED_CHAT)
    check_beam_search(body)
    tools = tool_plan(body, state.settings.tool_call_parser)
    constraint = structured_outputs_params(body.structured_outputs, body.response_format, tools.schema(body))
    await precompile(state.engine.input_processor, constraint)
    header_id = raw_request.headers.get("x-request-id") or body.request_id
    return await ChatJob(state, body, header_id, tools, constraint).respond(raw_request)
