"""POST /v1/chat/completions: messages rendered with the tokenizer's chat template."""

from __future__ import annotations

from fastapi import Request

from kvtool.engine.runtime.outputs import CompletionOutput
from kvtool.engine.server.generation import EngineRequest
from kvtool.engine.server.job import GenerationJob
from kvtool.engine.server.logprobs import chat_logprobs
from kvtool.engine.server.protocol import ChatCompletionRequest, ChatMessage
from kvtool.engine.server.serving import ServerState, process_prompts


def chat_prompt_ids(processor, messages: list[ChatMessage], add_generation_prompt: bool = True) -> list[int]:
    return processor.render_chat([m.as_template_message() for m in messages], add_generation_prompt)


class ChatJob(GenerationJob):
    id_prefix = "chatcmpl"
    object_name = "chat.completion"
    chunk_object_name = "chat.completion.chunk"

    def __init__(self, state: ServerState, body: ChatCompletionRequest, header_id: str | None):
        prompt_ids = chat_prompt_ids(state.engine.input_processor, body.messages, body.add_generation_prompt)
        requested, param = body.requested_max_tokens()
        processed = process_prompts(
            state,
            [prompt_ids],
            requested,
            lambda max_tokens: body.to_sampling_params(max_tokens, body.num_logprobs()),
            requested is None,
            param,
        )
        super().__init__(state, body, header_id, processed, requested is None)

    def logprobs(self, token_ids, logprobs) -> dict | None:
        if not self.body.logprobs or logprobs is None:
            return None
        return chat_logprobs(self.tokenizer, token_ids, logprobs, self.body.top_logprobs or 0)

    def final_choice(self, request: EngineRequest, completion: CompletionOutput) -> dict:
        return {
            "index": request.choice_index(completion.index),
            "message": {"role": "assistant", "content": completion.text},
            "logprobs": self.logprobs(completion.token_ids, completion.logprobs),
            "finish_reason": completion.finish_reason,
            "stop_reason": completion.stop_reason,
        }

    def stream_choices(self, request: EngineRequest, completion: CompletionOutput, first: bool) -> list[dict]:
        chunks = []
        if first:
            chunks.append(
                {
                    "index": request.choice_index(completion.index),
                    "delta": {"role": "assistant", "content": ""},
                    "logprobs": None,
                    "finish_reason": None,
                }
            )
        if completion.delta_text or completion.finish_reason is not None:
            chunks.append(
                {
                    "index": request.choice_index(completion.index),
                    "delta": {"content": completion.delta_text},
                    "logprobs": self.logprobs(completion.delta_token_ids, completion.delta_logprobs),
                    "finish_reason": completion.finish_reason,
                    "stop_reason": completion.stop_reason,
                }
            )
        return chunks


async def create_chat_completion(state: ServerState, body: ChatCompletionRequest, raw_request: Request):
    state.check_model(body.model)
    return await ChatJob(state, body, raw_request.headers.get("x-request-id")).respond(raw_request)
