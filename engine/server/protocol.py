"""Request bodies of the OpenAI-compatible API, with vLLM's extra sampling fields and defaults (the bodies that
carry chat messages are in chat/protocol.py)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kvtool.engine.runtime.config import SEED_MAX, SEED_MIN, SamplingParams
from kvtool.engine.runtime.structured_output import StructuredOutputsParams
from kvtool.engine.runtime.truncation import Truncation
from kvtool.engine.server import body_checks
from kvtool.engine.sizing.defaults import DEFAULT_MAX_TOKENS, INT64_MAX
from kvtool.engine.sizing.request_length import MaxTokensField

# The sampling fields a request passes on only when it sets them (SamplingParams keeps its defaults otherwise).
SAMPLING_KNOBS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
)
# Bounds that are the served model's (its vocabulary, max_model_len, name) are marks here, which openapi.py
# replaces with the values when build_app writes the OpenAPI document.
TOKEN_ID_MARK = "x-token-id"
MAX_TOKENS_MARK = "x-max-model-len"
MODEL_MARK = "x-served-model"
SEED_MARK = "x-seed"  # the document's numbers are floats: 2**63 - 1 needs its exact value
TokenId = Annotated[int, Field(ge=0, json_schema_extra={TOKEN_ID_MARK: True})]
TokenIds = Annotated[list[TokenId], Field(min_length=1)]
NonEmptyText = Annotated[str, Field(min_length=1)]
MAX_MODEL_LEN_BOUND = {MAX_TOKENS_MARK: True}
Seed = Annotated[int, Field(ge=SEED_MIN, le=SEED_MAX, json_schema_extra={SEED_MARK: True})]
ServedModel = Annotated[str | None, Field(json_schema_extra={MODEL_MARK: True})]
# vLLM's bound is int64; the document says max_model_len, past which the InputProcessor refuses it in vLLM's words
PromptTokensKept = Annotated[int, Field(ge=-1, le=INT64_MAX, json_schema_extra=MAX_MODEL_LEN_BOUND)]


def count_from_bool(cls, value):
    """vLLM's request types coerce a bool where a logprob count goes (`logprobs: false` is 0, `true` 1);
    clients send them so (SageMaker's, vLLM's own tests)."""
    return int(value) if isinstance(value, bool) else value


class StrictModel(BaseModel):
    """No coercion: "yes" is not a bool and false is not a token id (OpenAI's API refuses both)."""

    model_config = ConfigDict(strict=True, extra="ignore")


class StreamOptions(StrictModel):
    include_usage: bool = False
    continuous_usage_stats: bool = False


class JsonSchemaFormat(StrictModel):
    model_config = ConfigDict(strict=True, extra="ignore", populate_by_name=True)

    name: str = "response"
    description: str | None = None
    json_schema: dict[str, Any] | None = Field(None, alias="schema")
    strict: bool | None = None


class ResponseFormat(StrictModel):
    type: Literal["text", "json_object", "json_schema", "structural_tag"]
    json_schema: JsonSchemaFormat | None = None


class StructuredOutputsField(StrictModel):
    """vLLM's `structured_outputs` request field: one of json, regex, choice, grammar, json_object."""

    model_config = ConfigDict(strict=True, extra="ignore", populate_by_name=True)

    json_: str | dict[str, Any] | None = Field(None, alias="json")
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None
    json_object: bool | None = None
    disable_any_whitespace: bool = False
    disable_additional_properties: bool = False
    whitespace_pattern: str | None = None
    structural_tag: str | None = None


class SamplingFields(StrictModel):
    """Fields shared by completions and chat; names, defaults and ranges as vLLM's SamplingParams checks them.

    Extra fields are kept (as vLLM keeps them) so that request_fields.py can refuse the ones kvtool
    does not implement and log the ones nobody knows.
    """

    model_config = ConfigDict(strict=True, extra="allow")
    constraint_param: ClassVar[str | None] = "structured_outputs"  # what vLLM names when two kinds are given

    model: ServedModel = None
    n: int = Field(1, ge=1, le=128)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=-1)
    min_p: float | None = Field(None, ge=0.0, le=1.0)
    seed: Seed | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[TokenId] | None = None
    logit_bias: dict[str, float] | None = Field(None, description="Token id (as a string) -> bias, clamped to ±100.")
    allowed_token_ids: list[TokenId] | None = None
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
    bad_words: list[str] = Field(default_factory=list)
    response_format: ResponseFormat | None = None
    structured_outputs: StructuredOutputsField | None = None
    request_id: str | None = None
    # vLLM's token-level fields (token_fields.py checks them together, as vLLM's check_logprobs does)
    prompt_logprobs: int | None = None
    logprob_token_ids: list[TokenId] | None = None
    return_token_ids: bool | None = None
    return_tokens_as_token_ids: bool | None = None
    # vLLM's fields for beam search (beam_search.py), prompt truncation (the InputProcessor cuts it), KV transfer
    use_beam_search: bool = False
    length_penalty: float = 1.0
    truncate_prompt_tokens: PromptTokensKept | None = None
    truncation_side: Literal["left", "right"] | None = None
    # no KV connector here: nothing is transferred, chat still takes forwarded prompt ids (chat/completions.py)
    kv_transfer_params: dict[str, Any] | None = None

    _raw_body_checks = model_validator(mode="before")(body_checks.sampling_body)
    _prompt_logprobs_bool = field_validator("prompt_logprobs", mode="before")(count_from_bool)

    def usage_in_stream(self, force: bool = False) -> tuple[bool, bool]:
        """(a final usage chunk, usage so far in every chunk): as stream_options ask, or both when the server forces."""
        if force:
            return True, True
        include = bool(self.stream_options and self.stream_options.include_usage)
        return include, include and self.stream_options.continuous_usage_stats

    def truncation(self) -> Truncation | None:
        if self.truncate_prompt_tokens is None:
            return None
        return Truncation(self.truncate_prompt_tokens, self.truncation_side)

    def to_sampling_params(
        self, max_tokens: int | None, logprobs: int | None, structured_outputs: StructuredOutputsParams | None = None
    ) -> SamplingParams:
        """One engine request's parameters: the engine runs its n sequences."""
        given = {name: getattr(self, name) for name in SAMPLING_KNOBS if getattr(self, name) is not None}
        return SamplingParams(
            n=self.n,
            max_tokens=max_tokens,
            seed=self.seed,
            stop=self.stop,
            stop_token_ids=self.stop_token_ids,
            ignore_eos=self.ignore_eos,
            min_tokens=self.min_tokens,
            logprobs=None if self.logprob_token_ids else logprobs,
            prompt_logprobs=self.prompt_logprobs_asked(),
            logprob_token_ids=self.logprob_token_ids or None,
            include_stop_str_in_output=self.include_stop_str_in_output,
            skip_special_tokens=self.skip_special_tokens,
            logit_bias=self.logit_bias,
            allowed_token_ids=self.allowed_token_ids,
            bad_words=self.bad_words or None,
            structured_outputs=structured_outputs,
            **given,
        )


