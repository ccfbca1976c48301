"""Exception handlers: every error leaves the server in the protocol's shape, or OpenAI's on its routes.

The error tree itself (:class:`~..errors.ServerError`, raised by the service
and the routers) lives in :mod:`..errors`; this module renders it, and the
errors starlette and FastAPI raise (unknown path, wrong method, a query
parameter that does not validate), into a response.  On the OpenAI-compatible
paths (:data:`~..openai_protocol.OPENAI_PATH_PREFIXES`) every error, auth and
body-size errors included, takes OpenAI's shape, so OpenAI clients raise their
usual exceptions; an error of the transcription route is counted by its code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from ..errors import ServerError, error_body
from ..openai_protocol import (
    OPENAI_PATH_PREFIXES,
    OpenAIErrorDetail,
    OpenAIErrorResponse,
)
from .deps import parts_of
from .middleware import request_id_of
from .responses import OrjsonResponse

_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large", 401: "unauthorized"}
_OPENAI_ERROR_TYPES = {401: "authentication_error", 429: "rate_limit_error"}


def openai_error_body(status: int, code: str, message: str, param: str | None = None) -> dict[str, Any]:
    """OpenAI's ``{"error": {"message", "type", "param", "code"}}`` for a status and our error code."""
    kind = _OPENAI_ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return OpenAIErrorResponse(error=OpenAIErrorDetail(message=message, type=kind, param=param, code=code)).model_dump()


def validation_message(exc: RequestValidationError) -> str:
    """The first problem FastAPI found, as one line."""
    return str((exc.errors()[0] if exc.errors() else {}).get("msg", "invalid request"))


def http_error_message(request: Request, exc: StarletteHTTPException) -> str:
    """What starlette's own errors say: the route a trailing slash missed, or the method refused."""
    if exc.status_code == 404:
        path = request.url.path
        # No redirect for a trailing slash: a Location built from the Host header could point anywhere.
        near = path.rstrip("/")
        hint = f"did you mean {near}?" if near != path and _has_route(request, near) else "see /docs"
        return f"no endpoint at {path}; {hint}"
    if exc.status_code == 405:
        return f"{request.method} is not allowed on {request.url.path}"
    return str(exc.detail)


def _has_route(request: Request, path: str) -> bool:
    scope = {**request.scope, "path": path}
    return any(route.matches(scope)[0] is not Match.NONE for route in request.app.router.routes)


def _answer(request: Request, status: int, code: str, message: str, *, retryable: bool, path: str | None = None,
            headers: Mapping[str, str] | None = None) -> OrjsonResponse:
    """The error in the protocol's shape or, on the OpenAI-compatible paths, in OpenAI's (``param``: the field at
    fault without the ``$.``): OpenAI clients read only their own shape, also for a path that does not exist."""
    if request.url.path.startswith(OPENAI_PATH_PREFIXES):
        body = openai_error_body(status, code, message, path.removeprefix("$.") if path else None)
    else:
        body = error_body(code, message, retryable=retryable, request_id=request_id_of(request), path=path)
    return OrjsonResponse(body, status_code=status, headers=headers)


def _count_transcription(request: Request, outcome: str) -> None:
    """An error of the transcription route is counted by its code."""
    if request.url.path.startswith("/v1/audio/"):
        parts_of(request).metrics.transcriptions.labels(outcome).inc()


async def _server_error(request: Request, exc: Exception) -> OrjsonResponse:
    assert isinstance(exc, ServerError)
    _count_transcription(request, exc.code)
    return _answer(request, exc.status, exc.code, exc.message, retryable=exc.retryable, path=exc.path,
                   headers=exc.headers)


async def _http_error(request: Request, exc: Exception) -> OrjsonResponse:
    assert isinstance(exc, StarletteHTTPException)
    return _answer(request, exc.status_code, _HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}"),
                   http_error_message(request, exc), retryable=exc.status_code >= 500, headers=exc.headers)


async def _validation_error(request: Request, exc: Exception) -> OrjsonResponse:
    assert isinstance(exc, RequestValidationError)
    _count_transcription(request, "invalid_request")
    return _answer(request, 400, "invalid_request", validation_message(exc), retryable=False)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers: server errors, starlette's HTTP errors, FastAPI's validation errors."""
    app.add_exception_handler(ServerError, _server_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
