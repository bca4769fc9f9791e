"""Error bodies in vLLM's current nested shape: {"error": {"message", "type", "param", "code"}}."""

from __future__ import annotations

import logging
import re
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


# How vLLM 0.33 answers a body that fails validation (entrypoints/serve/exception_handling/handlers/validation.py):
# 400, type "Bad Request", pydantic's own error dicts, bounded in count and size.
VALIDATION_ERROR_TYPE = HTTPStatus.BAD_REQUEST.phrase
MAX_REPORTED_ERRORS = 10
MAX_ERROR_INPUT_CHARS = 200
MAX_ERROR_CHARS = 1000
TRUNCATED = "...[truncated]"
# pydantic-core's names for union branches and wrappers in an error location: vLLM's list, and the branch names
# of constrained types ("constrained-str"), which vLLM's own request models do not have
_LOC_WRAPPER = re.compile(r"[\[\]{}()]|^constrained-")
_LOC_MARKERS = frozenset(
    "function-wrap function-after function-before function-plain json-or-python lax-or-strict chain default "
    "nullable tagged-union union call arguments is-instance is-subclass callable str int float bool bytes "
    "bytearray list tuple dict set frozenset complex none nonetype".split()
)
# what vLLM strips from any error message: memory addresses, traceback lines, file paths
_SANITIZE = (
    (re.compile(r" at 0x[0-9a-fA-F]+>"), ">"),
    (re.compile(r'\n?\s*File "[^"]+", line \d+, in \S+(\n\s+.*)?'), ""),
    (re.compile(r"/(?:home|usr|opt|var|tmp|root|lib|mnt|srv)(?:/[\w.\-]+)+"), "<path>"),
    (re.compile(r"(?:/[\w\-]+)+/[\w\-]+\.\w+"), "<path>"),
)


def validation_error(err: RequestValidationError) -> APIError:
    """vLLM's answer to an invalid body: "N validation error(s):" and each of pydantic's error dicts."""
    errors = err.errors()
    if not errors:
        return APIError("Validation error", type=VALIDATION_ERROR_TYPE)
    label = "error" if len(errors) == 1 else "errors"
    reported = errors[:MAX_REPORTED_ERRORS]
    message = f"{len(errors)} validation {label}:\n" + "".join(f"  {_format_error(e)}\n" for e in reported)
    if len(errors) > len(reported):
        message += f"  ...and {len(errors) - len(reported)} more {label}\n"
    return APIError(sanitize(message.rstrip()), type=VALIDATION_ERROR_TYPE, param=_validation_param(errors))


def _validation_param(errors: list) -> str | None:
    """The parameter a validator's own error names, else the first error's location."""
    for error in errors:
        param = getattr(error.get("ctx", {}).get("error"), "param", None) if isinstance(error, dict) else None
        if param is not None:
            return param
    first = errors[0]
    loc = first.get("loc") if isinstance(first, dict) else None
    return clean_loc(loc) if loc else None


def clean_loc(loc: tuple | list) -> str:
    """pydantic's error location as a dotted path, without its union-branch and wrapper segments."""
    parts = [str(p) for p in loc if not _LOC_WRAPPER.search(str(p)) and str(p).lower() not in _LOC_MARKERS]
    return ".".join(parts or [str(p) for p in loc])


def _format_error(error) -> str:
    if isinstance(error, dict):
        error = dict(error)
        if "input" in error:
            error["input"] = _summarized(error["input"])
        if isinstance(error.get("loc"), (tuple, list)):
            error["loc"] = clean_loc(error["loc"])
    text = str(error)
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS] + TRUNCATED


def _summarized(value) -> object:
    """A refused value as vLLM echoes it: containers described, long texts cut."""
    if isinstance(value, (bytes, bytearray)):
        return f"<{type(value).__name__} of {len(value)} bytes>"
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        return f"<{type(value).__name__} of {len(value)} items>"
    try:
        text = value if isinstance(value, str) else str(value)
    except ValueError:  # an integer past Python's digit limit for str()
        return f"<{type(value).__name__}>"
    return text if len(text) <= MAX_ERROR_INPUT_CHARS else text[:MAX_ERROR_INPUT_CHARS] + TRUNCATED


def sanitize(message: str) -> str:
    for pattern, replacement in _SANITIZE:
        message = pattern.sub(replacement, message)
    return message.strip()


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid_body(request: Request, err: RequestValidationError):
        return error_response(validation_error(err))

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
