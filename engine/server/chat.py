"""POST /v1/chat/completions: messages rendered with the tokenizer's chat template."""

from __future__ import annotations

from fastapi import Request

from kvtool.engine.runtime.outputs import CompletionOutput
from kvtool.engine.server.errors import APIError
from kvtool.engine.server.generation import Choice
from kvtool.engine.server.job import GenerationJob
from kvtool.engine.server.logprobs import chat_logprobs
from kvtool.engine.server.protocol import ChatCompletionRequest, ChatMessage
from kvtool.engine.server.serving import ServerState, resolve_max_tokens


NO_CHAT_TEMPLATE = ("As of transformers v4.44, default chat template is no longer allowed, so you must provide a chat "
                    "template if the tokenizer does not define one. This model's tokenizer config has no "
                    "chat_template: use /v1/completions with your own prompt format, or a model that ships one.")


def chat_prompt_ids(tokenizer, messages: list[ChatMessage], add_generation_prompt: bool = True) -> list[int]:
    if not getattr(tokenizer, "chat_template", None):
        raise APIError(NO_CHAT_TEMPLATE, param="messages")
    conversation = [m.as_template_message() for m in messages]
    try:
        text = tokenizer.apply_chat_template(conversation, add_generation_prompt=add_generation_prompt, tokenize=False)
    except Exception as err:  # jinja raises for conversations a template refuses (e.g. roles out of order)
        raise APIError(f"The chat template cannot render these messages: {err}", param="messages") from err
    return tokenizer.encode(text, add_special_tokens=False)


class ChatJob(GenerationJob):
    id_prefix = "chatcmpl"
    object_name = "chat.completion"
    chunk_object_name = "chat.completion.chunk"

    def __init__(self, state: ServerState, body: ChatCompletionRequest, header_id: str | None):
        prompt_ids = chat_prompt_ids(state.engine.tokenizer, body.messages, body.add_generation_prompt)
        requested, param = body.requested_max_tokens()
        max_tokens = [resolve_max_tokens(state.settings, len(prompt_ids), requested, requested is None, param)]
        super().__init__(state, body, header_id, [prompt_ids], max_tokens, body.num_logprobs())

    def logprobs(self, token_ids, logprobs) -> dict | None:
        if not self.body.logprobs or logprobs is None:
            return None
        return chat_logprobs(self.tokenizer, token_ids, logprobs, self.body.top_logprobs or 0)

    def final_choice(self, choice: Choice, completion: CompletionOutput) -> dict:
        return {"index": choice.index, "message": {"role": "assistant", "content": completion.text},
                "logprobs": self.logprobs(completion.token_ids, completion.logprobs),
                "finish_reason": completion.finish_reason, "stop_reason": completion.stop_reason}

    def stream_choices(self, choice: Choice, completion: CompletionOutput, first: bool) -> list[dict]:
        chunks = []
        if first:
            chunks.append({"index": choice.index, "delta": {"role": "assistant", "content": ""},
                           "logprobs": None, "finish_reason": None})
        if completion.delta_text or completion.finish_reason is not None:
            chunks.append({"index": choice.index, "delta": {"content": completion.delta_text},
                           "logprobs": self.logprobs(completion.delta_token_ids, completion.delta_logprobs),
                           "finish_reason": completion.finish_reason, "stop_reason": completion.stop_reason})
        return chunks


async def create_chat_completion(state: ServerState, body: ChatCompletionRequest, raw_request: Request):
    state.check_model(body.model)
    return await ChatJob(state, body, raw_request.headers.get("x-request-id")).respond(raw_request)
