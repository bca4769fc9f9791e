"""SageMaker's routes as vLLM 0.33 serves them: GET|POST /ping and POST /invocations.

/invocations answers a chat completion when the body is one, else a completion (vLLM's order). Both routes go
through AWS's model-hosting-container-standards, as in vLLM: stateful sessions (`{"requestType": "NEW_SESSION"}`
with SAGEMAKER_ENABLE_STATEFUL_SESSIONS=true), the adapter header copied into `model`, and a customer's handlers
and middlewares (from SAGEMAKER_MODEL_PATH's script or CUSTOM_FASTAPI_* variables), which answer before these
defaults. Like vLLM, /invocations is not behind --api-key: SageMaker authenticates before the container.
"""

from __future__ import annotations

import contextlib
import logging

from fastapi import APIRouter, Depends, FastAPI, Request, Response
from pydantic import ValidationError

from kvtool.engine.server.chat.completions import create_chat_completion
from kvtool.engine.server.chat.protocol import ChatCompletionRequest
from kvtool.engine.server.completions import create_completion
from kvtool.engine.server.errors import APIError
from kvtool.engine.server.protocol import CompletionRequest
from kvtool.engine.server.serving import ServerState
from kvtool.errors import UsageError

# Tried in this order, the first the body validates as wins (vLLM's order).
INVOCATION_TYPES = ((ChatCompletionRequest, create_chat_completion), (CompletionRequest, create_completion))
NO_HANDLER = "Cannot find suitable handler for request. Expected one of: {names}"
JSON_ONLY = "Unsupported Media Type: Only 'application/json' is allowed"
OVERRIDES_FIX = "Fix the script in SAGEMAKER_MODEL_PATH or the CUSTOM_FASTAPI_* variables, or unset them."


def install_sagemaker(app: FastAPI, state: ServerState) -> FastAPI:
    """Mount the customer's overrides and middlewares, then the default routes (matched after any override)."""
    with _root_logging_kept():  # importing the package lowers the root logger to ERROR
        import model_hosting_container_standards.sagemaker as standards

    @standards.register_ping_handler
    async def ping(raw_request: Request) -> Response:
        """The engine's health, as GET /health."""
        return Response(status_code=state.health_status())

    @standards.register_invocation_handler
    @standards.stateful_session_manager()
    @standards.inject_adapter_id(adapter_path="model")
    async def invocations(raw_request: Request):
        """A chat completion or a completion, by the shape of the body."""
        return await invoke(state, await raw_request.json(), raw_request)

    with _root_logging_kept():
        try:
            app = standards.bootstrap(app)
        except Exception as err:  # a model script or a CUSTOM_FASTAPI_* variable that does not load
            problem = f"{type(err).__name__}: {err}"
            raise UsageError(f"The SageMaker overrides do not load: {problem}.", OVERRIDES_FIX) from err
    router = APIRouter()
    router.add_api_route("/ping", ping, methods=["GET", "POST"], response_class=Response)
    router.add_api_route("/invocations", invocations, methods=["POST"], dependencies=[Depends(json_only)])
    app.include_router(router)
    return app


async def invoke(state: ServerState, body, raw_request: Request) -> Response:
    for request_type, endpoint in INVOCATION_TYPES:
        try:
            request = request_type.model_validate(body)
        except ValidationError:
            continue
        return await endpoint(state, request, raw_request)
    raise APIError(NO_HANDLER.format(names=[request_type.__name__ for request_type, _ in INVOCATION_TYPES]))


async def json_only(raw_request: Request) -> None:
    media_type = raw_request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        raise APIError(JSON_ONLY)


@contextlib.contextmanager
def _root_logging_kept():
    root = logging.getLogger()
    levels = [(root, root.level)] + [(handler, handler.level) for handler in root.handlers]
    try:
        yield
    finally:
        for owner, level in levels:
            owner.setLevel(level)
