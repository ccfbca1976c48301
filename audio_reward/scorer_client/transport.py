"""Sending requests to a scorer: the transport, what an answer means, and how long to wait before a retry.

The layers, as in httpx:

- a transport sends one HTTP request and returns its whole answer
  (:class:`AsyncTransport`; :class:`AiohttpTransport` is the default, and
  ``AsyncScorerClient(transport=...)`` takes any other);
- :func:`classify` reads one answer, an HTTP response or a transport fault, as
  :class:`Success`, :class:`Retry` or :class:`Fatal`, with the reason;
- :func:`next_delay`: exponential backoff with full jitter, at least a server's ``Retry-After``.

The retry loop itself, one per call, is :class:`~.core.ScorerCore`'s.
"""

from __future__ import annotations

import abc
import asyncio
import email.utils
import math
import random
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import aiohttp

from .errors import (
    ProtocolViolationError,
    RequestRejectedError,
    ScorerError,
    TransientServerError,
    UnknownHostError,
)
from .wire import error_of_body

T = TypeVar("T")

# ---------------------------------------------------------------- the transport


@dataclass(frozen=True)
class Request:
    """One HTTP request as a transport sends it; ``timeout`` bounds the whole exchange."""

    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes | None = None
    timeout: float = 120.0
    connect_timeout: float | None = None


@dataclass(frozen=True)
class Response:
    """One whole HTTP answer: status, headers (looked up case-insensitively) and body."""

    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)

    def header(self, name: str) -> str | None:
        lowered = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == lowered), None)


class TransportError(Exception):
    """The request may not have reached the server, or its answer was lost: another attempt may succeed."""


class ConnectError(TransportError):
    """No connection to the server could be made (nothing was sent)."""


class ReadError(TransportError):
    """The connection broke before the whole answer arrived."""


class TransportTimeout(TransportError, asyncio.TimeoutError):
    """No whole answer within the attempt's timeout."""


Answer = Response | TransportError | ScorerError
"""What one attempt gets: a response, a transient fault of the transport, or a final one (bytes that are not
HTTP, a host that does not exist)."""


class AsyncTransport(abc.ABC):
    """Sends one request and returns the whole answer; owns the connections.

    :meth:`handle_async_request` raises :class:`TransportError` (or a
    subclass) for transient faults of the transport, and a
    :class:`~.errors.ScorerError` for final ones:
    :class:`~.errors.ProtocolViolationError` when the peer's answer is not
    HTTP, :class:`~.errors.UnknownHostError` when DNS says the host does not
    exist; any status, 5xx included, is a :class:`Response`.  The client
    that holds a transport closes it.
    """

    @abc.abstractmethod
    async def handle_async_request(self, request: Request) -> Response:
        """Send ``request`` and read its answer."""

    async def aclose(self) -> None:  # noqa: B027 - a transport without connections has nothing to release
        """Release the connections."""


class AiohttpTransport(AsyncTransport):
    """The default transport: one pooled ``aiohttp`` session, opened on first use."""

    def __init__(self, pool_limit: int = 64) -> None:
        self.pool_limit = pool_limit
        self._session: aiohttp.ClientSession | None = None

    async def handle_async_request(self, request: Request) -> Response:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.pool_limit, limit_per_host=0),
                timeout=aiohttp.ClientTimeout(total=None),
            )
        # aiohttp reads a zero timeout as "no timeout": never let it reach zero.
        total = max(request.timeout, 0.001)
        connect = None if request.connect_timeout is None else min(request.connect_timeout, total)
        try:
            async with self._session.request(
                request.method, request.url, data=request.body, headers=dict(request.headers),
                timeout=aiohttp.ClientTimeout(total=total, connect=connect),
            ) as resp:
                body = await resp.read()
                return Response(resp.status, body, resp.headers)
        except asyncio.TimeoutError as exc:
            raise TransportTimeout(f"no answer from {request.url} within {total:g} s") from exc
        except aiohttp.ClientConnectorError as exc:
            # DNS said the host does not exist: a final fault, since retrying cannot make the name exist.
            if isinstance(exc.os_error, socket.gaierror) and exc.os_error.errno in _NO_SUCH_HOST:
                raise UnknownHostError(f"the scorer host {exc.host!r} of {request.url} does not resolve "
                                       f"({exc.os_error.strerror or exc.os_error}): check the URL") from exc
            # Without aiohttp's "ssl:default" for a plain-HTTP URL; a TLS failure keeps aiohttp's whole text, as
            # there the TLS settings are what the reader needs.
            reason = (str(exc) if isinstance(exc, aiohttp.ClientSSLError)
                      else f"cannot connect to {exc.host}:{exc.port}: {exc.os_error.strerror or exc.os_error}")
            raise ConnectError(reason) from exc
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
            raise ReadError(str(exc) or type(exc).__name__) from exc
        except aiohttp.ClientResponseError as exc:
            # Not HTTP at all (a garbled status line or headers): the peer is not a scorer.
            raise ProtocolViolationError(f"the scorer's answer is not valid HTTP: {exc}") from exc

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()


