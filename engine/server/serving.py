"""What the completions and chat routes share: settings, the model check, max_tokens, the choices to run."""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from http import HTTPStatus

from kvtool.engine.server.errors import APIError
from kvtool.engine.server.generation import Choice
from kvtool.engine.server.metrics import ServerMetrics
from kvtool.engine.server.protocol import COMPLETIONS_DEFAULT_MAX_TOKENS
from kvtool.engine.sizing import defaults, messages
from kvtool.engine.sizing.request_length import server_output_budget

logger = logging.getLogger("kvtool.serve")
CLAMP_HEADER = "x-kvtool-max-tokens-clamped"


@dataclass
class ServerSettings:
    model_name: str
    max_model_len: int
    api_key: str | None = None
    overflow: str = defaults.DEFAULT_OVERFLOW
    default_max_tokens: int | None = None  # the profile's default for requests that omit max_tokens
    max_chars_per_token: int | None = None  # the tokenizer's longest token, for vLLM's prompt-characters check
    tool_call_parser: str | None = defaults.DEFAULT_TOOL_CALL_PARSER  # how tool_choice "auto" reads tool calls


@dataclass
class ServerState:
    engine: object
    settings: ServerSettings
    metrics: ServerMetrics
    started: int = field(default_factory=lambda: int(time.time()))
    active_request_ids: set[str] = field(default_factory=set)

    async def abort_all(self) -> None:
        for request_id in list(self.active_request_ids):
            await self.engine.abort(request_id)

    def check_model(self, model: str | None) -> None:
        if model is not None and model != self.settings.model_name:
            message = messages.MODEL_NOT_FOUND.format(model=model, aliases=self.settings.model_name)
            raise APIError(message, HTTPStatus.NOT_FOUND, "NotFoundError", "model")


@dataclass
class MaxTokens:
    """The max_tokens one engine request runs with, and how it was chosen."""

    value: int
    requested: int | None
    defaulted: bool  # the request did not set it
    clamped: bool = False

    def clamp_note(self) -> str | None:
        return f"{self.requested}->{self.value}" if self.clamped else None


def resolve_max_tokens(settings: ServerSettings, num_prompt_tokens: int, requested: int | None,
                       defaulted: bool, param: str = "max_tokens", prompt_chars: int | None = None) -> MaxTokens:
    """Apply the profile default and the overflow policy; raise vLLM's 400 when the request cannot run.

    `prompt_chars` is the length of a text prompt (None for token ids), for vLLM's character check.
    """
    if num_prompt_tokens == 0:
        raise APIError("The decoder prompt cannot be empty", param="prompt")
    if defaulted and settings.default_max_tokens is not None and num_prompt_tokens < settings.max_model_len:
        room = settings.max_model_len - num_prompt_tokens
        requested = min(settings.default_max_tokens, room)  # a default never makes a request fail
    value = server_output_budget(num_prompt_tokens, requested, settings.max_model_len, settings.overflow, param,
                                 prompt_chars, settings.max_chars_per_token)
    clamped = requested is not None and value < requested
    if clamped:
        logger.info("max_tokens %d lowered to %d: prompt of %d tokens, max_model_len %d (--overflow clamp)",
                    requested, value, num_prompt_tokens, settings.max_model_len)
    return MaxTokens(value, requested, defaulted, clamped)


def warn_if_default_truncated(request_id: str, max_tokens: MaxTokens, num_generated: int, finish_reason: str | None) -> None:
    """vLLM's most reported surprise: a completions request without max_tokens stops after 16 tokens."""
    if (max_tokens.defaulted and max_tokens.requested == COMPLETIONS_DEFAULT_MAX_TOKENS
            and finish_reason == "length" and num_generated == COMPLETIONS_DEFAULT_MAX_TOKENS):
        logger.warning("Request %s stopped at the default max_tokens=16 of /v1/completions; set max_tokens in the "
                       "request, or serve with a profile that sets a default (kvtool serve --profile chat-gateway).",
                       request_id)


def clamp_headers(max_tokens: list[MaxTokens]) -> dict[str, str]:
    notes = [note for note in (m.clamp_note() for m in max_tokens) if note]
    return {CLAMP_HEADER: ",".join(notes)} if notes else {}


def make_choices(base_id: str, prompts: list[list[int]], n: int, params_for) -> list[Choice]:
    """n choices per prompt; choice i*n+j runs prompt i with a seed derived from the request's seed."""
    choices = []
    for i, prompt_ids in enumerate(prompts):
        for j in range(n):
            params = params_for(i)
            if params.seed is not None and j:
                params.seed = params.seed + j
            index = i * n + j
            # a random tail keeps engine ids unique when clients reuse an x-request-id
            choices.append(Choice(index, i, prompt_ids, params, f"{base_id}-{index}-{uuid.uuid4().hex[:8]}", n))
    return choices


def request_id(header_value: str | None, prefix: str) -> str:
    return f"{prefix}-{header_value or uuid.uuid4().hex}"


def usage(prompt_lens: list[int], num_generated: int) -> dict:
    prompt_tokens = sum(prompt_lens)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": num_generated,
            "total_tokens": prompt_tokens + num_generated}
