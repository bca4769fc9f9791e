"""build_app(engine, settings): the OpenAI-compatible FastAPI app around a running AsyncLLM."""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import uuid
from http import HTTPStatus
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from kvtool import __version__
from kvtool.engine.server.chat.completions import create_chat_completion
from kvtool.engine.server.chat.prompt import requested_template
from kvtool.engine.server.chat.protocol import BatchChatCompletionRequest, ChatCompletionRequest, TokenizeRequest
from kvtool.engine.server.completions import create_completion
from kvtool.engine.server.decisions import add_decisions_route
from kvtool.engine.server.defaults import API_KEY_GUARDED_PREFIXES, VLLM_API_VERSION
from kvtool.engine.server.errors import APIError, ContainErrors, error_body, install_error_handlers
from kvtool.engine.server.metrics import ServerMetrics
from kvtool.engine.server.openapi import install_openapi, streamed
from kvtool.engine.server.protocol import CompletionRequest, DetokenizeRequest
from kvtool.engine.server.response_models import (
    ChatCompletionResponse,
    CompletionResponse,
    DetokenizeResponse,
    ModelList,
    ServerLoadResponse,
    TokenizeResponse,
    VersionResponse,
)
from kvtool.engine.server.responses.routes import add_responses_routes
from kvtool.engine.server.sagemaker import install_sagemaker
from kvtool.engine.server.server_load import ServerLoad, route_path
from kvtool.engine.server.serving import ServerSettings, ServerState
from kvtool.engine.server.tokenizer_info import TokenizerInfoResponse, tokenizer_info

if TYPE_CHECKING:
    from kvtool.engine.runtime.async_llm import AsyncLLM

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def build_app(engine: AsyncLLM, settings: ServerSettings) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        await state.abort_all()
        await engine.shutdown()

    max_model_len = engine.config.model_config.max_model_len
    metrics = ServerMetrics(engine, settings.model_name, max_model_len)
    engine.add_step_listener(metrics.observe_step)
    state = ServerState(engine, settings, metrics)
    app = FastAPI(title="kvtool", version=__version__, lifespan=lifespan)
    app.root_path = settings.root_path or ""  # routing strips it from paths that carry it (vLLM sets it so)
    app.state.server = state
    install_error_handlers(app)
    _add_routes(app, state)
    add_responses_routes(app, state)
    add_decisions_route(app, state)
    install_openapi(app, settings.model_name, engine.input_processor.vocab_size, max_model_len)
    app.add_middleware(ContainErrors)
    if settings.enable_server_load_tracking:
        app.add_middleware(ServerLoad, state=state)
    app.add_middleware(
        ApiKeyAndRequestId, api_keys=settings.api_keys, generate_request_id=settings.enable_request_id_headers
    )
    return install_sagemaker(app, state)  # last: a customer's middlewares wrap the rest, as in vLLM


