"""Response bodies of the OpenAI-compatible API, for the OpenAPI document (the routes build plain dicts of the
same shape). As in vLLM 0.33, a whole answer carries every field, null when unset."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class PromptTokensDetails(BaseModel):
    cached_tokens: int | None = None  # prompt tokens found in the prefix cache (--enable-prompt-tokens-details)
    created_cache_tokens: int | None = None
    multimodal_tokens: dict[str, int] | None = None


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails | None = None
    completion_tokens_details: dict | None = None


class PromptLogprob(BaseModel):
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


# per prompt token: null for the first, else token id -> its logprob (the prompt token first, then the top ones)
PromptLogprobs = list[dict[int, PromptLogprob] | None] | None


class CompletionChoice(BaseModel):
    index: int
    text: str
    logprobs: dict | None
    finish_reason: str | None
    stop_reason: int | str | None = None
    token_ids: list[int] | None = None  # with return_token_ids
    prompt_logprobs: PromptLogprobs = None
    prompt_token_ids: list[int] | None = None  # with return_token_ids
    routed_experts: str | None = None
    weight_versions: list | None = None


class PerRequestMetrics(BaseModel):
    """--enable-per-request-metrics, for one prompt and n = 1."""

    time_to_first_token_ms: float | None = None
    generation_time_ms: float | None = None
    queue_time_ms: float | None = None
    mean_itl_ms: float | None = None
    tokens_per_second: float | None = None
    speculative_decoding: dict | None = None


class _Response(BaseModel):
    id: str
    object: str
    created: int
    model: str
    service_tier: str | None = None
    system_fingerprint: str | None = None
    usage: Usage | None
    kv_transfer_params: dict | None = None
    ec_transfer_params: dict | None = None
    metrics: PerRequestMetrics | None = None


class CompletionResponse(_Response):
    choices: list[CompletionChoice]


class FunctionCall(BaseModel):
    name: str
    arguments: str  # JSON text


class ToolCall(BaseModel):
    id: str
    type: Literal["function"]
    function: FunctionCall


class AssistantMessage(BaseModel):
    role: Literal["assistant"]
    content: str | None
    refusal: str | None = None
    annotations: dict | None = None
    audio: dict | None = None
    function_call: FunctionCall | None = None
    tool_calls: list[ToolCall] | None = None  # left out when there are none
    reasoning: str | None = None


class ChatChoice(BaseModel):
    index: int
    message: AssistantMessage
    logprobs: dict | None
    finish_reason: str | None
    stop_reason: int | str | None = None
    token_ids: list[int] | None = None  # with return_token_ids
    routed_experts: str | None = None
    weight_versions: list | None = None


class ChatCompletionResponse(_Response):
    choices: list[ChatChoice]
    prompt_logprobs: PromptLogprobs = None
    prompt_token_ids: list[int] | None = None  # with return_token_ids
    prompt_text: str | None = None


class TokenizeResponse(BaseModel):
    count: int
    max_model_len: int
    tokens: list[int]
    token_strs: list[str] | None = None


class DetokenizeResponse(BaseModel):
    prompt: str


class ModelCard(BaseModel):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str
    root: str
    parent: str | None
    max_model_len: int
    permission: list


class ModelList(BaseModel):
    object: Literal["list"]
    data: list[ModelCard]


class VersionResponse(BaseModel):
    version: str  # the vLLM release whose API this server follows
    kvtool_version: str


class ServerLoadResponse(BaseModel):
    server_load: int
