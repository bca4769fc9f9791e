"""Error bodies in vLLM's current nested shape: {"error": {"message", "type", "param", "code"}}."""

from __future__ import annotations

import logging
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from kvtool.errors import KvtoolError

logger = logging.getLogger("kvtool.serve")


class APIError(Exception):
    """An error answered with an HTTP status and the nested error body."""

    def __init__(self, message: str, status: HTTPStatus = HTTPStatus.BAD_REQUEST,
                 type: str = "BadRequestError", param: str | None = None):
        super().__init__(message)
        self.message, self.status, self.type, self.param = message, status, type, param


def error_body(message: str, type: str, code: int, param: str | None = None) -> dict:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def error_response(err: APIError, headers: dict | None = None) -> JSONResponse:
    body = error_body(err.message, err.type, int(err.status), err.param)
    return JSONResponse(body, status_code=int(err.status), headers=headers)


def from_kvtool_error(err: KvtoolError) -> APIError:
    """A user-fixable error from the engine (too long, bad sampling value): HTTP 400, vLLM's wording."""
    return APIError(err.message, param=getattr(err, "param", None))


def validation_message(err: RequestValidationError) -> tuple[str, str | None]:
    """`field: problem` for the first invalid field of a request body."""
    first = err.errors()[0]
    loc = [str(part) for part in first.get("loc", ()) if part != "body"]
    field = ".".join(loc) or None
    if first.get("type") == "json_invalid":
        return f"The request body is not valid JSON: {first.get('msg')}.", None
    if first.get("type") == "missing":
        return f"The field '{field}' is required.", field
    return f"Invalid value for '{field}': {first.get('msg')} (got {first.get('input')!r}).", field


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def _api_error(request: Request, err: APIError):
        return error_response(err)

    @app.exception_handler(KvtoolError)
    async def _kvtool_error(request: Request, err: KvtoolError):
        return error_response(from_kvtool_error(err))

    @app.exception_handler(RequestValidationError)
    async def _invalid_body(request: Request, err: RequestValidationError):
        message, field = validation_message(err)
        return error_response(APIError(message, param=field))

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, err: HTTPException):
        status = HTTPStatus(err.status_code)
        return error_response(APIError(str(err.detail), status, type=status.phrase.replace(" ", "")))

    @app.exception_handler(Exception)
    async def _internal_error(request: Request, err: Exception):
        logger.exception("Internal error while serving %s", request.url.path)
        message = f"{type(err).__name__}: {err}"
        return error_response(APIError(message, HTTPStatus.INTERNAL_SERVER_ERROR, "InternalServerError"))
