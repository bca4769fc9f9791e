"""POST /v1/completions: text prompts (or token ids, or a batch of either), streamed or not."""

from __future__ import annotations

from fastapi import Request

from kvtool.engine.runtime.outputs import CompletionOutput
from kvtool.engine.runtime.prompt_embeds import EmbedsPrompt
from kvtool.engine.runtime.structured_output import StructuredOutputsParams
from kvtool.engine.server.constraints import precompile, structured_outputs_params
from kvtool.engine.server.errors import APIError
from kvtool.engine.server.generation import EngineRequest
from kvtool.engine.server.job import GenerationJob
from kvtool.engine.server.logprobs import completion_logprobs
from kvtool.engine.server.protocol import CompletionRequest
from kvtool.engine.server.request_fields import NOT_IMPLEMENTED_COMPLETIONS, check_request_fields
from kvtool.engine.server.serving import ServerState, process_prompts, warn_if_default_truncated
from kvtool.engine.sizing import messages


class CompletionJob(GenerationJob):
    id_prefix = "cmpl"
    object_name = chunk_object_name = "text_completion"

    def __init__(
        self,
        state: ServerState,
        body: CompletionRequest,
        header_id: str | None,
        constraint: StructuredOutputsParams | None,
    ):
        processor = state.engine.input_processor
        embeds = [EmbedsPrompt.of_rows(processor.load_prompt_embeds(data)) for data in body.embeds_payloads()]
        self.prompts = embeds + body.prompts()  # the embeddings' choices first, as vLLM answers them
        self.defaulted = not body.max_tokens_given()
        processed = process_prompts(
            state,
            self.prompts,
            body.max_tokens,
            lambda max_tokens: body.to_sampling_params(max_tokens, body.logprobs, constraint),
            self.defaulted,
            add_special_tokens=body.add_special_tokens,
        )
        super().__init__(state, body, header_id, processed)

    def echo(self, request: EngineRequest) -> str:
        if not self.body.echo:
            return ""
        prompt = self.prompts[request.prompt_index]
        return prompt if isinstance(prompt, str) else self.tokenizer.decode(prompt)

    def choice_body(
        self, request: EngineRequest, completion: CompletionOutput, text: str, token_ids, logprobs, offset: int
    ) -> dict:
        if self.body.logprobs is not None and logprobs is not None:
            logprobs = completion_logprobs(self.tokenizer, token_ids, logprobs, self.body.logprobs, offset)
        return {
            "index": request.choice_index(completion.index),
            "text": text,
            "logprobs": logprobs,
            "finish_reason": completion.finish_reason,
            "stop_reason": completion.stop_reason,
        }

    def final_choice(self, request: EngineRequest, completion: CompletionOutput) -> dict:
        echo = self.echo(request)
        return self.choice_body(
            request, completion, echo + completion.text, completion.token_ids, completion.logprobs, len(echo)
        )

    def stream_choices(self, request: EngineRequest, completion: CompletionOutput, first: bool) -> list[dict]:
        echo = self.echo(request) if first else ""
        offset = len(completion.text) - len(completion.delta_text)
        return [
            self.choice_body(
                request,
                completion,
                echo + completion.delta_text,
                completion.delta_token_ids,
                completion.delta_logprobs,
                offset,
            )
        ]

    def on_finished(self, request: EngineRequest, completion: CompletionOutput) -> None:
        if self.defaulted:
            warn_if_default_truncated(
                self.id, self.max_tokens[request.prompt_index], len(completion.token_ids), completion.finish_reason
            )


def check_prompt_embeds_fields(body: CompletionRequest) -> None:
    """What vLLM refuses beside embeddings, in its order (before it looks at the fields it does not know)."""
    if not body.embeds_payloads():
        return
    if getattr(body, "suffix", None) is not None:
        raise APIError(messages.PROMPT_EMBEDS_WITH_SUFFIX, param="suffix")
    if body.echo:
        raise APIError(messages.PROMPT_EMBEDS_WITH_ECHO)
    if getattr(body, "prompt_logprobs", None) is not None:
        raise APIError(messages.PROMPT_EMBEDS_WITH_PROMPT_LOGPROBS)


async def create_completion(state: ServerState, body: CompletionRequest, raw_request: Request):
    state.check_model(body.model)
    check_prompt_embeds_fields(body)
    check_request_fields(body, NOT_IMPLEMENTED_COMPLETIONS)
    constraint = structured_outputs_params(body.structured_outputs, body.response_format)
    await precompile(state.engine.input_processor, constraint)
    header_id = raw_request.headers.get("x-request-id") or body.request_id
    return await CompletionJob(state, body, header_id, constraint).respond(raw_request)
