"""The client's core: request building, what each answer means, and the one retry loop, for both faces.

As httpx's ``BaseClient`` serves its ``Client`` and ``AsyncClient``, this module holds what
:class:`~.async_client.AsyncScorerClient` and :class:`~.sync_client.ScorerClient` do alike: the settings built
from the constructor's arguments (:class:`BaseScorerClient`), and :class:`ScorerCore`, which prepares items,
sends them through one retry loop per call and decides what each answer means: a result, a retry (the server
busy, an evicted speaker reference registered again, a batch halved after a timeout) or a final error.  The
faces only call it: the async face binds it to its event loop, the sync face runs that one on a loop it owns.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from pydantic import ValidationError

from .. import __version__
from .errors import (
    AudioTooLongError,
    DeadlineExceededError,
    ProtocolViolationError,
    RequestRejectedError,
    ScorerError,
    ScorerUnavailableError,
    TransientServerError,
)
from .settings import BATCH_PATH, INFO_PATH, ClientSettings, ScorerEndpoint, url_error
from .transport import (
    Answer,
    AsyncTransport,
    Fatal,
    Outcome,
    Request,
    Response,
    Retry,
    Success,
    TransportError,
    TransportTimeout,
    classify,
    next_delay,
)
from .wire import (
    PreparedItem,
    ScoreItem,
    ScoreResult,
    as_score_item,
    batch_body,
    decode_body,
    error_info,
    error_of_body,
    new_request_id,
    prepare,
    speaker_reference_id_of,
    to_result,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Above this many bytes of audio (about 45 s at 24 kHz), encoding moves to a worker thread so the
# event loop keeps serving; below it the thread hop costs more than the few milliseconds it saves.
_INLINE_ENCODE_BYTES = 4 << 20

# ---------------------------------------------------------------- construction


class BaseScorerClient:
    """What both client faces share: construction from settings or keyword arguments, and the closed state.

    Pass the scorer URL(s) with keyword settings, or one :class:`~.settings.ClientSettings`, not both.
    Each face sets up its I/O in :meth:`_open`.
    """

    def __init__(
        self,
        urls: str | Sequence[str] | None = None,
        *,
        settings: ClientSettings | None = None,
        transport: AsyncTransport | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        connect_timeout: float | None = None,
        deadline: float | None = None,
        max_retries: int | None = None,
        backoff: float | None = None,
        backoff_max: float | None = None,
        retry_after_max: float | None = None,
        wait_while_busy: bool | None = None,
        pool_limit: int | None = None,
        concurrency: int | None = None,
        chunk_size: int | None = None,
    ) -> None:
        # The keyword arguments named after a setting (all but the URLs), where given.
        given = {k: v for k, v in locals().items() if k in ClientSettings.model_fields and k != "urls"
                 and v is not None}
        if settings is None:
            if urls is None:
                raise ValueError("pass the scorer URL(s) or a ClientSettings")
            try:
                settings = ClientSettings(urls, **given)
            except ValidationError as exc:
                raise (url_error(exc) or exc) from None
        elif urls is not None or given:
            raise ValueError("pass either settings or URL and keyword settings, not both")
        self.settings: ClientSettings = settings
        self._closed = False
        self._open(transport)

    def _open(self, transport: AsyncTransport | None) -> None:
        """Set up the face's I/O for :attr:`settings` (``transport``: the caller's, or None for the default)."""
        raise NotImplementedError

    @property
    def closed(self) -> bool:
        """True once the client is closed."""
        return self._closed


def _or_error(make: Callable[[Any], T], value: Any) -> T | ScorerError:
    """``make(value)``, or the :class:`ScorerError` it raised."""
    try:
        return make(value)
    except ScorerError as exc:
        return exc


# ---------------------------------------------------------------- answers


def _read(outcome: Outcome[Any], read: Callable[[Any], T]) -> Outcome[T]:
    """``read`` of a success's value (a 200 body, an item of one) as a success (a protocol violation it raises:
    a final error); others as they are."""
    if not isinstance(outcome, Success):
        return outcome
    try:
        return Success(read(outcome.value))
    except ProtocolViolationError as exc:
        return Fatal(exc)


def single_outcome(answer: Answer, request_id: str) -> Outcome[ScoreResult]:
    """What one answer to ``POST /v1/score`` means: the checked result, a retry, or a final error."""
    return _read(classify(answer, request_id), lambda raw: to_result(decode_body(raw, request_id), request_id))


def batch_outcomes(answer: Answer, items: Sequence[PreparedItem]) -> list[Outcome[ScoreResult]]:
    """What one answer to ``POST /v1/score/batch`` means for each of its items, in order.

    A fault of the whole batch (a transport fault, an error status) is each
    item's fault, carrying that item's request id (the answer classified for each); a 200 is read item by
    item (:func:`take_batch_answer`).
    """
    if isinstance(answer, Response) and answer.status == 200:
        return take_batch_answer(answer.body, items)
    # Anything but a 200 classifies as a Retry or a Fatal, which hold no value to read.
    return [cast("Retry | Fatal", classify(answer, item.request_id)) for item in items]


def take_batch_answer(raw: bytes, items: Sequence[PreparedItem]) -> list[Outcome[ScoreResult]]:
    """Read a 200 batch body: one outcome per item (a result, a retryable or a final item error).

    A body that breaks the protocol (not JSON, a result count that does not
    match) is a final :class:`ProtocolViolationError` for every item.
    """
    try:
        obj = decode_body(raw)
        results = obj.get("results") if isinstance(obj, dict) else None
        if not isinstance(results, list) or len(results) != len(items):
            got = len(results) if isinstance(results, list) else "no"
            raise ProtocolViolationError(f"a batch of {len(items)} items was answered with {got} results")
    except ProtocolViolationError as exc:
        return [Fatal(exc.for_request(item.request_id)) for item in items]
    return [_item_outcome(result, item.request_id) for item, result in zip(items, results, strict=True)]


def _item_outcome(result: Any, rid: str) -> Outcome[ScoreResult]:
    """One item of a 200 batch body: its result, or its item error (retryable or final)."""
    info = error_info(result)
    if info is None:
        return _read(Success(result), functools.partial(to_result, request_id=rid))
    if info.retryable:
        return Retry(TransientServerError(info.message, status=None, code=info.code, request_id=rid))
    return Fatal(RequestRejectedError(info.message, status=None, code=info.code, request_id=rid))


def timed_out(outcome: Outcome[Any]) -> bool:
    """Whether ``outcome`` is a retry because time ran out: no answer in time, or the server's 504 ``timeout``."""
    cause = outcome.cause if isinstance(outcome, Retry) else None
    return isinstance(cause, asyncio.TimeoutError) or (
        isinstance(cause, TransientServerError) and (cause.status == 504 or cause.code == "timeout"))


