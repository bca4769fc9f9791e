"""Request bodies of the OpenAI-compatible API, with vLLM's extra sampling fields and defaults."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kvtool.engine.runtime.config import SEED_MAX, SEED_MIN, SamplingParams
from kvtool.engine.runtime.structured_output import StructuredOutputsParams
from kvtool.engine.server.request_checks import (
    PROMPT_EMBEDS_PLACEHOLDER,
    TEXT_PART_KEYS,
    batch_mode,
    check_content_part,
    prompt_or_embeds,
)
from kvtool.engine.sizing.defaults import DEFAULT_MAX_TOKENS, MAX_LOGPROBS

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


class _SamplingFields(StrictModel):
    """Fields shared by completions and chat; names, defaults and ranges as vLLM's SamplingParams checks them.

    Extra fields are kept (as vLLM keeps them) so that request_fields.py can refuse the ones kvtool
    does not implement and log the ones nobody knows.
    """

    model_config = ConfigDict(strict=True, extra="allow")

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

    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    def continuous_usage(self) -> bool:
        """vLLM's extension: usage so far in every chunk."""
        return self.include_usage() and self.stream_options.continuous_usage_stats

    def to_sampling_params(
        self, max_tokens: int | None, logprobs: int | None, structured_outputs: StructuredOutputsParams | None = None
    ) -> SamplingParams:
        """One engine request's parameters: the engine runs its n sequences."""
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
            logit_bias=self.logit_bias,
            allowed_token_ids=self.allowed_token_ids,
            bad_words=self.bad_words or None,
            structured_outputs=structured_outputs,
            **given,
        )


class CompletionRequest(_SamplingFields):
    prompt: NonEmptyText | TokenIds | list[NonEmptyText] | list[TokenIds] | None = Field(None, min_length=1)
    max_tokens: int | None = Field(DEFAULT_MAX_TOKENS, ge=1, json_schema_extra=MAX_MODEL_LEN_BOUND)
    logprobs: int | None = Field(None, ge=0, le=MAX_LOGPROBS)
    echo: bool = False
    add_special_tokens: bool = True

    def max_tokens_given(self) -> bool:
        return "max_tokens" in self.model_fields_set

    def prompts(self) -> list[str] | list[list[int]]:
        """The batch of prompts: a string or a token list is a batch of one."""
        if self.prompt is None:
            return []
        if isinstance(self.prompt, str) or isinstance(self.prompt[0], int):
            return [self.prompt]
        return list(self.prompt)

    # --- prompt_embeds (--enable-prompt-embeds) ---
    prompt_embeds: str | list[str] | None = None  # base64 of torch-saved (num_tokens, hidden_size) tensors

    def embeds_payloads(self) -> list[str]:
        return [self.prompt_embeds] if isinstance(self.prompt_embeds, str) else list(self.prompt_embeds or [])

    @model_validator(mode="before")
    @classmethod
    def check_prompt_or_embeds(cls, data: Any) -> Any:
        return prompt_or_embeds(data)


class ContentPart(StrictModel):
    """A chat content part: text (or vLLM's other text kinds) or prompt_embeds; another type is a 400 naming it."""

    model_config = ConfigDict(strict=True, extra="allow")

    type: str | None = None
    text: str | None = None
    data: str | None = None  # prompt_embeds: base64 of a torch-saved (num_tokens, hidden_size) tensor

    @model_validator(mode="after")
    def check_type(self) -> ContentPart:
        check_content_part(self.type, self.data)
        return self

    def as_text(self) -> str:
        """The part's text; a prompt_embeds part shows as vLLM's placeholder (the chat route splices its rows)."""
        if self.type == "prompt_embeds":
            return PROMPT_EMBEDS_PLACEHOLDER
        key = TEXT_PART_KEYS[self.type]
        return self.text if key == "text" else (self.model_extra or {}).get(key)


class FunctionDefinition(StrictModel):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(StrictModel):
    type: Literal["function"] = "function"
    function: FunctionDefinition


class NamedFunction(StrictModel):
    name: str


class NamedToolChoice(StrictModel):
    type: Literal["function"] = "function"
    function: NamedFunction


class ChatMessage(StrictModel):
    model_config = ConfigDict(strict=True, extra="allow")

    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None

    def text(self, part_text=ContentPart.as_text) -> str:
        """The content as one string: parts joined by newlines, as vLLM joins them (`part_text` renders each)."""
        if not isinstance(self.content, list):
            return self.content
        return "\n".join(text for text in map(part_text, self.content) if text is not None)

    def as_template_message(self, part_text=ContentPart.as_text) -> dict:
        message = {"role": self.role, "content": self.text(part_text) or ""}
        for key in ("name", "tool_calls", "tool_call_id"):
            if getattr(self, key) is not None:
                message[key] = getattr(self, key)
        return message


class ChatCompletionRequest(_SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=1, json_schema_extra=MAX_MODEL_LEN_BOUND)
    max_completion_tokens: int | None = Field(None, ge=1, json_schema_extra=MAX_MODEL_LEN_BOUND)
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=MAX_LOGPROBS)
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    add_special_tokens: bool = False
    echo: bool = False
    chat_template: str | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    documents: list[dict[str, str]] | None = None
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = True

    def requested_max_tokens(self) -> tuple[int | None, str]:
        """(value, field name): max_completion_tokens wins over the deprecated max_tokens."""
        if self.max_completion_tokens is not None:
            return self.max_completion_tokens, "max_completion_tokens"
        return self.max_tokens, "max_tokens"

    def num_logprobs(self) -> int | None:
        return (self.top_logprobs or 0) if self.logprobs else None


class TokenizeRequest(StrictModel):
    """vLLM's two /tokenize bodies in one: {"prompt"} or {"messages"} (add_special_tokens: True / False)."""

    model: ServedModel = None
    prompt: str | None = None
    messages: list[ChatMessage] | None = Field(None, min_length=1)
    add_special_tokens: bool | None = None
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    return_token_strs: bool | None = False
    tools: list[Tool] | None = None
    chat_template_kwargs: dict[str, Any] | None = None


class DetokenizeRequest(StrictModel):
    model: ServedModel = None
    tokens: list[TokenId]


class BatchChatCompletionRequest(ChatCompletionRequest):
    """POST /v1/chat/completions/batch: `messages` is a list of conversations, one choice each (index i for
    conversation i), as vLLM 0.33's BatchChatCompletionRequest; no streaming, tools, n > 1 or beam search."""

    messages: list[Annotated[list[ChatMessage], Field(min_length=1)]] = Field(min_length=1)
    tool_choice: Literal["none"] | None = "none"

    @model_validator(mode="before")
    @classmethod
    def check_batch_mode(cls, data: Any) -> Any:
        return batch_mode(data)