# getaddrinfo's "no such name" answers. EAI_AGAIN (the resolver could not answer now) is not among them: that one
# passes, and is retried as any connection fault.
_NO_SUCH_HOST = frozenset(code for code in (getattr(socket, "EAI_NONAME", None), getattr(socket, "EAI_NODATA", None))
                          if code is not None)


# ---------------------------------------------------------------- what an answer means

RETRYABLE_STATUSES = frozenset({408, 429})


def is_retryable_status(status: int, retryable_flag: bool | None = None) -> bool:
    """408, 429 and 5xx are transient; any other 4xx is final.

    A server may mark a 5xx final with ``"retryable": false`` in its error
    body (an input that crashes the engine every time); a 4xx is never retried.
    """
    return status in RETRYABLE_STATUSES or (500 <= status <= 599 and retryable_flag is not False)


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, seconds) if math.isfinite(seconds) else None


@dataclass(frozen=True)
class Success(Generic[T]):
    """The answer carries what was asked for."""

    value: T


@dataclass(frozen=True)
class Retry:
    """A transient fault (``cause``): another attempt may succeed, not before ``retry_after`` seconds."""

    cause: BaseException
    retry_after: float | None = None


@dataclass(frozen=True)
class Fatal:
    """A final answer: trying the same request again cannot succeed."""

    error: ScorerError


Outcome = Success[T] | Retry | Fatal


def classify(answer: Answer, request_id: str | None = None) -> Outcome[bytes]:
    """What one answer means for its request.

    - a 200: :class:`Success` with the body, still to be read against the protocol;
    - a transport fault (connection refused or lost, timeout): :class:`Retry`;
    - 408, 429, or a 5xx the server does not mark ``"retryable": false``:
      :class:`Retry` with a :class:`TransientServerError` and the ``Retry-After`` wait;
    - any other status: :class:`Fatal` with a :class:`RequestRejectedError`;
    - a final fault of the transport (an answer that is not HTTP, a host that does not exist):
      :class:`Fatal` with that :class:`ScorerError`.
    """
    if isinstance(answer, TransportError):
        return Retry(answer)
    if isinstance(answer, ScorerError):
        return Fatal(answer.for_request(request_id))
    if answer.status == 200:
        return Success(answer.body)
    info = error_of_body(answer.body, answer.status)
    if is_retryable_status(answer.status, info.retryable):
        retry_after = parse_retry_after(answer.header("Retry-After"))
        return Retry(TransientServerError(info.message, status=answer.status, code=info.code,
                                          retry_after=retry_after, request_id=request_id), retry_after)
    return Fatal(RequestRejectedError(info.message, status=answer.status, code=info.code, request_id=request_id))


# ---------------------------------------------------------------- the retry loop


RETRY_AFTER_SPREAD = 0.5
"""A ``Retry-After`` wait is stretched by up to this share, at random (:func:`next_delay`)."""


def backoff_delay(retry: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Exponential backoff with full jitter: uniform in [0, min(cap, base·2^retry)].

    Full jitter spreads the retries of many clients hit by the same outage,
    so they do not return in lock-step.
    """
    return (rng or random).uniform(0.0, min(cap, base * (2.0 ** min(retry, 62))))


def next_delay(
    retry: int, *, base: float, cap: float, retry_after: float | None, retry_after_max: float,
    rng: random.Random | None = None,
) -> float:
    """The wait before retry number ``retry`` (0-based): backoff, but never less than a capped ``Retry-After``.

    A ``Retry-After`` wait is spread over up to half as long again (uniformly), so the many clients a busy
    server refused in the same moment, each told about the same wait, do not all come back in the same one.
    """
    delay = backoff_delay(retry, base, cap, rng)
    if retry_after is not None:
        delay = max(delay, min(retry_after, retry_after_max) * (1.0 + (rng or random).uniform(0.0, RETRY_AFTER_SPREAD)))
    return delay
