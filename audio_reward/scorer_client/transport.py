"""Sending requests to a scorer: the transport, what an answer means, and the one retry loop.

The layers, as in httpx:

- a transport sends one HTTP request and returns its whole answer
  (:class:`AsyncTransport`; :class:`AiohttpTransport` is the default, and
  ``AsyncScorerClient(transport=...)`` takes any other);
- :func:`classify` reads one answer, an HTTP response or a transport fault, as
  :class:`Success`, :class:`Retry` or :class:`Fatal`, with the reason;
- :class:`RetryLoop` makes the attempts of one request (or one batch chunk):
  per-attempt timeouts, URL rotation, exponential backoff with full jitter,
  ``Retry-After`` and the overall deadline.
"""

from __future__ import annotations

import abc
import asyncio
import email.utils
import itertools
import logging
import math
import random
import socket
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import aiohttp

from .errors import (
    DeadlineExceededError,
    ProtocolViolationError,
    RequestRejectedError,
    ScorerError,
    ScorerUnavailableError,
    TransientServerError,
    UnknownHostError,
)
from .settings import ClientSettings, ScorerEndpoint
from .wire import PreparedItem, error_of_body

logger = logging.getLogger(__name__)

T = TypeVar("T")
E = TypeVar("E", bound=ScorerError)

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

    def _bind(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.pool_limit, limit_per_host=0),
                timeout=aiohttp.ClientTimeout(total=None),
            )
        return self._session

    async def handle_async_request(self, request: Request) -> Response:
        session = self._bind()
        # aiohttp reads a zero timeout as "no timeout": never let it reach zero.
        total = max(request.timeout, 0.001)
        connect = None if request.connect_timeout is None else min(request.connect_timeout, total)
        try:
            async with session.request(
                request.method, request.url, data=request.body, headers=dict(request.headers),
                timeout=aiohttp.ClientTimeout(total=total, connect=connect),
            ) as resp:
                body = await resp.read()
                return Response(resp.status, body, resp.headers)
        except asyncio.TimeoutError as exc:
            raise TransportTimeout(f"no answer from {request.url} within {total:g} s") from exc
        except aiohttp.ClientConnectorError as exc:
            if _no_such_host(exc):
                raise UnknownHostError(f"the scorer host {exc.host!r} of {request.url} does not resolve "
                                       f"({exc.os_error.strerror or exc.os_error}): check the URL") from exc
            raise ConnectError(_connect_message(exc)) from exc
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


def _no_such_host(exc: aiohttp.ClientConnectorError) -> bool:
    """Whether DNS said the host does not exist: a final fault, since retrying cannot make the name exist."""
    return isinstance(exc.os_error, socket.gaierror) and exc.os_error.errno in _NO_SUCH_HOST


def _connect_message(exc: aiohttp.ClientConnectorError) -> str:
    """Why no connection was made, without aiohttp's ``ssl:default`` for a plain-HTTP URL.

    A TLS failure keeps aiohttp's whole text: there the TLS settings are what the reader needs.
    """
    if isinstance(exc, aiohttp.ClientSSLError):
        return str(exc)
    reason = exc.os_error.strerror or str(exc.os_error)
    return f"cannot connect to {exc.host}:{exc.port}: {reason}"


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
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


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


def for_request(error: E, request_id: str | None) -> E:
    """``error`` as the error of the request ``request_id`` (a copy when it names another one)."""
    if error.request_id == request_id:
        return error
    copied = error._for_request(request_id)
    copied.__cause__ = error.__cause__
    return copied


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
        return Fatal(for_request(answer, request_id))
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
    ceiling = min(cap, base * (2.0 ** min(retry, 62)))
    return (rng or random).uniform(0.0, ceiling)


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
        honoured = min(retry_after, retry_after_max)
        delay = max(delay, honoured * (1.0 + (rng or random).uniform(0.0, RETRY_AFTER_SPREAD)))
    return delay


class Attempts:
    """Attempt counting, URL rotation and waiting for one request (or one chunk)."""

    def __init__(self, settings: ClientSettings, endpoints: Sequence[ScorerEndpoint], url_index: int) -> None:
        self.settings = settings
        self.start = time.monotonic()
        self.deadline_at = None if settings.deadline is None else self.start + settings.deadline
        self.endpoints = endpoints
        self.url_index = url_index
        self.made = 0
        self.free = 0
        """Failed attempts that spent no retry (``wait_while_busy``: a live scorer said "not now"); 0 without it,
        so the retries are the attempts made, as they always were."""

    @property
    def endpoint(self) -> ScorerEndpoint:
        return self.endpoints[self.url_index % len(self.endpoints)]

    def remaining(self) -> float | None:
        return None if self.deadline_at is None else self.deadline_at - time.monotonic()

    def attempt_timeout(self) -> float:
        remaining = self.remaining()
        return self.settings.timeout if remaining is None else min(self.settings.timeout, remaining)

    def expired(self) -> bool:
        remaining = self.remaining()
        return remaining is not None and remaining <= 0

    async def wait_before_retry(self, retry_after: float | None, *, spend: bool = True) -> bool:
        """Sleep before the next attempt; False when the retries or the deadline are spent.

        ``spend`` False: the failed attempt costs no retry (a live scorer answered it, see
        ``ClientSettings.wait_while_busy``).  The next attempt goes to the next URL, so a dead replica is left
        at once.
        """
        self.free += not spend
        if self.spent > self.settings.max_retries:
            return False
        delay = next_delay(
            self.made - 1, base=self.settings.backoff, cap=self.settings.backoff_max,
            retry_after=retry_after, retry_after_max=self.settings.retry_after_max,
        )
        remaining = self.remaining()
        if remaining is not None and delay >= remaining:
            return False
        self.url_index += 1
        await asyncio.sleep(delay)
        return True

    @property
    def spent(self) -> int:
        """Attempts that counted against ``max_retries``."""
        return self.made - self.free

    def give_up(self, cause: BaseException | None, request_id: str | None) -> ScorerUnavailableError:
        elapsed = time.monotonic() - self.start
        if self.deadline_at is not None and (self.expired() or self.spent <= self.settings.max_retries):
            return DeadlineExceededError(
                f"no answer within the {self.settings.deadline:g} s deadline after {self.made} attempt(s) "
                f"({elapsed:.2f} s); last fault: {cause}",
                attempts=self.made, last_cause=cause, request_id=request_id,
            )
        return ScorerUnavailableError(
            f"scorer unavailable after {self.made} attempt(s) in {elapsed:.2f} s; last fault: {cause}",
            attempts=self.made, last_cause=cause, request_id=request_id,
        )