class CompletionRequest(SamplingFields):
    prompt: NonEmptyText | TokenIds | list[NonEmptyText] | list[TokenIds] | None = Field(None, min_length=1)
    max_tokens: int | None = Field(DEFAULT_MAX_TOKENS, json_schema_extra=MAX_MODEL_LEN_BOUND)  # 0 with echo: score
    logprobs: int | None = None  # -1: the vocabulary; at most the server's --max-logprobs
    echo: bool = False
    add_special_tokens: bool = True
    prompt_embeds: str | list[str] | None = None  # base64 of torch-saved (num_tokens, hidden_size) tensors

    _raw_completion_checks = model_validator(mode="before")(body_checks.completion_body)

    _logprobs_bool = field_validator("logprobs", mode="before")(count_from_bool)

    def max_tokens_given(self) -> bool:
        return "max_tokens" in self.model_fields_set

    def max_tokens_field(self) -> MaxTokensField:
        """max_tokens as sent: vLLM's 16 when left out, and `echo` with 0 scores the prompt."""
        return MaxTokensField(
            self.max_tokens,
            sent=self.max_tokens_given(),
            route_default=DEFAULT_MAX_TOKENS,
            echo_only=self.echo_without_generation(),
        )

    def echo_without_generation(self) -> bool:
        """`echo` with `max_tokens: 0` scores the prompt alone (lm-evaluation-harness's log-likelihoods)."""
        return self.echo and self.max_tokens == 0

    def prompt_logprobs_asked(self) -> int | None:
        """vLLM: `echo` with `logprobs` scores the prompt with as many logprobs."""
        return self.logprobs if self.prompt_logprobs is None and self.echo else self.prompt_logprobs

    def prompts(self) -> list[str] | list[list[int]]:
        """The batch of prompts: a string or a token list is a batch of one."""
        if self.prompt is None:
            return []
        if isinstance(self.prompt, str) or isinstance(self.prompt[0], int):
            return [self.prompt]
        return list(self.prompt)

    def embeds_payloads(self) -> list[str]:
        return [self.prompt_embeds] if isinstance(self.prompt_embeds, str) else list(self.prompt_embeds or [])


class DetokenizeRequest(StrictModel):
    model: ServedModel = None
    tokens: list[TokenId]