def _add_routes(app: FastAPI, state: ServerState) -> None:
    @app.get(
        "/health",
        response_class=Response,
        responses={
            200: {"description": "The engine runs", "content": None},
            503: {"description": "The engine is dead: every request fails until a restart", "content": None},
        },
    )
    async def health() -> Response:
        """200 while the engine runs; 503 once it is dead (as vLLM's EngineDeadError)."""
        return Response(status_code=state.health_status())

    @app.get("/version", response_model=VersionResponse)
    async def version() -> dict:
        """The vLLM release whose API this server follows, and kvtool's own version."""
        return {"version": VLLM_API_VERSION, "kvtool_version": __version__}

    @app.get("/load", response_model=ServerLoadResponse)
    async def load() -> dict:
        """Generation requests in flight (always 0 without --enable-server-load-tracking), as vLLM's /load."""
        return {"server_load": state.server_load}

    @app.get("/v1/models", response_model=ModelList)
    async def models() -> dict:
        name = state.settings.model_name
        card = {
            "id": name,
            "object": "model",
            "created": state.started,
            "owned_by": "kvtool",
            "root": name,
            "parent": None,
            "max_model_len": state.max_model_len,
            "permission": [],
        }
        return {"object": "list", "data": [card]}

    @app.post("/v1/completions", response_model=None, responses=streamed(CompletionResponse, "The completion"))
    async def completions(body: CompletionRequest, raw_request: Request):
        return await create_completion(state, body, raw_request)

    @app.post(
        "/v1/chat/completions", response_model=None, responses=streamed(ChatCompletionResponse, "The chat completion")
    )
    async def chat_completions(body: ChatCompletionRequest, raw_request: Request):
        return await create_chat_completion(state, body, raw_request)

    @app.post(
        "/v1/chat/completions/batch",
        response_model=None,
        responses={200: {"model": ChatCompletionResponse, "description": "One choice per conversation"}},
    )
    async def batch_chat_completions(body: BatchChatCompletionRequest, raw_request: Request):
        """`messages` holds several conversations, answered together: choice i answers conversation i."""
        return await create_chat_completion(state, body, raw_request, body.messages)

    @app.post("/tokenize", response_model=TokenizeResponse)
    async def tokenize(body: TokenizeRequest) -> dict:
        state.check_model(body.model)
        tokens = _tokenize(state.engine.input_processor, body, state.settings.trust_request_chat_template)
        token_strs = state.engine.tokenizer.convert_ids_to_tokens(tokens) if body.return_token_strs else None
        return {
            "count": len(tokens),
            "max_model_len": state.max_model_len,
            "tokens": tokens,
            "token_strs": token_strs,
        }

    @app.post("/detokenize", response_model=DetokenizeResponse)
    async def detokenize(body: DetokenizeRequest) -> dict:
        state.check_model(body.model)
        return {"prompt": state.engine.input_processor.detokenize(body.tokens)}

    if state.settings.enable_tokenizer_info_endpoint:

        @app.get("/tokenizer_info", response_model=TokenizerInfoResponse)
        async def get_tokenizer_info() -> dict:
            """The tokenizer's configuration and chat template (vLLM's --enable-tokenizer-info-endpoint)."""
            return tokenizer_info(state.engine.tokenizer)

    @app.get(
        "/metrics",
        response_class=Response,
        responses={
            200: {"description": "Prometheus text format", "content": {"text/plain": {"schema": {"type": "string"}}}}
        },
    )
    async def metrics() -> Response:
        return Response(state.metrics.render(), media_type=PROMETHEUS_CONTENT_TYPE)


def _tokenize(processor, body: TokenizeRequest, trust_request_chat_template: bool) -> list[int]:
    if body.messages is not None:
        tools = [tool.model_dump(exclude_none=True) for tool in body.tools or []] or None
        kwargs = {"tools": tools, "continue_final_message": body.continue_final_message}
        kwargs |= requested_template(body.chat_template, body.chat_template_kwargs, trust_request_chat_template)
        conversation = [m.as_template_message() for m in body.messages]
        text = processor.render_chat(conversation, body.add_generation_prompt, **kwargs)
        return processor.encode(text, "messages", add_special_tokens=bool(body.add_special_tokens))
    if body.prompt is None:
        raise APIError("Either 'prompt' or 'messages' is required.", param="prompt")
    return processor.encode(body.prompt, "prompt", add_special_tokens=body.add_special_tokens is not False)


class ApiKeyAndRequestId:
    """ASGI middleware: a Bearer key, any one of `api_keys`, on the paths vLLM's --api-key guards (never on a
    CORS preflight), and the request's x-request-id on its reply; with `generate_request_id` (vLLM's
    --enable-request-id-headers) every reply has one, a new uuid4 hex where the request sent none."""

    def __init__(self, app, api_keys: tuple[str, ...] = (), generate_request_id: bool = False):
        self.app, self.generate_request_id = app, generate_request_id
        self.key_digests = [hashlib.sha256(key.encode()).digest() for key in api_keys]  # equal lengths to compare

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        guarded = route_path(scope).startswith(API_KEY_GUARDED_PREFIXES) and scope.get("method") != "OPTIONS"
        if self.key_digests and guarded and not self._authorized(headers.get("authorization", "")):
            body = error_body(
                "Unauthorized: send the server's API key as `Authorization: Bearer <key>`.", "AuthenticationError", 401
            )
            return await JSONResponse(body, status_code=HTTPStatus.UNAUTHORIZED)(scope, receive, send)
        request_id = headers.get("x-request-id") or (uuid.uuid4().hex if self.generate_request_id else None)
        return await self.app(scope, receive, _with_request_id(send, request_id))

    def _authorized(self, authorization: str) -> bool:
        scheme, _, key = authorization.partition(" ")
        digest = hashlib.sha256(key.encode()).digest()
        matches = [secrets.compare_digest(digest, known) for known in self.key_digests]  # every key, every time
        return scheme.lower() == "bearer" and any(matches)


def _with_request_id(send, request_id: str | None):
    async def send_with_id(message):
        if message["type"] == "http.response.start" and request_id:
            names = {name.lower() for name, _ in message.get("headers", [])}
            if b"x-request-id" not in names:
                message["headers"] = [*message.get("headers", []), (b"x-request-id", request_id.encode("latin-1"))]
        await send(message)

    return send_with_id
