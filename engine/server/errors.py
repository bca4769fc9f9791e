"""Error bodies in vLLM's current nested shape: {"error": {"message", "type", "param", "code"}}."""

from __future__ import annotations

import logging
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from kvtool.engine.runtime.exceptions import EngineDeadError, EngineGenerateError
from kvtool.errors import KvtoolError

logger = logging.getLogger("kvtool.serve")
ERROR_TYPES = {
    400: "BadRequestError",
    401: "AuthenticationError",
    404: "NotFoundError",
    500: "InternalServerError",
    503: "ServiceUnavailableError",
}


class APIError(Exception):
    """An error answered with an HTTP status and the nested error body."""

    def __init__(
        self,
        message: str,
        status: HTTPStatus = HTTPStatus.BAD_REQUEST,
        type: str = "BadRequestError",
        param: str | None = None,
    ):
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


def from_exception(err: Exception, request_id: str | None = None) -> APIError:
    """Any error as vLLM's create_error_response maps it: 400 for the client's, 500 for the server's."""
    if isinstance(err, APIError):
        return err
    if isinstance(err, KvtoolError):
        return from_kvtool_error(err)
    if isinstance(err, EngineDeadError):
        return APIError(EngineDeadError.CLIENT_MESSAGE, HTTPStatus.INTERNAL_SERVER_ERROR, "InternalServerError")
    if isinstance(err, EngineGenerateError):
        return APIError(str(err), HTTPStatus.INTERNAL_SERVER_ERROR, "InternalServerError")
    where = f" while serving request {request_id}" if request_id else ""
    return APIError(f"{type(err).__name__}{where}: {err}", HTTPStatus.INTERNAL_SERVER_ERROR, "InternalServerError")


def stream_error_body(err: Exception, request_id: str) -> dict:
    """The error event of a stream whose 200 status line is already sent."""
    api_error = from_exception(err, request_id)
    if api_error.status >= 500:
        logger.error("Request %s failed while streaming", request_id, exc_info=err)
    return error_body(api_error.message, api_error.type, int(api_error.status), api_error.param)


def error_type(status: int) -> str:
    """OpenAI's error type names; others as `<phrase>Error` (MethodNotAllowedError)."""
    return ERROR_TYPES.get(status) or HTTPStatus(status).phrase.replace(" ", "") + "Error"


def validation_message(err: RequestValidationError) -> tuple[str, str | None]:
    """`field: problem` for the first invalid field of a request body."""
    first = err.errors()[0]
    loc = [str(part) for part in first.get("loc", ()) if part != "body" and not _is_schema_marker(str(part))]
    field = ".".join(loc) or None
    kind = first.get("type")
    if kind == "json_invalid":
        return f"The request body is not valid JSON: {first.get('msg')}.", None
    if field is None and kind == "missing":
        return "The request body is missing: send a JSON object.", None
    if field is None:
        return f"The request body must be a JSON object, got {_described(first.get('input'))}.", None
    if kind == "missing":
        return f"The field '{field}' is required.", field
    return f"Invalid value for '{field}': {first.get('msg')} (got {_described(first.get('input'))}).", field


def _is_schema_marker(part: str) -> bool:
    """pydantic's names for union branches and wrappers in an error location ("constrained-str", "list[int]")."""
    return any(c in part for c in "[(-") or part in _TYPE_NAMES


_TYPE_NAMES = frozenset({"str", "int", "float", "bool", "list", "dict", "union", "nullable", "none"})


def _described(value) -> str:
    """A short stand-in for a refused value: long texts and containers are not echoed whole."""
    if value is None:
        return "null"
    if isinstance(value, (list, dict, tuple)):
        return f"a {type(value).__name__} of {len(value)} items" if value else repr(value)
    if isinstance(value, int) and abs(value) >= 10**30:
        return f"an integer of {len(str(value))} digits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid_body(request: Request, err: RequestValidationError):
        message, field = validation_message(err)
        return error_response(APIError(message, param=field))

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, err: HTTPException):
        status = HTTPStatus(err.status_code)
        return error_response(APIError(str(err.detail), status, type=error_type(status)), headers=err.headers)

    # An `Exception` handler would run outside the other middleware and drop the connection: ContainErrors
    # answers whatever is not listed here.
    for known in (APIError, KvtoolError, EngineGenerateError, EngineDeadError):
        app.add_exception_handler(known, _known_error)


async def _known_error(request: Request, err: Exception) -> JSONResponse:
    return answer(err, request.url.path)


def answer(err: Exception, path: str) -> JSONResponse:
    api_error = from_exception(err)
    if api_error.status >= 500:
        logger.error("Internal error while serving %s", path, exc_info=err)
    return error_response(api_error)


class ContainErrors:
    """ASGI middleware: an exception that escaped the routes is answered here, inside the app.

    Starlette answers such an exception with a 500 and then re-raises it, which makes the server close the
    keep-alive connection; finishing the response here keeps the connection usable for the client's next request.
    """

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def tracking_send(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as err:
            if started:  # a stream broke after its status line: nothing more can be said
                logger.error("Response to %s broke while sending", scope.get("path"), exc_info=err)
                return
            await answer(err, scope.get("path", ""))(scope, receive, send)
