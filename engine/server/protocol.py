"""Request bodies of the OpenAI-compatible API, with vLLM's extra sampling fields and defaults."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from kvtool.engine.runtime.config import SEED_MAX, SEED_MIN, SamplingParams
from kvtool.engine.runtime.input_processor import MAX_LOGPROBS
from kvtool.engine.sizing.messages import FIELD_NOT_SUPPORTED
from kvtool.errors import InvalidRequestError

COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # vLLM's /v1/completions default, in every version

# The vocabulary bound of token ids is the served model's: build_app writes it into the OpenAPI document.
TokenId = Annotated[int, Field(ge=0, json_schema_extra={"x-token-id": True})]
TokenIds = Annotated[list[TokenId], Field(min_length=1)]
NonEmptyText = Annotated[str, Field(min_length=1)]
MAX_MODEL_LEN_BOUND = {"x-max-model-len": True}
Seed = Annotated[int, Field(ge=SEED_MIN, le=SEED_MAX, json_schema_extra={"x-seed": True})]
ServedModel = Annotated[str | None, Field(json_schema_extra={"x-served-model": True})]


class StrictModel(BaseModel):
    """No coercion: "yes" is not a bool and false is not a token id (OpenAI's API refuses both)."""

    model_config = ConfigDict(strict=True, extra="ignore")


class StreamOptions(StrictModel):
    include_usage: bool = False
    continuous_usage_stats: bool = False


class _SamplingFields(StrictModel):
    """Fields shared by completions and chat; names, defaults and ranges as vLLM's SamplingParams checks them."""

    model: ServedModel = None
    n: int = Field(1, ge=1, le=128)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=-1)
    min_p: float | None = Field(None, ge=0.0, le=1.0)
    seed: Seed | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[TokenId] | None = None
    logit_bias: dict[str, float] | None = Field(None, description="Not supported: any value is refused (400).")
    allowed_token_ids: list[TokenId] | None = Field(None, description="Not supported: any value is refused (400).")
    ignore_eos: bool = False
    min_tokens: int = Field(0, ge=0)
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    repetition_penalty: float | None = Field(None, gt=0.0)
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None

    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    def continuous_usage(self) -> bool:
        """vLLM's extension: usage so far in every chunk."""
        return self.include_usage() and self.stream_options.continuous_usage_stats

    def to_sampling_params(self, max_tokens: int | None, logprobs: int | None) -> SamplingParams:
        """One engine request's parameters: the engine runs its n sequences."""
        for name in ("logit_bias", "allowed_token_ids"):
            if getattr(self, name) is not None:
                raise InvalidRequestError(FIELD_NOT_SUPPORTED.format(param=name), name)
        given = {
            name: getattr(self, name)
            for name in (
                "temperature",
                "top_p",
                "top_k",
                "min_p",
                "presence_penalty",
                "frequency_penalty",
                "repetition_penalty",
            )
            if getattr(self, name) is not None
        }
        return SamplingParams(
            n=self.n,
            max_tokens=max_tokens,
            seed=self.seed,
            stop=self.stop,
            stop_token_ids=self.stop_token_ids,
            ignore_eos=self.ignore_eos,
            min_tokens=self.min_tokens,
            logprobs=logprobs,
            include_stop_str_in_output=self.include_stop_str_in_output,
            skip_special_tokens=self.skip_special_tokens,
            **given,
        )


class CompletionRequest(_SamplingFields):
    prompt: NonEmptyText | TokenIds | list[NonEmptyText] | list[TokenIds] = Field(min_length=1)
    max_tokens: int | None = Field(COMPLETIONS_DEFAULT_MAX_TOKENS, ge=1, json_schema_extra=MAX_MODEL_LEN_BOUND)
    logprobs: int | None = Field(None, ge=0, le=MAX_LOGPROBS)
    echo: bool = False

    def max_tokens_given(self) -> bool:
        return "max_tokens" in self.model_fields_set

    def prompts(self) -> list[str] | list[list[int]]:
        """The batch of prompts: a string or a token list is a batch of one."""
        if isinstance(self.prompt, str) or (self.prompt and isinstance(self.prompt[0], int)):
            return [self.prompt]
        return list(self.prompt)


class TextPart(StrictModel):
    type: Literal["text"]
    text: str


class ChatMessage(StrictModel):
    model_config = ConfigDict(strict=True, extra="allow")

    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: str | list[TextPart] | None = None

    def as_template_message(self) -> dict:
        text = self.content if not isinstance(self.content, list) else "".join(p.text for p in self.content)
        return {"role": self.role, "content": text or ""}


class ChatCompletionRequest(_SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=1, json_schema_extra=MAX_MODEL_LEN_BOUND)
    max_completion_tokens: int | None = Field(None, ge=1, json_schema_extra=MAX_MODEL_LEN_BOUND)
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=MAX_LOGPROBS)
    add_generation_prompt: bool = True

    def requested_max_tokens(self) -> tuple[int | None, str]:
        """(value, field name): max_completion_tokens wins over the deprecated max_tokens."""
        if self.max_completion_tokens is not None:
            return self.max_completion_tokens, "max_completion_tokens"
        return self.max_tokens, "max_tokens"

    def num_logprobs(self) -> int | None:
        return (self.top_logprobs or 0) if self.logprobs else None


class TokenizeRequest(StrictModel):
    model: ServedModel = None
    prompt: str | None = None
    messages: list[ChatMessage] | None = Field(None, min_length=1)
    add_special_tokens: bool = True
    add_generation_prompt: bool = True


class DetokenizeRequest(StrictModel):
    model: ServedModel = None
    tokens: list[TokenId]


# Response bodies, for the OpenAPI document (the routes build plain dicts of the same shape).


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class CompletionChoice(BaseModel):
    index: int
    text: str
    logprobs: dict | None
    finish_reason: str | None
    stop_reason: int | str | None = None


class _Response(BaseModel):
    id: str
    object: str
    created: int
    model: str
    usage: Usage | None


class CompletionResponse(_Response):
    choices: list[CompletionChoice]


class AssistantMessage(BaseModel):
    role: Literal["assistant"]
    content: str


class ChatChoice(BaseModel):
    index: int
    message: AssistantMessage
    logprobs: dict | None
    finish_reason: str | None
    stop_reason: int | str | None = None


class ChatCompletionResponse(_Response):
    choices: list[ChatChoice]


class TokenizeResponse(BaseModel):
    count: int
    max_model_len: int
    tokens: list[int]


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
    version: str