@dataclass(frozen=True)
class Reregistered(Retry):
    """A retry because the server that answered had evicted the item's speaker reference, and this client
    registered the recording there again: that server now holds it."""


def evicted(outcome: Outcome[Any]) -> bool:
    """Whether ``outcome`` is the server's ``unknown_speaker_reference``: it no longer holds the reference."""
    return (isinstance(outcome, Fatal) and isinstance(outcome.error, RequestRejectedError)
            and outcome.error.code == "unknown_speaker_reference")


BUSY_CODES = frozenset({"queue_full", "overloaded", "not_ready"})
"""The scorer's own error codes for "alive, come back later": its queue is full, it refused work it could not
finish in time (early refusal), or it is still loading.  A timeout (504) with nothing finished, a server
shutting down, or a proxy's bare 503 are not among them: those spend retries, or a hung engine would hold a
trainer for ever."""


def busy(outcome: Retry) -> bool:
    """Whether the scorer itself answered ``outcome`` with "not now" (:data:`BUSY_CODES`), not a fault."""
    cause = outcome.cause
    return isinstance(cause, TransientServerError) and cause.code in BUSY_CODES


def info_of(answer: Response) -> dict[str, Any]:
    """The object of a ``GET /v1/info`` answer; a refusal or a body that is no JSON object raises."""
    if answer.status != 200:
        info = error_of_body(answer.body, answer.status)
        raise RequestRejectedError(info.message, status=answer.status, code=info.code)
    obj = decode_body(answer.body)
    if not isinstance(obj, dict):
        raise ProtocolViolationError(f"GET {INFO_PATH} must answer a JSON object")
    return obj


