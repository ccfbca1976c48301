"""The server's error tree and the one JSON shape every error takes.

Each :class:`ServerError` knows its HTTP status, its stable ``code`` and
whether a client should retry; :func:`error_body` renders the protocol's
``{"error": {"code", "message", "retryable"}}``.  Protocol errors
(:class:`audio_reward.protocol.ProtocolError`) map to 400.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar, Concatenate, ParamSpec, TypeVar

from audio_reward.protocol import ErrorDetail, ErrorResponse, ProtocolError, parse_json

P = ParamSpec("P")
T = TypeVar("T")


class ServerError(Exception):
    """An error the server answers with its own status and code.

    A subclass declares its answer in its class line, ``class QueueFullError(_RetryLater, status=429,
    code="queue_full")``; what it does not name it inherits.
    """

    status: int = 500
    code: str = "internal_error"
    retryable: bool = False
    fixed_headers: ClassVar[dict[str, str]] = {}
    """Headers every answer of this class carries (a per-error ``headers`` argument adds to them)."""

    def __init_subclass__(cls, status: int | None = None, code: str | None = None, retryable: bool = False,
                          fixed_headers: dict[str, str] | None = None) -> None:
        super().__init_subclass__()
        cls.status = status or cls.status
        cls.code = code or cls.code
        cls.retryable = retryable or cls.retryable
        cls.fixed_headers = fixed_headers or cls.fixed_headers

    def __init__(self, message: str, *, headers: dict[str, str] | None = None, path: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers = {**self.fixed_headers, **(headers or {})}
        self.path = path


class BadRequestError(ServerError, status=400):
    """A request that does not follow the protocol (400); ``code`` comes from the protocol."""

    def __init__(self, code: str, message: str, *, path: str | None = None) -> None:
        super().__init__(message, path=path)
        self.code = code

    @classmethod
    def from_protocol(cls, exc: ProtocolError) -> BadRequestError:
        return cls(exc.code, exc.message, path=exc.issues[0].path)


def parse_request(decode: Callable[Concatenate[Any, P], T], body: bytes, *args: P.args, **kwargs: P.kwargs) -> T:
    """``decode`` (a protocol decoder) over the JSON ``body``; a :class:`ProtocolError` is the 400 it names."""
    try:
        return decode(parse_json(body), *args, **kwargs)
    except ProtocolError as exc:
        raise BadRequestError.from_protocol(exc) from None


class UnknownSpeakerReferenceError(ServerError, status=404, code="unknown_speaker_reference"):
    """A ``speaker_reference_id`` this server does not hold (never registered, or evicted): register it again."""


class UnauthorizedError(ServerError, status=401, code="unauthorized", fixed_headers={"WWW-Authenticate": "Bearer"}):
    """No API key, or not the configured one (401, with the scheme to use)."""


class ModelNotFoundError(ServerError, status=404, code="model_not_found"):
    """A model id the OpenAI-compatible routes do not serve; unknown paths are starlette's 404 ``not_found``."""


class PayloadTooLargeError(ServerError, status=413, code="payload_too_large"):
    """A body over ``max_body_bytes``, from its Content-Length or while it streams in."""


class BodyTimeoutError(ServerError, status=408, code="body_timeout", retryable=True,
                       fixed_headers={"Connection": "close"}):
    """The body did not arrive within ``body_timeout_s`` (408); the connection is closed after the answer."""


class UnsupportedMediaTypeError(ServerError, status=415, code="unsupported_media_type"):
    """A body declared as something the route does not take (415); the message says what to send."""


class _RetryLater(ServerError, retryable=True):
    """An answer with ``Retry-After``: come back in ``retry_after_s`` (whole seconds, at least 1)."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message, headers={"Retry-After": str(max(1, math.ceil(retry_after_s)))})


class QueueFullError(_RetryLater, status=429, code="queue_full"):
    """Too many utterances waiting for the engine (429 + Retry-After)."""


class OverloadedError(QueueFullError, code="overloaded"):
    """The work queued ahead would keep this request past ``request_timeout_s`` (429 + Retry-After, at once)."""


class NotReadyError(_RetryLater, status=503, code="not_ready"):
    """The model is still loading (503 + Retry-After)."""


class ShuttingDownError(_RetryLater, status=503, code="shutting_down"):
    """The server is shutting down and takes no new work (503 + Retry-After)."""


class RequestTimeoutError(ServerError, status=504, code="timeout", retryable=True):
    """The request waited longer than ``request_timeout_s`` (504)."""


class EngineError(ServerError, code="engine_error", retryable=True):
    """The ASR engine failed on the batch holding this request (500, retryable)."""


class SignalError(ServerError, code="signal_error", retryable=True):
    """A speaker or quality model failed on the batch holding this request (500, retryable)."""


def error_body(code: str, message: str, *, retryable: bool, request_id: str | None = None,
               path: str | None = None) -> dict[str, Any]:
    """The protocol's error object (validated by :class:`ErrorResponse`; a field left None is not sent)."""
    detail = ErrorDetail(code=code, message=message, retryable=retryable, request_id=request_id, path=path)
    return ErrorResponse(error=detail).model_dump(exclude_none=True)


def error_response(exc: ServerError, request_id: str | None = None) -> ErrorResponse:
    """``exc`` as the protocol's error answer (dump it with ``exclude_none``: a field left None is not sent)."""
    return ErrorResponse(error=ErrorDetail(code=exc.code, message=exc.message, retryable=exc.retryable,
                                           request_id=request_id, path=exc.path))
