"""The asyncio scorer client: pooled sessions, bounded retries, typed errors."""

from __future__ import annotations

import asyncio
import copy
import itertools
import logging
import random
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import aiohttp

from .. import __version__
from ..protocol import RewardOptions
from .errors import (
    DeadlineExceededError,
    ProtocolViolationError,
    RequestRejectedError,
    ScorerError,
    ScorerUnavailableError,
    TransientServerError,
)
from .retry import is_retryable_status, next_delay, parse_retry_after
from .settings import BATCH_PATH, INFO_PATH, ClientSettings, ScorerEndpoint, endpoint_of
from .wire import (
    PreparedItem,
    ScoreItem,
    ScoreResult,
    as_score_item,
    batch_body,
    decode_body,
    error_info,
    error_of_body,
    prepare,
    to_result,
)

logger = logging.getLogger(__name__)

# Faults of the transport: the request may not have reached the server, or its answer got lost.
_TRANSPORT_ERRORS = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, asyncio.TimeoutError)

# Above this many bytes of audio (about 45 s at 24 kHz), encoding moves to a worker thread so the
# event loop keeps serving; below it the thread hop costs more than the few milliseconds it saves.
_INLINE_ENCODE_BYTES = 4 << 20


@dataclass
class _Answer:
    status: int
    body: bytes
    retry_after: float | None


def _for_item(error: ScorerError, request_id: str) -> ScorerError:
    """A chunk-wide error as one item's error, carrying that item's request id."""
    if error.request_id == request_id:
        return error
    item = copy.copy(error)
    item.request_id = request_id
    return item


