"""Request bodies that carry chat messages: chat completions (one conversation, or a batch of them) and
/tokenize (a prompt or messages); content parts, tools and tool choice as vLLM reads them."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Field, model_validator

from kvtool.engine.server import body_checks
from kvtool.engine.server.body_checks import PROMPT_EMBEDS_PLACEHOLDER, TEXT_PART_KEYS, check_content_part
from kvtool.engine.server.protocol import MAX_MODEL_LEN_BOUND, SamplingFields, ServedModel, StrictModel
from kvtool.engine.sizing.request_length import MaxTokensField


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

    role: str  # OpenAI's roles or any other: vLLM passes a custom role to the chat template
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None

    def text(self, part_text=ContentPart.as_text) -> str:
        """The content as one string: parts joined by newlines, as vLLM joins them (`part_text` renders each)."""
        if not isinstance(self.content, list):
            return self.content
        return "\n".join(text for text in map(part_text, self.content) if text is not None)

    def has_non_text_content(self) -> bool:
        return isinstance(self.content, list) and any(part.type not in TEXT_PART_KEYS for part in self.content)

    def as_template_message(self, part_text=ContentPart.as_text) -> dict:
        message = {"role": self.role, "content": self.text(part_text) or ""}
        for key in ("name", "tool_calls", "tool_call_id"):
            if getattr(self, key) is not None:
                message[key] = getattr(self, key)
        return message


class ChatCompletionRequest(SamplingFields):
    constraint_param: ClassVar[str | None] = None

    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=1, json_schema_extra=MAX_MODEL_LEN_BOUND)
    max_completion_tokens: int | None = Field(None, ge=1, json_schema_extra=MAX_MODEL_LEN_BOUND)
    logprobs: bool = False
    top_logprobs: int | None = None  # -1: the vocabulary; at most the server's --max-logprobs
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

    _raw_chat_checks = model_validator(mode="before")(body_checks.chat_body)

    def max_tokens_field(self) -> MaxTokensField:
        """max_completion_tokens, which wins over the deprecated max_tokens; neither: the rest of the context."""
        if self.max_completion_tokens is not None:
            return MaxTokensField(self.max_completion_tokens, "max_completion_tokens")
        return MaxTokensField(self.max_tokens, sent=self.max_tokens is not None)

    def num_logprobs(self) -> int | None:
        return (self.top_logprobs or 0) if self.logprobs else None

    def prompt_logprobs_asked(self) -> int | None:
        """vLLM: a chat `echo` scores the prompt with `top_logprobs` logprobs."""
        return (self.top_logprobs or 0) if self.prompt_logprobs is None and self.echo else self.prompt_logprobs


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
    chat_template: str | None = None
    chat_template_kwargs: dict[str, Any] | None = None


class BatchChatCompletionRequest(ChatCompletionRequest):
    """POST /v1/chat/completions/batch: `messages` is a list of conversations, one choice each (index i for
    conversation i), as vLLM 0.33's BatchChatCompletionRequest; no streaming, tools, n > 1 or beam search."""

    messages: list[Annotated[list[ChatMessage], Field(min_length=1)]] = Field(min_length=1)
    tool_choice: Literal["none"] | None = "none"

    _raw_batch_checks = model_validator(mode="before")(body_checks.batch_body)
