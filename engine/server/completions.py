"""POST /v1/completions: text prompts (or token ids, or a batch of either), streamed or not.

`echo` puts the prompt before the output, and with `logprobs` scores it too (the first token's entry null),
as vLLM does; with `max_tokens: 0` the answer is the scored prompt alone, lm-evaluation-harness's
log-likelihood request.
"""

from __future__ import annotations

from fastapi import Request

from kvtool.engine.runtime.outputs import CompletionOutput, RequestOutput
from kvtool.engine.runtime.prompt_embeds import EmbedsPrompt
from kvtool.engine.runtime.structured_output import StructuredOutputsParams
from kvtool.engine.server.beam_search import check_beam_search
from kvtool.engine.server.constraints import precompile, structured_outputs_params
from kvtool.engine.server.errors import APIError
from kvtool.engine.server.generation import EngineRequest
from kvtool.engine.server.job import GenerationJob
from kvtool.engine.server.logprobs import completion_logprobs, completion_top_limit, prompt_logprobs_body
from kvtool.engine.server.protocol import CompletionRequest
from kvtool.engine.server.request_fields import NOT_IMPLEMENTED_COMPLETIONS, check_request_fields
from kvtool.engine.server.serving import ServerState, process_prompts, warn_if_default_truncated
from kvtool.engine.server.token_fields import check_completion_fields
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
            body.max_tokens_field(),
            lambda max_tokens: body.to_sampling_params(max_tokens, body.logprobs, constraint),
            add_special_tokens=body.add_special_tokens,
            truncation=body.truncation(),
        )
        super().__init__(state, body, header_id, processed)
        self.top_limit = completion_top_limit(body.logprobs, bool(body.logprob_token_ids))
        self.text_offsets: dict[int, int] = {}  # per streamed choice: where its next token's text starts

    def echo_text(self, request: EngineRequest) -> str:
        """The prompt as echoed: its text (token ids decoded); none when token ids are returned instead."""
        if self.return_token_ids:
            return ""
        prompt = self.prompts[request.prompt_index]
        return prompt if isinstance(prompt, str) else self.tokenizer.decode(prompt)

    def covered(
        self, request: EngineRequest, output: RequestOutput, text: str, token_ids: list[int], logprobs, echo: bool
    ) -> tuple[str, list[int], list | None]:
        """(text, token ids, logprobs) of a choice body: the output's, after the prompt's when echoed."""
        if not echo:
            return text, token_ids, logprobs
        if self.body.echo_without_generation():
            return self.echo_text(request), output.prompt_token_ids, output.prompt_logprobs
        scored = [*(output.prompt_logprobs or []), *(logprobs or [])]
        return self.echo_text(request) + text, [*output.prompt_token_ids, *token_ids], scored

    def logprobs(self, token_ids: list[int], logprobs, text_offset: int = 0) -> dict | None:
        if self.body.logprobs is None:
            return None
        return completion_logprobs(self.names, token_ids, logprobs, self.top_limit, text_offset)

    def final_choice(self, request: EngineRequest, output: RequestOutput, completion: CompletionOutput) -> dict:
        text, token_ids, logprobs = self.covered(
            request, output, completion.text, completion.token_ids, completion.logprobs, self.body.echo
        )
        return {
            "index": request.choice_index(completion.index),
            "text": text,
            "logprobs": self.logprobs(token_ids, logprobs),
            "finish_reason": completion.finish_reason,
            "stop_reason": completion.stop_reason,
            "token_ids": list(completion.token_ids) if self.return_token_ids else None,
            "prompt_logprobs": prompt_logprobs_body(output.prompt_logprobs),
            "prompt_token_ids": output.prompt_token_ids if self.return_token_ids else None,
            "routed_experts": None,
            "weight_versions": None,
        }

    def stream_chunks(
        self, request: EngineRequest, output: RequestOutput, completion: CompletionOutput, first: bool, count: int
    ) -> list[dict]:
        index = request.choice_index(completion.index)
        echo = first and self.body.echo
        text, token_ids, logprobs = self.covered(
            request, output, completion.delta_text, completion.delta_token_ids, completion.delta_logprobs, echo
        )
        body = self.logprobs(token_ids, logprobs, self.text_offsets.get(index, 0))
        if body and body["tokens"]:  # the next offset follows the tokens reported, not the text (held back)
            self.text_offsets[index] = body["text_offset"][-1] + len(body["tokens"][-1])
        choice = {
            "index": index,
            "text": text,
            "logprobs": body,
            "finish_reason": completion.finish_reason,
            "stop_reason": completion.stop_reason,
            "prompt_token_ids": output.prompt_token_ids if first and (echo or self.return_token_ids) else None,
            "token_ids": list(completion.delta_token_ids) if self.return_token_ids else None,
            "weight_versions": None,
        }
        return [self.chunk([choice], self.running_usage(request, count), kv_transfer_params=None)]

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
    if body.prompt_logprobs is not None:
        raise APIError(messages.PROMPT_EMBEDS_WITH_PROMPT_LOGPROBS)


async def create_completion(state: ServerState, body: CompletionRequest, raw_request: Request):
    check_completion_fields(body)
    state.check_model(body.model)
    check_prompt_embeds_fields(body)
    check_request_fields(body, NOT_IMPLEMENTED_COMPLETIONS)
    check_beam_search(body, streams=False)
    constraint = structured_outputs_params(body.structured_outputs, body.response_format)
    await precompile(state.engine.input_processor, constraint)
    header_id = raw_request.headers.get("x-request-id") or body.request_id
    return await CompletionJob(state, body, header_id, constraint).respond(raw_request)
