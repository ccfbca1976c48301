"""Typed errors of the scorer client.

Every failure a caller sees is a :class:`ScorerError`; its subclass says
whether trying again later can help::

    ScorerError
    ├── InvalidInputError        the caller's input cannot be sent (nothing was sent)
    │   ├── AudioTooLongError      longer than the server's max_audio_seconds (from its /v1/info)
    │   └── InvalidURLError        a scorer URL that is malformed (raised when the client is made)
    │       ├── UnsupportedProtocolError  a scheme other than http or https
    │       └── UnknownHostError          its host name does not resolve (DNS: no such host)
    ├── RequestRejectedError     the server refused the request (final: a 4xx or a final item error)
    ├── ProtocolViolationError   the server answered something protocol v1 does not allow
    ├── ScorerUnavailableError   transient faults outlasted the retries (carries the last cause)
    │   └── DeadlineExceededError  the overall deadline ran out first
    └── TransientServerError     a retryable answer (408/429/5xx, a retryable item error);
                                 seen only as the ``last_cause`` of a ScorerUnavailableError
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11


class ScorerError(Exception):
    """Base of every error raised by the scorer client."""

    retryable: bool = False

    def __init__(self, message: str, *, request_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.request_id = request_id

    def for_request(self, request_id: str | None) -> Self:
        """This error as the error of the request ``request_id``: itself, or a copy (every attribute and the
        cause kept) where it names another request."""
        if self.request_id == request_id:
            return self
        copied = type(self).__new__(type(self), *self.args)
        copied.__dict__.update(vars(self), request_id=request_id)
        copied.__cause__ = self.__cause__
        return copied


class InvalidInputError(ScorerError, ValueError):
    """The waveform, sample rate, text or options cannot form a valid request."""


class AudioTooLongError(InvalidInputError):
    """The audio is longer than the server takes (``max_audio_seconds`` in its ``/v1/info``); it was not sent.

    ``code`` is the server's own code for the same refusal, ``audio_too_long``.
    """

    code = "audio_too_long"

    def __init__(self, message: str, *, duration_s: float, limit_s: float, request_id: str | None = None) -> None:
        super().__init__(message, request_id=request_id)
        self.duration_s = duration_s
        self.limit_s = limit_s



class InvalidURLError(InvalidInputError):
    """A scorer URL the client cannot use (as httpx's ``InvalidURL``): raised when the client is made."""


class UnsupportedProtocolError(InvalidURLError):
    """A scorer URL whose scheme is not ``http`` or ``https`` (as httpx's ``UnsupportedProtocol``)."""


class UnknownHostError(InvalidURLError):
    """The scorer URL's host name does not resolve: DNS answers that there is no such host.

    Final, not retried: a name that does not exist will not exist a second later (a resolver that cannot
    answer now, ``EAI_AGAIN``, is a transient fault and is retried).  Raised on the first request.
    """


class _AnsweredError(ScorerError):
    """An error the server answered: ``status`` is the HTTP status (``None`` for an item inside a batch
    answered with 200), ``code`` the server's machine-readable error code."""

    def __init__(self, message: str, *, status: int | None, code: str, request_id: str | None = None) -> None:
        super().__init__(message, request_id=request_id)
        self.status = status
        self.code = code

    def __str__(self) -> str:
        where = f"HTTP {self.status}" if self.status is not None else "item error"
        return f"{where} {self.code}: {self.message}"


class RequestRejectedError(_AnsweredError):
    """The server answered with a final error: retrying the same request cannot succeed."""


class ProtocolViolationError(ScorerError):
    """The server's answer breaks protocol v1 (bad JSON, non-finite score, nested diagnostics…)."""


class ScorerUnavailableError(ScorerError):
    """Transient faults (connection errors, timeouts, 408/429/5xx) persisted through every retry.

    ``attempts`` counts the attempts made; ``last_cause`` is the last fault seen
    (also chained as ``__cause__``).
    """

    retryable = True

    def __init__(
        self,
        message: str,
        *,
        attempts: int,
        last_cause: BaseException | None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message, request_id=request_id)
        self.attempts = attempts
        self.last_cause = last_cause
        self.__cause__ = last_cause



class DeadlineExceededError(ScorerUnavailableError):
    """The overall deadline of a request ran out before a final answer."""


class TransientServerError(_AnsweredError):
    """The server answered a retryable error; ``status`` is ``None`` for an item inside a batch."""

    retryable = True

    def __init__(self, message: str, *, status: int | None, code: str, retry_after: float | None = None,
                 request_id: str | None = None) -> None:
        super().__init__(message, status=status, code=code, request_id=request_id)
        self.retry_after = retry_after