BUSY_CODES = frozenset({"queue_full", "overloaded", "not_ready"})
"""The scorer's own error codes for "alive, come back later": its queue is full, it refused work it could not
finish in time (early refusal), or it is still loading.  A timeout (504) with nothing finished, a server
shutting down, or a proxy's bare 503 are not among them: those spend retries, or a hung engine would hold a
trainer for ever."""


def busy(outcome: Retry) -> bool:
    """Whether the scorer itself answered ``outcome`` with "not now" (:data:`BUSY_CODES`), not a fault."""
    cause = outcome.cause
    return isinstance(cause, TransientServerError) and cause.code in BUSY_CODES


Attempt = Callable[[Attempts, list[PreparedItem]], Awaitable[list[Outcome[T]]]]
"""One attempt for the items still pending: an outcome per item, in order."""


class RetryLoop:
    """The one retry loop of the client, for single requests and batch chunks alike.

    :meth:`run` calls an attempt function with the items still pending
    until each has a result or a final error; only the items whose outcome
    was :class:`Retry` go out again, with the same request ids and bytes.
    :meth:`send` makes one attempt's HTTP request.
    """

    def __init__(self, settings: ClientSettings, transport: AsyncTransport, headers: Mapping[str, str]) -> None:
        self.settings = settings
        self.transport = transport
        self.headers = dict(headers)
        self.endpoints = settings.endpoints
        self._rr = itertools.count(random.randrange(len(self.endpoints)))
        self._slots = asyncio.Semaphore(settings.pool_limit)

    async def run(self, items: Sequence[PreparedItem], attempt: Attempt[T]) -> list[T | ScorerError]:
        """Each item's result or final error, in order; transient faults are retried until the budget is spent."""
        attempts = Attempts(self.settings, self.endpoints, next(self._rr))
        out: dict[int, T | ScorerError] = {}
        causes: dict[int, BaseException] = {}
        pending = list(range(len(items)))
        while pending:
            outcomes = await attempt(attempts, [items[i] for i in pending])
            still: list[int] = []
            retries = [o for o in outcomes if isinstance(o, Retry)]
            for i, outcome in zip(pending, outcomes, strict=True):
                if isinstance(outcome, Success):
                    out[i] = outcome.value
                elif isinstance(outcome, Fatal):
                    out[i] = outcome.error
                else:
                    causes[i] = outcome.cause
                    still.append(i)
            answered = len(retries) < len(outcomes) or all(busy(o) for o in retries)
            pending = still
            if not pending:
                break
            logger.debug("attempt %d failed for %d item(s): %r", attempts.made, len(pending), causes[pending[0]])
            retry_after = max((o.retry_after for o in retries if o.retry_after is not None), default=None)
            spend = not (self.settings.wait_while_busy and answered)
            if attempts.expired() or not await attempts.wait_before_retry(retry_after, spend=spend):
                for i in pending:
                    out[i] = attempts.give_up(causes[i], items[i].request_id)
                break
        return [out[i] for i in range(len(items))]

    async def send(self, attempts: Attempts, url: str, body: bytes, request_id: str | None, *,
                   counted: bool = True) -> Answer:
        """One attempt's POST; transport faults and non-HTTP answers are returned, not raised.

        ``counted`` False: a further request of the same attempt (a chunk sent in parts), not a new attempt.
        """
        if counted:
            attempts.made += 1
        # The per-attempt timeout starts once a connection slot is ours, so requests
        # queued behind the pool limit do not time out while waiting their turn.
        remaining = attempts.remaining()
        try:
            await asyncio.wait_for(self._slots.acquire(), None if remaining is None else max(remaining, 0.0))
        except asyncio.TimeoutError:
            return TransportTimeout("no connection slot came free before the deadline")
        try:
            headers = {**self.headers, "X-Request-ID": request_id} if request_id else self.headers
            request = Request("POST", url, headers, body, timeout=attempts.attempt_timeout(),
                              connect_timeout=self.settings.connect_timeout)
            return await self.transport.handle_async_request(request)
        except (TransportError, ScorerError) as exc:
            return exc
        finally:
            self._slots.release()