@dataclass(frozen=True)
class ServerFacts:
    """What a server's ``GET /v1/info`` tells the client before it sends audio there."""

    batch: bool | None = None
    """Whether it has the batch endpoint; None when its answer does not say."""
    max_audio_seconds: float | None = None
    """The longest audio it scores; None when it does not say (the server still checks)."""


def read_facts(answer: Response) -> ServerFacts:
    """The facts in a ``/v1/info`` answer: each one read where it is well-formed, else unknown (all of them
    when the server refused or answered no JSON object).

    Read field by field, not as a whole :class:`~audio_reward.protocol.InfoResponse`: another protocol v1
    server may list only its endpoints.
    """
    try:
        info = info_of(answer)
    except (ProtocolViolationError, RequestRejectedError):
        return ServerFacts()
    listed = info.get("endpoints")
    limits = info.get("limits")
    limit = limits.get("max_audio_seconds") if isinstance(limits, dict) else None
    seconds = float(limit) if isinstance(limit, (int, float)) and not isinstance(limit, bool) else math.nan
    usable = math.isfinite(seconds) and seconds > 0
    return ServerFacts(BATCH_PATH in listed if isinstance(listed, list) else None, seconds if usable else None)


def too_long(item: PreparedItem, facts: ServerFacts, base: str) -> AudioTooLongError | None:
    """The refusal of an item longer than the server's ``max_audio_seconds``; None when it may be sent."""
    limit = facts.max_audio_seconds
    if limit is None or item.duration_s <= limit:
        return None
    return AudioTooLongError(
        f"the audio is {item.duration_s:.1f} s long; the scorer at {base} takes at most {limit:g} s "
        "(max_audio_seconds in its /v1/info), so it was not sent",
        duration_s=item.duration_s, limit_s=limit, request_id=item.request_id)


# ---------------------------------------------------------------- one call's attempts


