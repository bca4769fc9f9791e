"""POST /v1/chat/completions: messages rendered with the tokenizer's chat template, replies read for tool calls.

tools, documents and chat_template_kwargs reach the template as vLLM passes them; `echo` prefixes the
assistant message being continued.
"""

from __future__ import annotations

from fastapi import Request

from kvtool.engine.runtime.outputs import CompletionOutput
from kvtool.engine.runtime.prompt_embeds import EmbedsPrompt
from kvtool.engine.runtime.structured_output import StructuredOutputsParams
from kvtool.engine.server.chat_embeds import ChatEmbeds
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


def chat_prompt_ids(processor, chat: list[ChatMessage], add_generation_prompt: bool = True, **kwargs) -> list[int]:
    return processor.chat_prompt_ids([m.as_template_message() for m in chat], add_generation_prompt, **kwargs)


def template_kwargs(body: ChatCompletionRequest, tools: list[dict]) -> dict:
    """What vLLM passes to the chat template besides the messages (chat_template_kwargs win)."""
    if body.chat_template is not None:
        raise APIError(messages.UNTRUSTED_CHAT_TEMPLATE, param="chat_template")
    if body.continue_final_message and body.add_generation_prompt:
        raise APIError(messages.CONTINUE_AND_GENERATION_PROMPT, param="continue_final_message")
    kwargs = {
        "tools": tools or None,
        "documents": body.documents,
        "continue_final_message": body.continue_final_message,
    }
    return {**kwargs, **(body.chat_template_kwargs or {})}


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
        kwargs = template_kwargs(body, tools.tools)
        prompts = [self.prompt(state.engine.input_processor, body, chat, kwargs) for chat in conversations]
        requested, param = body.requested_max_tokens()
        processed = process_prompts(
            state,
            prompts,
            requested,
            lambda max_tokens: body.to_sampling_params(max_tokens, body.num_logprobs(), constraint),
            requested is None,
            param,
            add_special_tokens=body.add_special_tokens,
        )
        super().__init__(state, body, header_id, processed)
        self.echo_texts = [echo_text(body, chat) for chat in conversations]
        self.tool_streams: dict[int, ToolCallStream] = {}

    @staticmethod
    def prompt(processor, body: ChatCompletionRequest, chat: list[ChatMessage], kwargs: dict) -> str | EmbedsPrompt:
        """The conversation rendered by the chat template; with prompt_embeds parts, their rows spliced in."""
        embeds = ChatEmbeds(processor)
        text = processor.render_chat(embeds.template_messages(chat), body.add_generation_prompt, **kwargs)
        return embeds.prompt(text, body.add_special_tokens)

    def logprobs(self, token_ids, logprobs) -> dict | None:
        if not self.body.logprobs or logprobs is None:
            return None
        return chat_logprobs(self.tokenizer, token_ids, logprobs, self.body.top_logprobs or 0)

    def final_choice(self, request: EngineRequest, completion: CompletionOutput) -> dict:
        extracted = self.tools.extract(completion.text)
        calls = extracted.tool_calls if self.body.parallel_tool_calls is not False else extracted.tool_calls[:1]
        message = {"role": "assistant", "content": self.echo_texts[request.prompt_index] + (extracted.content or "")}
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
            if self.echo_texts[request.prompt_index]:
                echoed = {"content": self.echo_texts[request.prompt_index]}
                chunks.append({"index": index, "delta": echoed, "logprobs": None, "finish_reason": None})
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
        finished = completion.finish_reason is not None
        chunks = [
            {"index": index, "delta": delta, "logprobs": None, "finish_reason": None}
            for delta in stream.deltas(completion.delta_text, finished)
        ]
        if finished:
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


def echo_text(body: ChatCompletionRequest, chat: list[ChatMessage]) -> str:
    """vLLM's chat echo: the conversation's last message, when it is the assistant's own."""
    last = chat[-1]
    return (last.text() or "") if body.echo and last.role == "assistant" else ""


async def create_chat_completion(
    state: ServerState,
    body: ChatCompletionRequest,
    raw_request: Request,
    conversations: list[list[ChatMessage]] | None = None,
):
    """POST /v1/chat/completions; the batch route passes its conversations (each answered as `messages` would be)."""
    state.check_model(body.model)
    check_request_fields(body, NOT_IMPLEMENTED_CHAT)
    tools = tool_plan(body, state.settings.tool_call_parser)
    constraint = structured_outputs_params(body.structured_outputs, body.response_format, tools.schema(body))
    await precompile(state.engine.input_processor, constraint)
    header_id = raw_request.headers.get("x-request-id") or body.request_id
    job = ChatJob(state, body, header_id, tools, constraint, conversations or [body.messages])
    return await job.respond(raw_request)
