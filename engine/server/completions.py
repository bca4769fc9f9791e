"""POST /v1/completions: text prompts (or token ids, or a batch of either), streamed or not."""

from __future__ import annotations

from fastapi import Request

from kvtool.engine.runtime.outputs import CompletionOutput
from kvtool.engine.server.constraints import compile_constraint, structured_outputs_params
from kvtool.engine.server.errors import APIError
from kvtool.engine.server.generation import Choice
from kvtool.engine.server.job import GenerationJob
from kvtool.engine.server.logprobs import completion_logprobs
from kvtool.engine.server.protocol import CompletionRequest
from kvtool.engine.server.request_fields import NOT_IMPLEMENTED_COMPLETIONS, check_request_fields
from kvtool.engine.server.serving import ServerState, resolve_max_tokens, warn_if_default_truncated


class CompletionJob(GenerationJob):
    id_prefix = "cmpl"
    object_name = chunk_object_name = "text_completion"

    def __init__(self, state: ServerState, body: CompletionRequest, header_id: str | None):
        check_request_fields(body, NOT_IMPLEMENTED_COMPLETIONS)
        self.prompts = body.prompts()
        if not self.prompts:
            raise APIError("The decoder prompt cannot be empty", param="prompt")
        tokenizer = state.engine.tokenizer
        prompt_ids = [_checked_ids(p, len(tokenizer)) if isinstance(p, list)
                      else tokenizer.encode(p, add_special_tokens=body.add_special_tokens) for p in self.prompts]
        defaulted = not body.max_tokens_given()
        max_tokens = [resolve_max_tokens(state.settings, len(ids), body.max_tokens, defaulted,
                                         prompt_chars=None if isinstance(p, list) else len(p))
                      for p, ids in zip(self.prompts, prompt_ids)]
        self.constraint = structured_outputs_params(body.structured_outputs, body.response_format)
        super().__init__(state, body, header_id, prompt_ids, max_tokens, body.logprobs, self.constraint)

    def echo(self, choice: Choice) -> str:
        if not self.body.echo:
            return ""
        prompt = self.prompts[choice.prompt_index]
        return prompt if isinstance(prompt, str) else self.tokenizer.decode(prompt)

    def choice_body(self, choice: Choice, completion: CompletionOutput, text: str, token_ids, logprobs, offset: int) -> dict:
        if self.body.logprobs is not None and logprobs is not None:
            logprobs = completion_logprobs(self.tokenizer, token_ids, logprobs, self.body.logprobs, offset)
        return {"index": choice.index, "text": text, "logprobs": logprobs,
                "finish_reason": completion.finish_reason, "stop_reason": completion.stop_reason}

    def final_choice(self, choice: Choice, completion: CompletionOutput) -> dict:
        echo = self.echo(choice)
        return self.choice_body(choice, completion, echo + completion.text, completion.token_ids,
                                completion.logprobs, len(echo))

    def stream_choices(self, choice: Choice, completion: CompletionOutput, first: bool) -> list[dict]:
        echo = self.echo(choice) if first else ""
        offset = len(completion.text) - len(completion.delta_text)
        return [self.choice_body(choice, completion, echo + completion.delta_text, completion.delta_token_ids,
                                 completion.delta_logprobs, offset)]

    def on_finished(self, choice: Choice, completion: CompletionOutput) -> None:
        warn_if_default_truncated(self.id, self.max_tokens[choice.prompt_index],
                                  len(completion.token_ids), completion.finish_reason)


def _checked_ids(token_ids: list[int], vocab_size: int) -> list[int]:
    if any(not 0 <= t < vocab_size for t in token_ids):
        raise APIError(f"Prompt token ids must be integers in [0, {vocab_size}).", param="prompt")
    return token_ids


async def create_completion(state: ServerState, body: CompletionRequest, raw_request: Request):
    state.check_model(body.model)
    job = CompletionJob(state, body, raw_request.headers.get("x-request-id") or body.request_id)
    await compile_constraint(state.engine, job.constraint)
    return await job.respond(raw_request)