def _audio_bytes(waveform: Any) -> int:
    nbytes = getattr(waveform, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    return 4 * len(waveform) if hasattr(waveform, "__len__") else 0


class _Attempts:
    """Attempt counting, URL rotation and waiting for one request (or one chunk)."""

    def __init__(self, client: "AsyncScorerClient") -> None:
        self.settings = client.settings
        self.start = time.monotonic()
        self.deadline_at = None if self.settings.deadline is None else self.start + self.settings.deadline
        self.endpoints = client._endpoints
        self.url_index = next(client._rr)
        self.made = 0

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

    async def wait_before_retry(self, retry_after: float | None) -> bool:
        """Sleep before the next attempt; False when the retries or the deadline are spent.

        The next attempt goes to the next URL, so a dead replica is left at once.
        """
        if self.made > self.settings.max_retries:
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

    def give_up(self, cause: BaseException | None, request_id: str | None) -> ScorerUnavailableError:
        elapsed = time.monotonic() - self.start
        if self.deadline_at is not None and (self.expired() or self.made <= self.settings.max_retries):
            return DeadlineExceededError(
                f"no answer within the {self.settings.deadline:g} s deadline after {self.made} attempt(s) "
                f"({elapsed:.2f} s); last fault: {cause}",
                attempts=self.made, last_cause=cause, request_id=request_id,
            )
        return ScorerUnavailableError(
            f"scorer unavailable after {self.made} attempt(s) in {elapsed:.2f} s; last fault: {cause}",
            attempts=self.made, last_cause=cause, request_id=request_id,
        )


class AsyncScorerClient:
    """Scores candidates on one or more scorer servers from asyncio code.

    One instance holds one ``aiohttp`` session (a pooled connector) and
    belongs to the event loop it is first used in; use it as an async
    context manager or call :meth:`aclose`.  Several URLs spread the load
    round-robin, and a retry goes to the next URL.

    Retries: connection errors, timeouts, 408, 429 and 5xx are retried up to
    ``max_retries`` times with exponential backoff and full jitter, waiting
    at least a server's ``Retry-After`` (capped by ``retry_after_max``).  Any
    other 4xx and any answer that breaks the protocol fail at once.
    """

    def __init__(
        self,
        urls: str | Sequence[str] | None = None,
        *,
        settings: ClientSettings | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        connect_timeout: float | None = None,
        deadline: float | None = None,
        max_retries: int | None = None,
        backoff: float | None = None,
        backoff_max: float | None = None,
        retry_after_max: float | None = None,
        pool_limit: int | None = None,
        concurrency: int | None = None,
        chunk_size: int | None = None,
    ) -> None:
        overrides = dict(
            api_key=api_key, timeout=timeout, connect_timeout=connect_timeout, deadline=deadline,
            max_retries=max_retries, backoff=backoff, backoff_max=backoff_max, retry_after_max=retry_after_max,
            pool_limit=pool_limit, concurrency=concurrency, chunk_size=chunk_size,
        )
        if settings is None:
            if urls is None:
                raise ValueError("pass the scorer URL(s) or a ClientSettings")
            settings = ClientSettings(urls=urls, **{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]
        elif urls is not None or any(v is not None for v in overrides.values()):
            raise ValueError("pass either settings or URL and keyword settings, not both")
        self.settings = settings
        self._rr = itertools.count(random.randrange(len(settings.urls)))
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots: asyncio.Semaphore | None = None
        self._endpoints = settings.endpoints
        # Per URL: whether its server has the batch endpoint (None: not known, try it); asked once.
        self._batch_support: dict[str, bool | None] = {}
        self._batch_probes: dict[str, asyncio.Future[bool | None]] = {}
        self._closed = False
        self._headers = {"Content-Type": "application/json", "User-Agent": f"audio-reward-client/{__version__}"}
        if settings.api_key:
            self._headers["Authorization"] = f"Bearer {settings.api_key}"

    async def __aenter__(self) -> "AsyncScorerClient":
        self._bind()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the session and its connections; the client cannot be used afterwards."""
        self._closed = True
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def _bind(self) -> aiohttp.ClientSession:
        if self._closed:
            raise RuntimeError("this AsyncScorerClient is closed")
        loop = asyncio.get_running_loop()
        if self._session is None:
            self._loop = loop
            self._slots = asyncio.Semaphore(self.settings.pool_limit)
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.settings.pool_limit, limit_per_host=0),
                timeout=aiohttp.ClientTimeout(total=None),
                headers=self._headers,
            )
        elif loop is not self._loop:
            raise RuntimeError(
                "an AsyncScorerClient belongs to the event loop it was first used in; "
                "create one client per event loop (or use ScorerClient from threads)"
            )
        return self._session

    async def _post(self, attempts: _Attempts, target: str, body: bytes, request_id: str | None) -> _Answer:
        session = self._bind()
        assert self._slots is not None
        attempts.made += 1
        # The per-attempt timeout starts once a connection slot is ours, so requests
        # queued behind the pool limit do not time out while waiting their turn.
        remaining = attempts.remaining()
        if remaining is None:
            await self._slots.acquire()
        else:
            await asyncio.wait_for(self._slots.acquire(), max(remaining, 0.0))
        try:
            # aiohttp reads a zero timeout as "no timeout": never let it reach zero.
            timeout = max(attempts.attempt_timeout(), 0.001)
            headers = {"X-Request-ID": request_id} if request_id else None
            async with session.post(
                target,
                data=body,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=timeout, connect=min(self.settings.connect_timeout, timeout)),
            ) as resp:
                raw = await resp.read()
                return _Answer(resp.status, raw, parse_retry_after(resp.headers.get("Retry-After")))
        except aiohttp.ClientResponseError as exc:
            # Not HTTP at all (a garbled status line or headers): the peer is not a scorer.
            raise ProtocolViolationError(f"the scorer's answer is not valid HTTP: {exc}", request_id=request_id) from exc
        finally:
            self._slots.release()

    # ------------------------------------------------------------------ single

    async def score(
        self,
        waveform: Any,
        sample_rate: int,
        text: str,
        *,
        language: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        reward: RewardOptions | Mapping[str, Any] | None = None,
        reference_duration_s: float | None = None,
        request_id: str | None = None,
    ) -> ScoreResult:
        """Score one candidate.

        ``waveform`` is mono audio as a numpy array, a CPU torch tensor or a
        list; ``text`` is what it should say.  Raises a :class:`ScorerError`
        subclass on failure (see :mod:`audio_reward.scorer_client.errors`).
        """
        item = ScoreItem(waveform, sample_rate, text, language, metadata, reward, reference_duration_s, request_id)
        prepared = (await self._prepare_all([item]))[0]
        if isinstance(prepared, ScorerError):
            raise prepared
        return await self._score_prepared(prepared)

    async def _score_prepared(self, item: PreparedItem) -> ScoreResult:
        attempts = _Attempts(self)
        rid = item.request_id
        while True:
            try:
                answer = await self._post(attempts, attempts.endpoint.score_url, item.body, rid)
            except _TRANSPORT_ERRORS as exc:
                cause: BaseException = exc
                retry_after = None
            else:
                if answer.status == 200:
                    return to_result(decode_body(answer.body, rid), rid)
                info = error_of_body(answer.body, answer.status)
                if not is_retryable_status(answer.status, info.retryable):
                    raise RequestRejectedError(info.message, status=answer.status, code=info.code, request_id=rid)
                cause = TransientServerError(info.message, status=answer.status, code=info.code,
                                             retry_after=answer.retry_after, request_id=rid)
                retry_after = answer.retry_after
            logger.debug("request %s attempt %d failed: %r", rid, attempts.made, cause)
            if attempts.expired() or not await attempts.wait_before_retry(retry_after):
                raise attempts.give_up(cause, rid)

    # ------------------------------------------------------------------ many

    async def score_many(
        self,
        items: Iterable[ScoreItem | Mapping[str, Any] | tuple[Any, int, str]],
        *,
        concurrency: int | None = None,
        chunk_size: int | None = None,
        return_exceptions: bool = True,
    ) -> list[ScoreResult | ScorerError]:
        """Score many candidates through the batch endpoint, in order.

        Items go out in chunks of ``chunk_size``, ``concurrency`` chunks at a
        time.  A failed chunk or a retryable item error is retried for the
        items still unanswered only, with the same request ids, so no item is
        scored twice by this client and none is dropped: each position of the
        returned list holds its item's :class:`ScoreResult` or its
        :class:`ScorerError`.  With ``return_exceptions=False`` the first
        error (in item order) is raised after every item has finished.
        """
        concurrency = self.settings.concurrency if concurrency is None else concurrency
        chunk_size = self.settings.chunk_size if chunk_size is None else chunk_size
        for name, value in (("concurrency", concurrency), ("chunk_size", chunk_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self._bind()
        raw = list(items)
        results: list[ScoreResult | ScorerError | None] = [None] * len(raw)
        gate = asyncio.Semaphore(concurrency)

        async def run_chunk(start: int) -> None:
            async with gate:
                chunk = raw[start : start + chunk_size]
                prepared = await self._prepare_all(chunk)
                ready = [(start + i, p) for i, p in enumerate(prepared) if isinstance(p, PreparedItem)]
                for i, p in enumerate(prepared):
                    if isinstance(p, ScorerError):
                        results[start + i] = p
                if ready:
                    try:
                        answers = await self._score_chunk([p for _, p in ready])
                    except ScorerError as exc:
                        answers = [_for_item(exc, p.request_id) for _, p in ready]
                    except Exception as exc:  # a bug must not cost the other chunks their results
                        logger.exception("unexpected error while scoring a chunk")
                        answers = [_for_item(ScorerError(f"unexpected client error: {exc!r}"), p.request_id)
                                   for _, p in ready]
                    for (pos, _), answer in zip(ready, answers):
                        results[pos] = answer

        tasks = [asyncio.ensure_future(run_chunk(s)) for s in range(0, len(raw), chunk_size)]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        final: list[ScoreResult | ScorerError] = [r for r in results if r is not None]
        assert len(final) == len(raw), "every item gets a result or an error"
        if not return_exceptions:
            for r in final:
                if isinstance(r, ScorerError):
                    raise r
        return final

    async def _prepare_all(self, items: Sequence[Any]) -> list[PreparedItem | ScorerError]:
        typed: list[ScoreItem | ScorerError] = []
        for item in items:
            try:
                typed.append(as_score_item(item))
            except ScorerError as exc:
                typed.append(exc)

        def run() -> list[PreparedItem | ScorerError]:
            out: list[PreparedItem | ScorerError] = []
            for item in typed:
                if isinstance(item, ScorerError):
                    out.append(item)
                    continue
                try:
                    out.append(prepare(item))
                except ScorerError as exc:
                    out.append(exc)
            return out

        size = sum(_audio_bytes(i.waveform) for i in typed if isinstance(i, ScoreItem))
        if size > _INLINE_ENCODE_BYTES:
            return await asyncio.to_thread(run)
        return run()

    async def _score_chunk(self, items: list[PreparedItem]) -> list[ScoreResult | ScorerError]:
        attempts = _Attempts(self)
        out: list[ScoreResult | ScorerError | None] = [None] * len(items)
        causes: dict[int, BaseException] = {}
        pending = list(range(len(items)))
        while pending:
            endpoint = attempts.endpoint
            if not await self._supports_batch(endpoint):
                rest = await self._score_singly([items[i] for i in pending])
                for i, r in zip(pending, rest):
                    out[i] = r
                break
            retry_after = None
            try:
                answer = await self._post(attempts, endpoint.batch_url, batch_body([items[i] for i in pending]), None)
            except _TRANSPORT_ERRORS as exc:
                causes.update((i, exc) for i in pending)
            else:
                if answer.status == 200:
                    pending = self._take_batch_answer(answer.body, items, pending, out, causes)
                elif answer.status in (404, 405):
                    # A server without the batch endpoint (a verl-omni protocol server): one request per item.
                    logger.info("%s has no batch endpoint (HTTP %d); scoring items one by one",
                                endpoint.url, answer.status)
                    self._batch_support[endpoint.url] = False
                    continue
                else:
                    info = error_of_body(answer.body, answer.status)
                    if is_retryable_status(answer.status, info.retryable):
                        retry_after = answer.retry_after
                        for i in pending:
                            causes[i] = TransientServerError(info.message, status=answer.status, code=info.code,
                                                             retry_after=retry_after, request_id=items[i].request_id)
                    else:
                        for i in pending:
                            out[i] = RequestRejectedError(info.message, status=answer.status, code=info.code,
                                                          request_id=items[i].request_id)
                        pending = []
            if pending and (attempts.expired() or not await attempts.wait_before_retry(retry_after)):
                for i in pending:
                    out[i] = attempts.give_up(causes.get(i), items[i].request_id)
                pending = []
        return [r for r in out if r is not None]

    async def _supports_batch(self, endpoint: ScorerEndpoint) -> bool:
        """Whether to send batches to ``endpoint``: its server's ``/v1/info`` is asked once.

        A server that lists its endpoints says whether it has the batch one; a
        server without ``/v1/info`` (404/405, such as verl-omni's reference
        scorer) has none.  When the answer tells nothing (an error, no list),
        batches are tried, and a 404 or 405 to a batch turns them off.
        """
        known = self._batch_support.get(endpoint.url, ...)
        if known is not ...:
            return known is not False
        probe = self._batch_probes.get(endpoint.url)
        if probe is None:
            probe = asyncio.ensure_future(self._probe_batch(endpoint))
            self._batch_probes[endpoint.url] = probe
        support = await asyncio.shield(probe)
        self._batch_support.setdefault(endpoint.url, support)
        return self._batch_support[endpoint.url] is not False

    async def _probe_batch(self, endpoint: ScorerEndpoint) -> bool | None:
        session = self._bind()
        timeout = aiohttp.ClientTimeout(total=min(self.settings.timeout, self.settings.connect_timeout))
        try:
            async with session.get(endpoint.base + INFO_PATH, timeout=timeout) as resp:
                status = resp.status
                raw = await resp.read()
        except _TRANSPORT_ERRORS as exc:
            logger.debug("GET %s%s failed (%r); batches will be tried", endpoint.base, INFO_PATH, exc)
            return None
        if status in (404, 405):
            logger.info("%s has no %s (HTTP %d): a protocol v1 server without batches; sending one request per item",
                        endpoint.base, INFO_PATH, status)
            return False
        if status != 200:
            return None
        try:
            listed = decode_body(raw).get("endpoints")
        except (ProtocolViolationError, AttributeError):
            return None
        if not isinstance(listed, list):
            return None
        return BATCH_PATH in listed

    @staticmethod
    def _take_batch_answer(
        raw: bytes,
        items: list[PreparedItem],
        pending: list[int],
        out: list[ScoreResult | ScorerError | None],
        causes: dict[int, BaseException],
    ) -> list[int]:
        """File a batch answer's results; return the items that need another attempt."""
        try:
            obj = decode_body(raw)
            results = obj.get("results") if isinstance(obj, dict) else None
            if not isinstance(results, list) or len(results) != len(pending):
                got = len(results) if isinstance(results, list) else "no"
                raise ProtocolViolationError(f"a batch of {len(pending)} items was answered with {got} results")
        except ProtocolViolationError as exc:
            for i in pending:
                out[i] = ProtocolViolationError(exc.message, request_id=items[i].request_id)
            return []
        still: list[int] = []
        for i, result in zip(pending, results):
            rid = items[i].request_id
            info = error_info(result)
            if info is None:
                try:
                    out[i] = to_result(result, rid)
                except ProtocolViolationError as exc:
                    out[i] = exc
            elif info.retryable:
                causes[i] = TransientServerError(info.message, status=None, code=info.code, request_id=rid)
                still.append(i)
            else:
                out[i] = RequestRejectedError(info.message, status=None, code=info.code, request_id=rid)
        return still

    async def _score_singly(self, items: list[PreparedItem]) -> list[ScoreResult | ScorerError]:
        async def one(item: PreparedItem) -> ScoreResult | ScorerError:
            try:
                return await self._score_prepared(item)
            except ScorerError as exc:
                return exc

        return list(await asyncio.gather(*(one(i) for i in items)))

    # ------------------------------------------------------------------ info

    async def info(self, url: str | None = None) -> dict[str, Any]:
        """The server's ``GET /v1/info`` (model, limits, defaults); one attempt, no retries."""
        return await self._get_json(INFO_PATH, url)

    async def ready(self, url: str | None = None) -> bool:
        """True when ``GET /readyz`` answers 200 within the timeout."""
        session = self._bind()
        target = self._base(url) + "/readyz"
        try:
            async with session.get(target, timeout=aiohttp.ClientTimeout(total=self.settings.connect_timeout)) as resp:
                await resp.read()
                return resp.status == 200
        except _TRANSPORT_ERRORS:
            return False

    def _base(self, url: str | None) -> str:
        return self._endpoints[0].base if url is None else endpoint_of(url).base

    async def _get_json(self, path: str, url: str | None) -> dict[str, Any]:
        session = self._bind()
        target = self._base(url) + path
        try:
            async with session.get(target, timeout=aiohttp.ClientTimeout(total=self.settings.timeout)) as resp:
                raw = await resp.read()
                status = resp.status
        except _TRANSPORT_ERRORS as exc:
            raise ScorerUnavailableError(f"GET {target} failed: {exc!r}", attempts=1, last_cause=exc) from exc
        if status != 200:
            info = error_of_body(raw, status)
            raise RequestRejectedError(info.message, status=status, code=info.code)
        obj = decode_body(raw)
        if not isinstance(obj, dict):
            raise ProtocolViolationError(f"GET {path} must answer a JSON object")
        return obj

