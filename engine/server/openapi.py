"""The OpenAPI document told truthfully: every status the server answers, its error body, the stream's media
type, and the model's own bounds (vocabulary, max_model_len) on the fields that depend on them."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

from kvtool.engine.runtime.config import SEED_MAX, SEED_MIN
from kvtool.engine.server.defaults import API_KEY_GUARDED_PREFIXES
from kvtool.engine.server.protocol import MAX_TOKENS_MARK, MODEL_MARK, SEED_MARK, TOKEN_ID_MARK

ERROR_STATUSES = {
    "400": "Invalid request",
    "404": "Unknown model or path",
    "405": "Method not allowed (see Allow)",
    "500": "Internal error (the request, or the engine, failed)",
}
ERROR_REF = {"$ref": "#/components/schemas/ErrorResponse"}
# One server-sent event: `data:` holds a chunk (or an error body) as JSON, and the last one is `[DONE]`.
SSE_EVENT = {
    "type": "object",
    "properties": {"data": {"type": "string"}, "event": {"type": "string"}},
    "required": ["data"],
}


class ErrorInfo(BaseModel):
    message: str
    type: str
    param: str | None
    code: int


class ErrorResponse(BaseModel):
    error: ErrorInfo


def streamed(model: type[BaseModel], description: str) -> dict:
    """A 200 that is `model` as JSON, or a stream of its chunks as server-sent events."""
    return {200: {"model": model, "description": description, "content": {"text/event-stream": {"schema": SSE_EVENT}}}}


def install_openapi(app: FastAPI, model_name: str, vocab_size: int, max_model_len: int) -> None:
    def openapi() -> dict:
        if app.openapi_schema is None:
            document = get_openapi(title=app.title, version=app.version, routes=app.routes)
            schemas = document.setdefault("components", {}).setdefault("schemas", {})
            schemas.update(_model_schemas(ErrorResponse))
            for name in ("HTTPValidationError", "ValidationError"):
                schemas.pop(name, None)
            for path, operations in document["paths"].items():
                for operation in operations.values():
                    _declare_errors(operation, path.startswith(API_KEY_GUARDED_PREFIXES))
            _bound(
                document,
                {
                    TOKEN_ID_MARK: {"maximum": vocab_size - 1},
                    MAX_TOKENS_MARK: {"maximum": max_model_len},
                    MODEL_MARK: {"anyOf": [{"type": "string", "enum": [model_name]}, {"type": "null"}]},
                    SEED_MARK: {"minimum": SEED_MIN, "maximum": SEED_MAX},
                },
            )
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi


def _model_schemas(model: type[BaseModel]) -> dict:
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    defs = schema.pop("$defs", {})
    return {**defs, model.__name__: schema}


def _declare_errors(operation: dict, authenticated: bool) -> None:
    responses = operation["responses"]
    responses.pop("422", None)  # validation errors are 400s here, as in vLLM
    statuses = {**ERROR_STATUSES, **({"401": "Missing or wrong API key"} if authenticated else {})}
    for status, description in statuses.items():
        responses.setdefault(
            status, {"description": description, "content": {"application/json": {"schema": ERROR_REF}}}
        )


def _bound(node: Any, bounds: dict[str, dict]) -> None:
    """Write the served model's facts (vocabulary, max_model_len, name) into the marked schemas."""
    if isinstance(node, dict):
        for mark, facts in bounds.items():
            if node.pop(mark, None):
                node.update(facts)
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if isinstance(node.get(key), float) and node[key].is_integer() and abs(node[key]) < 2**53:
                node[key] = int(node[key])
        for value in node.values():
            _bound(value, bounds)
    elif isinstance(node, list):
        for value in node:
            _bound(value, bounds)