@dataclass
class Call:
    """The attempts of one call (a request, a chunk, a registration): one deadline, one URL rotation."""

    settings: ClientSettings
    endpoints: Sequence[ScorerEndpoint]
    url_index: int
    batch: bool
    """Whether the items go out in batch requests (``score_many``), where the server has the endpoint."""
    size: int
    """Items per batch request: halved after an attempt in which a request timed out (:meth:`settle`)."""
    start: float = field(default_factory=time.monotonic)
    made: int = 0
    free: int = 0
    """Failed attempts that spent no retry: a live scorer said "not now" (``wait_while_busy``), or the attempt
    only met speaker references since registered again (:attr:`again_here`)."""
    again_here: bool = False
    """Whether the next attempt goes back to the same server at once, spending no retry: every retry of the
    last one was :class:`Reregistered`, so that server now holds the reference it lacked, where the next URL
    may never have had it (a reference is registered on one URL).  Never twice in a row, which keeps it
    finite: a server that answers ``unknown_speaker_reference`` again right after a re-registration there
    gets an ordinary retry (the next URL, a backoff, a retry spent)."""

    @property
    def endpoint(self) -> ScorerEndpoint:
        return self.endpoints[self.url_index % len(self.endpoints)]

    def remaining(self) -> float | None:
        deadline = self.settings.deadline
        return None if deadline is None else self.start + deadline - time.monotonic()

    def settle(self, sent: int, retries: Sequence[Retry]) -> None:
        """Learn from a failed attempt of ``sent`` items: a request that timed out halves the next ones, so
        each can finish in time (the server keeps what finished, so only what did not goes again); retries
        that only wait for a reference registered again go back there (:attr:`again_here`)."""
        self.again_here = not self.again_here and all(isinstance(r, Reregistered) for r in retries)
        if any(timed_out(r) for r in retries):
            self.size = max(1, min(self.size, sent) // 2)

    def retry_after(self, retries: Sequence[Retry]) -> float:
        """The wait before the next attempt: backoff with full jitter, at least the longest ``Retry-After``;
        none when it goes back to a server that now holds the reference it lacked."""
        if self.again_here:
            return 0.0
        asked = max((r.retry_after for r in retries if r.retry_after is not None), default=None)
        return next_delay(self.made - 1, base=self.settings.backoff, cap=self.settings.backoff_max,
                          retry_after=asked, retry_after_max=self.settings.retry_after_max)

    def should_retry(self, answered: bool, delay: float) -> bool:
        """Whether another attempt goes out after ``delay``: retries left and time left.

        ``answered``: a live scorer answered the attempt (every fault its "not now", or some items finished);
        with ``wait_while_busy`` such an attempt spends no retry, so only the deadline bounds the waiting.
        Nor does one whose retries go back to the same server (:attr:`again_here`).
        """
        self.free += self.again_here or (self.settings.wait_while_busy and answered)
        remaining = self.remaining()
        return self.spent <= self.settings.max_retries and (remaining is None or delay < remaining)

    @property
    def spent(self) -> int:
        """Attempts that counted against ``max_retries``."""
        return self.made - self.free

    def give_up(self, cause: BaseException, request_id: str | None) -> ScorerUnavailableError:
        """The final error of an item whose faults outlasted the retries or the deadline."""
        elapsed = time.monotonic() - self.start
        remaining = self.remaining()
        if remaining is not None and (remaining <= 0 or self.spent <= self.settings.max_retries):
            return DeadlineExceededError(
                f"no answer within the {self.settings.deadline:g} s deadline after {self.made} attempt(s) "
                f"({elapsed:.2f} s); last fault: {cause}",
                attempts=self.made, last_cause=cause, request_id=request_id,
            )
        return ScorerUnavailableError(
            f"scorer unavailable after {self.made} attempt(s) in {elapsed:.2f} s; last fault: {cause}",
            attempts=self.made, last_cause=cause, request_id=request_id,
        )


Attempt = Callable[[Call, list[PreparedItem]], Awaitable[list[Outcome[T]]]]
"""One attempt for the items still pending: an outcome per item, in order."""


# ---------------------------------------------------------------- the core


class ScorerCore:
    """Prepares items, sends them through one retry loop per call, and reads what each answer means.

    Holds what the client learns as it goes: per URL whether its server has the batch endpoint and how long
    an audio it takes (its ``/v1/info``, asked once), and the speaker references registered, to register one
    again where a server evicted it.
    """

    def __init__(self, settings: ClientSettings, transport: AsyncTransport) -> None:
        self.settings = settings
        self.transport = transport
        # The headers of every request: JSON, the client's name and version, the API key when set.
        self.headers = {"Content-Type": "application/json", "User-Agent": f"audio-reward-client/{__version__}"}
        if settings.api_key:
            self.headers["Authorization"] = f"Bearer {settings.api_key}"
        self.endpoints = settings.endpoints
        self._rr = itertools.count(random.randrange(len(self.endpoints)))
        self._slots = asyncio.Semaphore(settings.pool_limit)
        # The URLs whose server answered a batch with 404 or 405: it has no batch endpoint, whatever its
        # /v1/info said.
        self._no_batch: set[str] = set()
        self._info_probes: dict[str, asyncio.Future[ServerFacts]] = {}
        # Registered speaker references: the recording's body by its reference id (to register it again where
        # a server evicted it), and the id by the body's digest (a recording is registered once per client).
        self._speaker_bodies: dict[str, bytes] = {}
        self._speaker_ids: dict[str, str] = {}

    # ------------------------------------------------------------ what the faces call

    async def prepare(self, items: Sequence[Any]) -> list[PreparedItem | ScorerError]:
        """Each item's request body, or the error saying why it cannot be sent; large audio encodes off-loop."""
        typed = [_or_error(as_score_item, item) for item in items]
        audio = sum(_audio_bytes(item.waveform) for item in typed if isinstance(item, ScoreItem))
        if audio > _INLINE_ENCODE_BYTES:
            return await asyncio.to_thread(_prepared, typed)
        return _prepared(typed)

    async def score(self, items: Sequence[PreparedItem], *, batch: bool) -> list[ScoreResult | ScorerError]:
        """Each item's result or final error, in order: one request each, or batch requests (``batch``)."""
        return await self._run(items, self._attempt_scores, batch=batch)

    async def score_many(self, items: Sequence[Any], concurrency: int, chunk_size: int,
                         ) -> list[ScoreResult | ScorerError]:
        """Each item's result or error, in order: chunks of ``chunk_size``, ``concurrency`` of them at a time."""
        gate = asyncio.Semaphore(concurrency)
        tasks = [asyncio.ensure_future(self._score_chunk(items[s : s + chunk_size], gate))
                 for s in range(0, len(items), chunk_size)]
        try:
            chunks = await asyncio.gather(*tasks)
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return [answer for chunk in chunks for answer in chunk]

    async def register(self, digest: str, body: bytes) -> str | ScorerError:
        """The reference id of a speaker recording (``body``, its sha256 ``digest``), registered once."""
        if digest not in self._speaker_ids:
            reference = (await self._run([PreparedItem(new_request_id(), body)], self._attempt_register))[0]
            if isinstance(reference, ScorerError):
                return reference
            self._speaker_ids[digest] = reference
            self._speaker_bodies[reference] = body
        return self._speaker_ids[digest]

    async def get(self, url: str, timeout: float) -> Response:
        """One ``GET``, no retries; a fault of the transport raises."""
        return await self.transport.handle_async_request(Request("GET", url, self.headers, timeout=timeout))

    # ------------------------------------------------------------ the retry loop

    async def _run(self, items: Sequence[PreparedItem], attempt: Attempt[T], *, batch: bool = False,
                   ) -> list[T | ScorerError]:
        """Attempts until each item has its result or final error; only the items whose outcome was a
        :class:`Retry` go out again, with the same request ids and bytes, to the next URL."""
        call = Call(self.settings, self.endpoints, next(self._rr), batch, len(items))
        done: dict[int, T | ScorerError] = {}
        pending = list(range(len(items)))
        while True:
            call.made += 1
            outcomes = await attempt(call, [items[i] for i in pending])
            retries: dict[int, Retry] = {}
            for i, outcome in zip(pending, outcomes, strict=True):
                if isinstance(outcome, Retry):
                    retries[i] = outcome
                else:
                    done[i] = outcome.value if isinstance(outcome, Success) else outcome.error
            if not retries:
                return [done[i] for i in range(len(items))]
            logger.debug("attempt %d failed for %d item(s): %r", call.made, len(retries),
                         next(iter(retries.values())).cause)
            call.settle(len(pending), list(retries.values()))
            answered = len(retries) < len(pending) or all(busy(r) for r in retries.values())
            delay = call.retry_after(list(retries.values()))
            if not call.should_retry(answered, delay):
                for i, retry in retries.items():
                    done[i] = call.give_up(retry.cause, items[i].request_id)
                return [done[i] for i in range(len(items))]
            pending = list(retries)
            if not call.again_here:
                call.url_index += 1  # a retry goes to the next URL, so a dead replica is left at once
            await asyncio.sleep(delay)

    async def _attempt_scores(self, call: Call, pending: list[PreparedItem]) -> list[Outcome[ScoreResult]]:
        """One attempt for ``pending``: what the server takes goes out; what is too long for it is refused."""
        endpoint = call.endpoint
        facts = await self._facts(endpoint)
        outcomes: list[Outcome[ScoreResult] | None] = [
            None if (refused := too_long(p, facts, endpoint.base)) is None else Fatal(refused) for p in pending]
        sendable = [p for p, o in zip(pending, outcomes, strict=True) if o is None]  # none sent when empty
        answered = iter(await self._reregistered(call, sendable, await self._send_scores(call, sendable)))
        return [o if o is not None else next(answered) for o in outcomes]

    async def _send_scores(self, call: Call, items: list[PreparedItem]) -> list[Outcome[ScoreResult]]:
        """Batch requests where the call batches and the server has the endpoint, else one request per item."""
        endpoint = call.endpoint
        # A server that lists its endpoints in /v1/info says whether it has the batch one; a server without
        # /v1/info (404/405, such as verl-omni's reference scorer) has none.  When the answer tells nothing (an
        # error, no list), batches are tried, and a 404 or 405 to a batch turns them off.
        if call.batch and endpoint.url not in self._no_batch and (await self._facts(endpoint)).batch is not False:
            outcomes = await self._send_batches(call, endpoint, items)
            if outcomes is not None:
                return outcomes
        answers = await asyncio.gather(*(self._post(call, endpoint.score_url, i.body, i.request_id) for i in items))
        return [single_outcome(answer, item.request_id) for answer, item in zip(answers, items, strict=True)]

    async def _send_batches(self, call: Call, endpoint: ScorerEndpoint,
                            items: list[PreparedItem]) -> list[Outcome[ScoreResult]] | None:
        """Batch requests of at most ``call.size`` items, one after another, so each request's time on the
        server starts when the previous one is answered.  None when the server has no batch endpoint."""
        outcomes: list[Outcome[ScoreResult]] = []
        for start in range(0, len(items), call.size):
            part = items[start : start + call.size]
            answer = await self._post(call, endpoint.batch_url, batch_body(part), None)
            if start == 0 and isinstance(answer, Response) and answer.status in (404, 405):
                # A server without the batch endpoint (a verl-omni protocol server): one request per item.
                logger.info("%s has no batch endpoint (HTTP %d); scoring items one by one", endpoint.url,
                            answer.status)
                self._no_batch.add(endpoint.url)
                return None
            outcomes += batch_outcomes(answer, part)
        return outcomes

    async def _attempt_register(self, call: Call, pending: list[PreparedItem]) -> list[Outcome[str]]:
        return [await self._register(call, pending[0].body)]

    async def _register(self, call: Call, body: bytes) -> Outcome[str]:
        request_id = new_request_id()
        answer = await self._post(call, f"{call.endpoint.base}/v1/speakers", body, request_id)
        return _read(classify(answer, request_id), speaker_reference_id_of)

    async def _reregistered(self, call: Call, items: Sequence[PreparedItem],
                            outcomes: list[Outcome[ScoreResult]]) -> list[Outcome[ScoreResult]]:
        """``outcomes`` with each ``unknown_speaker_reference`` of a reference this client registered turned
        into a :class:`Reregistered` retry, once the recording is registered again on the server that answered."""
        out: list[Outcome[ScoreResult]] = []
        again: dict[str, Outcome[str]] = {}
        for item, outcome in zip(items, outcomes, strict=True):
            reference = item.speaker_reference_id
            body = self._speaker_bodies.get(reference) if reference is not None and evicted(outcome) else None
            if reference is None or body is None or not isinstance(outcome, Fatal):
                out.append(outcome)
                continue
            if reference not in again:
                logger.info("speaker reference %s was evicted by %s; registering it again", reference,
                            call.endpoint.url)
                again[reference] = await self._register(call, body)
            registered = again[reference]
            out.append(registered if not isinstance(registered, Success) else Reregistered(outcome.error))
        return out

    async def _post(self, call: Call, url: str, body: bytes, request_id: str | None) -> Answer:
        """One POST of an attempt; transport faults and non-HTTP answers are returned, not raised."""
        # The attempt's timeout starts once a connection slot is ours, so requests queued behind the pool
        # limit do not time out while waiting their turn.
        remaining = call.remaining()
        try:
            await asyncio.wait_for(self._slots.acquire(), None if remaining is None else max(remaining, 0.0))
        except asyncio.TimeoutError:
            return TransportTimeout("no connection slot came free before the deadline")
        try:
            headers = {**self.headers, "X-Request-ID": request_id} if request_id else self.headers
            remaining = call.remaining()  # what the wait for a slot left
            timeout = self.settings.timeout if remaining is None else min(self.settings.timeout, remaining)
            return await self.transport.handle_async_request(
                Request("POST", url, headers, body, timeout=timeout, connect_timeout=self.settings.connect_timeout))
        except (TransportError, ScorerError) as exc:
            return exc
        finally:
            self._slots.release()

    # ------------------------------------------------------------ what a server takes

    async def _facts(self, endpoint: ScorerEndpoint) -> ServerFacts:
        """What ``endpoint``'s ``/v1/info`` says (batches, the audio limit); asked once per URL, shared."""
        if endpoint.url not in self._info_probes:
            self._info_probes[endpoint.url] = asyncio.ensure_future(self._probe_info(endpoint))
        return await asyncio.shield(self._info_probes[endpoint.url])

    async def _probe_info(self, endpoint: ScorerEndpoint) -> ServerFacts:
        timeout = min(self.settings.timeout, self.settings.connect_timeout)
        try:
            answer = await self.get(endpoint.base + INFO_PATH, timeout)
        except (TransportError, ScorerError) as exc:  # the score request that follows meets it again
            logger.debug("GET %s%s failed (%r); batches will be tried", endpoint.base, INFO_PATH, exc)
            return ServerFacts()
        if answer.status in (404, 405):
            logger.info("%s has no %s (HTTP %d): a protocol v1 server without batches; sending one request per item",
                        endpoint.base, INFO_PATH, answer.status)
            return ServerFacts(batch=False)
        return read_facts(answer)

    async def _score_chunk(self, items: Sequence[Any], gate: asyncio.Semaphore) -> list[ScoreResult | ScorerError]:
        async with gate:
            out = await self.prepare(items)
            ready = [p for p in out if isinstance(p, PreparedItem)]
            if not ready:
                return [p for p in out if isinstance(p, ScorerError)]
            try:
                answers = iter(await self.score(ready, batch=True))
            except Exception as exc:  # a bug must not cost the other chunks their results
                logger.exception("unexpected error while scoring a chunk")
                answers = iter([ScorerError(f"unexpected client error: {exc!r}", request_id=p.request_id)
                                for p in ready])
            return [next(answers) if isinstance(p, PreparedItem) else p for p in out]


def _audio_bytes(waveform: Any) -> int:
    """About how many bytes of audio ``waveform`` holds (what encoding it costs)."""
    nbytes = getattr(waveform, "nbytes", None)
    return nbytes if isinstance(nbytes, int) else 4 * len(waveform) if hasattr(waveform, "__len__") else 0


def _prepared(typed: Sequence[ScoreItem | ScorerError]) -> list[PreparedItem | ScorerError]:
    return [item if isinstance(item, ScorerError) else _or_error(prepare, item) for item in typed]
