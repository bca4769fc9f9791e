"""POST /v1/chat/completions (and its batch route): each conversation's prompt (prompt.py) run, replies read
for tool calls; `echo` prefixes the assistant message being continued."""

from __future__ import annotations

from fastapi import Request

from kvtool.engine.runtime.outputs import CompletionOutput, RequestOutput
from kvtool.engine.runtime.structured_output import StructuredOutputsParams
from kvtool.engine.server.beam_search import check_beam_search
from kvtool.engine.server.chat.prompt import echo_text, forwarded_prompt_ids, render_prompt, template_kwargs
from kvtool.engine.server.chat.protocol import BatchChatCompletionRequest, ChatCompletionRequest, ChatMessage
from kvtool.engine.server.chat.tool_stream import ToolCallStream
from kvtool.engine.server.chat.tools import ToolPlan, finish_reason, tool_plan
from kvtool.engine.server.constraints import precompile, structured_outputs_params
from kvtool.engine.server.generation import EngineRequest
from kvtool.engine.server.job import GenerationJob
from kvtool.engine.server.logprobs import chat_logprobs, chat_top_limit, prompt_logprobs_body
from kvtool.engine.server.request_fields import NOT_IMPLEMENTED_CHAT, check_request_fields
from kvtool.engine.server.serving import ServerState, process_prompts
from kvtool.engine.server.token_fields import check_chat_fields


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
        conversations: list[list[ChatMessage]],
    ):
        """One prompt, and one choice per sequence, for each conversation (the batch route sends several)."""
        self.tools = tools
        if tools.mode == "auto":
            body.skip_special_tokens = False  # tool-call tags can be special tokens (vLLM's hermes parser does so)
        kwargs = template_kwargs(body, tools.tools, state.settings.trust_request_chat_template)
        processor = state.engine.input_processor
        forwarded = forwarded_prompt_ids(body, conversations[0], processor.vocab_size)  # none in a batch
        prompts = [forwarded] if forwarded else [render_prompt(processor, body, chat, kwargs) for chat in conversations]
        processed = process_prompts(
            state,
            prompts,
            body.max_tokens_field(),
            lambda max_tokens: body.to_sampling_params(max_tokens, body.num_logprobs(), constraint),
            add_special_tokens=body.add_special_tokens,
            truncation=None if forwarded else body.truncation(),
        )
        super().__init__(state, body, header_id, processed)
        self.echo_texts = [echo_text(body, chat) for chat in conversations]
        self.tool_streams: dict[int, ToolCallStream] = {}

    def logprobs(self, token_ids, logprobs) -> dict | None:
        if not self.body.logprobs or logprobs is None:
            return None
        limit = chat_top_limit(self.body.top_logprobs, bool(self.body.logprob_token_ids))
        return chat_logprobs(self.names, token_ids, logprobs, limit)

    def token_ids(self, token_ids: list[int]) -> list[int] | None:
        return list(token_ids) if self.return_token_ids else None

    def response_fields(self, finals: list[RequestOutput]) -> dict:
        """The prompt's logprobs and token ids; a batch's answer has none (vLLM's leaves them unset)."""
        output = None if isinstance(self.body, BatchChatCompletionRequest) else finals[0]
        return {
            "prompt_logprobs": prompt_logprobs_body(output.prompt_logprobs) if output else None,
            "prompt_token_ids": output.prompt_token_ids if output and self.return_token_ids else None,
            "prompt_text": None,
        }

    def final_choice(self, request: EngineRequest, output: RequestOutput, completion: CompletionOutput) -> dict:
        extracted = self.tools.extract(completion.text, completion.finish_reason)
        calls = extracted.tool_calls if self.body.parallel_tool_calls is not False else extracted.tool_calls[:1]
        message = {"role": "assistant", "content": self.echo_texts[request.prompt_index] + (extracted.content or "")}
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
        if self.echo_texts[request.prompt_index]:
            echoed = {"content": self.echo_texts[request.prompt_index]}
            echo = {"index": index, "delta": echoed, "logprobs": None, "finish_reason": None}
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


async def create_chat_completion(
    state: ServerState,
    body: ChatCompletionRequest,
    raw_request: Request,
    conversations: list[list[ChatMessage]] | None = None,
):
    """POST /v1/chat/completions; the batch route passes its conversations (each answered as `messages` would be)."""
    check_chat_fields(body)
    state.check_model(body.model)
    check_request_fields(body, NOT_IMPLEMENTED_CHAT)
    check_beam_search(body)
    tools = tool_plan(body, state.settings.tool_call_parser)
    constraint = structured_outputs_params(body.structured_outputs, body.response_format, tools.schema(body))
    await precompile(state.engine.input_processor, constraint)
    header_id = raw_request.headers.get("x-request-id") or body.request_id
    job = ChatJob(state, body, header_id, tools, constraint, conversations or [body.messages])
    return await job.respond(raw_request)
