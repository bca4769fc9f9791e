"""The request body of POST /v1/responses: OpenAI's Responses API fields, with vLLM 0.33's extras and defaults
(vllm/entrypoints/openai/responses/protocol.py ResponsesRequest).

Tools, tool_choice, text and reasoning are the official `openai` package's models. Input items stay plain
objects here: input.py reads each by its type, with the openai model for that type, and names the
item that is wrong. Sampling values are checked by the engine, in vLLM's words, as vLLM's are.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from openai.types.responses import ResponseTextConfig
from openai.types.responses.response import ToolChoice
from openai.types.responses.tool import Tool
from openai.types.shared import Reasoning
from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, WrapValidator, field_validator
from pydantic_core import PydanticCustomError

from kvtool.engine.server.protocol import Seed, ServedModel, StrictModel, StructuredOutputsField, TokenId

Include = Literal[
    "code_interpreter_call.outputs",
    "computer_call_output.output.image_url",
    "file_search_call.results",
    "message.input_image.image_url",
    "message.output_text.logprobs",
    "reasoning.encrypted_content",
]
OUTPUT_LOGPROBS = "message.output_text.logprobs"


def strict(annotation):
    """One of the openai package's models, validated as strictly as kvtool's own (false is no 0, "1" no 1)."""
    adapter = TypeAdapter(annotation)

    def validate(value, handler):
        try:
            return adapter.validate_python(value, strict=True)
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(part) for part in first["loc"] if not _is_branch(str(part)))
            raise PydanticCustomError(
                "strict", "{where}{msg}", {"where": f"{where}: " if where else "", "msg": first["msg"]}
            ) from None

    return Annotated[annotation, WrapValidator(validate)]


def _is_branch(part: str) -> bool:
    """pydantic's names for union branches in an error location (FunctionTool, tagged-union[...])."""
    return part[:1].isupper() or "[" in part


class PromptCacheOptions(StrictModel):
    """Accepted and echoed, as vLLM does; neither acts on them."""

    mode: Literal["implicit", "explicit"] = "implicit"
    ttl: Literal["30m"] = "30m"
    comparison_response_id: str | None = None
    prewarm: bool | None = None


class ResponsesRequest(StrictModel):
    model_config = ConfigDict(strict=True, extra="allow")

    model: ServedModel = None
    input: str | list[dict[str, Any]] = Field(description="A text, or a list of OpenAI Responses input items.")
    instructions: str | None = None
    background: bool | None = False
    include: list[Include] | None = None
    max_output_tokens: int | None = Field(None, ge=1)
    max_tool_calls: int | None = None
    metadata: dict[str, str] | None = None
    logit_bias: dict[str, float] | None = None
    parallel_tool_calls: bool | None = True
    previous_response_id: str | None = None
    prompt: dict[str, Any] | None = None
    reasoning: strict(Reasoning) | None = None
    include_reasoning: bool = True
    service_tier: Literal["auto", "default", "flex", "scale", "priority"] = "auto"
    store: bool | None = True
    stream: bool | None = False
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    text: strict(ResponseTextConfig) | None = None
    tool_choice: strict(ToolChoice) = "auto"
    tools: strict(list[Annotated[Tool, Field(discriminator="type")]]) = Field(default_factory=list)
    top_logprobs: int | None = 0  # null is the same as leaving it out (OpenAI's spec)
    user: str | None = None
    skip_special_tokens: bool | None = None
    include_stop_str_in_output: bool = False
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    repetition_penalty: float | None = None
    prompt_cache_key: str | None = None
    prompt_cache_options: PromptCacheOptions | None = None
    prompt_cache_retention: Literal["in_memory", "24h"] | None = None
    safety_identifier: str | None = None
    request_id: str | None = Field(None, description="The response's id; resp_<random> when left out.")
    enable_response_messages: bool = False
    structured_outputs: StructuredOutputsField | None = None
    seed: Seed | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[TokenId] | None = None
    ignore_eos: bool = False
    chat_template_kwargs: dict[str, Any] | None = None

    @field_validator("prompt_cache_retention", mode="before")
    @classmethod
    def _older_spelling(cls, value: object) -> object:
        return "in_memory" if value == "in-memory" else value  # what older SDKs sent

    def output_logprobs(self) -> bool:
        return OUTPUT_LOGPROBS in (self.include or [])

    def num_top_logprobs(self) -> int:
        return self.top_logprobs or 0
