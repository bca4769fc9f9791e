"""What the completions and chat routes share: settings, the model check, max_tokens, the choices to run."""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field, replace
from http import HTTPStatus
from typing import TYPE_CHECKING

from kvtool.engine.runtime.input_processor import ProcessedRequest
from kvtool.engine.runtime.truncation import Truncation
from kvtool.engine.server.defaults import DEFAULT_TOOL_CALL_PARSER
from kvtool.engine.server.errors import APIError
from kvtool.engine.server.generation import EngineRequest
from kvtool.engine.server.metrics import ServerMetrics
from kvtool.engine.sizing import defaults, messages
from kvtool.engine.sizing.request_length import MaxTokens, MaxTokensField

if TYPE_CHECKING:  # the server runs in the process that loaded it; importing it here would load torch
    from kvtool.engine.runtime.async_llm import AsyncLLM

logger = logging.getLogger("kvtool.serve")
CLAMP_HEADER = "x-kvtool-max-tokens-clamped"


@dataclass(frozen=True)
class OutputOptions:
    """vLLM's serve flags that change what responses carry."""

    return_tokens_as_token_ids: bool = False  # logprob tokens read `token_id:{id}` for every request
    enable_prompt_tokens_details: bool = False  # usage.prompt_tokens_details.cached_tokens
    enable_force_include_usage: bool = False  # every stream carries usage, in every chunk
    enable_per_request_metrics: bool = False  # a `metrics` object: TTFT, decode time, queue time, ITL, tokens/s


@dataclass
class ServerSettings:
    """The server's own settings; the engine's (max_model_len, overflow, ...) are its EngineConfig."""

    model_name: str
    api_keys: tuple[str, ...] = ()  # any one of them is accepted on the guarded paths
    default_max_tokens: int | None = None  # the profile's default for requests that omit max_tokens
    tool_call_parser: str | None = DEFAULT_TOOL_CALL_PARSER  # how tool_choice "auto" reads tool calls
    root_path: str | None = None  # a path-routing proxy's prefix: routes answer under it and without it
    enable_server_load_tracking: bool = False  # count generation requests in flight for GET /load
    output: OutputOptions = field(default_factory=OutputOptions)
    trust_request_chat_template: bool = False  # a request's own `chat_template` is used (vLLM's flag)
    enable_request_id_headers: bool = False  # every reply carries x-request-id, made up where the request has none
    enable_tokenizer_info_endpoint: bool = False  # GET /tokenizer_info answers


@dataclass
class ServerState:
    engine: AsyncLLM
    settings: ServerSettings
    metrics: ServerMetrics
    started: int = field(default_factory=lambda: int(time.time()))
    active_request_ids: set[str] = field(default_factory=set)
    server_load: int = 0  # generation requests in flight, counted with --enable-server-load-tracking

    @property
    def max_model_len(self) -> int:
        return self.engine.config.model_config.max_model_len

    async def abort_all(self) -> None:
        for request_id in list(self.active_request_ids):
            await self.engine.abort(request_id)

    def health_status(self) -> int:
        """200 while the engine runs; 503 once it is dead (as vLLM's EngineDeadError)."""
        return HTTPStatus.SERVICE_UNAVAILABLE if self.engine.errored else HTTPStatus.OK

    def check_model(self, model: str | None) -> None:
        if model is not None and model != self.settings.model_name:
            message = messages.MODEL_NOT_FOUND.format(requested_model=model, aliases=self.settings.model_name)
            raise APIError(message, HTTPStatus.NOT_FOUND, "NotFoundError", "model")


def process_prompts(
    state: ServerState,
    prompts: list,
    max_tokens: MaxTokensField,
    params_for,
    add_special_tokens: bool = True,
    truncation: Truncation | None = None,
) -> list[ProcessedRequest]:
    """Every prompt through the engine's InputProcessor (tokenize, validate, decide max_tokens): 400s come from there.

    `max_tokens` is the route's field; the serving profile's default joins it here. `params_for(max_tokens)` builds
    the request's SamplingParams from what the field asks for.
    """
    settings, processor = state.settings, state.engine.input_processor
    field = replace(max_tokens, profile_default=settings.default_max_tokens)
    processed = []
    for prompt in prompts:
        request = processor.process(
            prompt,
            params_for(field.requested(state.max_model_len)),
            max_tokens=field,
            add_special_tokens=add_special_tokens,
            truncation=truncation,
        )
        if request.max_tokens.clamped:
            logger.info(
                "max_tokens %d lowered to %d: prompt of %d tokens, max_model_len %d (--overflow clamp)",
                request.max_tokens.requested,
                request.max_tokens.value,
                len(request.prompt_token_ids),
                state.max_model_len,
            )
        processed.append(request)
    return processed


def warn_if_default_truncated(
    request_id: str, max_tokens: MaxTokens, num_generated: int, finish_reason: str | None
) -> None:
    """vLLM's most reported surprise: a completions request without max_tokens stops after 16 tokens."""
    if (
        max_tokens.requested == defaults.DEFAULT_MAX_TOKENS
        and finish_reason == "length"
        and num_generated == defaults.DEFAULT_MAX_TOKENS
    ):
        logger.warning(
            "Request %s stopped at the default max_tokens=%d of /v1/completions; set max_tokens in the "
            "request, or serve with a profile that sets a default (kvtool serve --profile chat-gateway).",
            request_id,
            defaults.DEFAULT_MAX_TOKENS,
        )


def clamp_headers(max_tokens: list[MaxTokens]) -> dict[str, str]:
    notes = [f"{m.requested}->{m.value}" for m in max_tokens if m.clamped]
    return {CLAMP_HEADER: ",".join(notes)} if notes else {}


def make_requests(base_id: str, processed: list[ProcessedRequest], n: int) -> list[EngineRequest]:
    """One engine request per prompt; the engine runs its n sequences (seeded ones with seed + index, as vLLM)."""
    # a random tail keeps engine ids unique when clients reuse an x-request-id
    return [
        EngineRequest(i, request, f"{base_id}-{i}-{uuid.uuid4().hex[:8]}", n) for i, request in enumerate(processed)
    ]


def request_id(header_value: str | None, prefix: str) -> str:
    return f"{prefix}-{header_value or uuid.uuid4().hex}"
