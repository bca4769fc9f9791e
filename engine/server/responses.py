"""Response bodies of the OpenAI-compatible API, for the OpenAPI document (the routes build plain dicts of the
same shape)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


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
    tool_calls: list[ToolCall] | None = None


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
