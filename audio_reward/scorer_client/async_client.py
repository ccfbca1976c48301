"""The asyncio scorer client: the I/O of every request, over the shared core and the one retry loop.

What a request holds and what an answer means is decided in :mod:`.core`, for this client and
:class:`~.sync_client.ScorerClient` alike; this face sends, waits and gathers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from ..protocol import RewardOptions
from .audio_file import AudioFileError, read_audio
from .core import (
    BaseScorerClient,
    ServerFacts,
    audio_bytes,
    batch_outcomes,
    chunking,
    evicted,
    info_of,
    prepared_items,
    read_facts,
    request_headers,
    single_outcome,
    speaker_outcome,
    timed_out,
    too_long,
    typed_items,
)
from .errors import (
    InvalidInputError,
    ScorerError,
    ScorerUnavailableError,
)
from .settings import INFO_PATH, ScorerEndpoint, endpoint_of
from .transport import (
    AiohttpTransport,
    AsyncTransport,
    Attempts,
    Fatal,
    Outcome,
    Request,
    Response,
    Retry,
    RetryLoop,
    Success,
    TransportError,
)
from .wire import (
    PreparedItem,
    ScoreItem,
    ScoreResult,
    batch_body,
    new_request_id,
    speaker_body,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Above this many bytes of audio (about 45 s at 24 kHz), encoding moves to a worker thread so the
# event loop keeps serving; below it the thread hop costs more than the few milliseconds it saves.
_INLINE_ENCODE_BYTES = 4 << 20


class AsyncScorerClient(BaseScorerClient):
    """Scores candidates on one or more scorer servers from asyncio code.

    One instance holds one transport (by default an ``aiohttp`` session with
    a pooled connector) and belongs to the event loop it is first used in;
    use it as an async context manager or call :meth:`aclose`, which closes
    the transport too.  Several URLs spread the load round-robin, and a
    retry goes to the next URL.  ``transport=`` takes any
    :class:`~.transport.AsyncTransport` (as httpx's ``transport=`` does).

    Retries: connection errors, timeouts, 408, 429 and 5xx are retried up to
    ``max_retries`` times with exponential backoff and full jitter, waiting
    at least a server's ``Retry-After`` (capped by ``retry_after_max``).  Any
    other 4xx and any answer that breaks the protocol fail at once.
    """

    def _open(self, transport: AsyncTransport | None) -> None:
        self._transport = AiohttpTransport(self.settings.pool_limit) if transport is None else transport
        self._headers = request_headers(self.settings)
        self._retry = RetryLoop(self.settings, self._transport, self._headers)
        self._loop: asyncio.AbstractEventLoop | None = None
        # Per URL: whether its server has the batch endpoint (None: not known, try it), from its /v1/info
        # (asked once) until a 404 or 405 to a batch says otherwise.
        self._batch_support: dict[str, bool | None] = {}
        self._info_probes: dict[str, asyncio.Future[ServerFacts]] = {}
        # Registered speaker references: the recording's body by its reference id (to register it again where
        # a server evicted it), and the id by the body's digest (a recording is registered once per client).
        self._speaker_bodies: dict[str, bytes] = {}
        self._speaker_ids: dict[str, str] = {}
        self._speaker_files: dict[str, str] = {}

    async def __aenter__(self) -> AsyncScorerClient:
        self._bind()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the transport and its connections; the client cannot be used afterwards."""
        self._closed = True
        await self._transport.aclose()

    def _bind(self) -> None:
        if self._closed:
            raise RuntimeError("this AsyncScorerClient is closed")
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            raise RuntimeError(
                "an AsyncScorerClient belongs to the event loop it was first used in; "
                "create one client per event loop (or use ScorerClient from threads)"
            )

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
        speaker_reference_id: str | None = None,
        measure_quality: bool = False,
    ) -> ScoreResult:
        """Score one candidate.

        ``waveform`` is mono audio as a numpy array, a CPU torch tensor or a
        list (for a file on disk, :meth:`score_file`); ``text`` is what it should say; ``speaker_reference_id`` (from
        :meth:`register_speaker`) adds its speaker similarity, ``measure_quality``
        its DNSMOS where the reward does not weigh it already.  Raises a
        :class:`ScorerError` subclass on failure (see :mod:`audio_reward.scorer_client.errors`).
        """
        self._bind()
        item = ScoreItem(waveform, sample_rate, text, language, metadata, reward, reference_duration_s, request_id,
                         speaker_reference_id, measure_quality)
        return await self._score_prepared(_raised((await self._prepare_all([item]))[0]))

    async def score_file(
        self,
        path: str | Path,
        text: str,
        *,
        language: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        reward: RewardOptions | Mapping[str, Any] | None = None,
        reference_duration_s: float | None = None,
        request_id: str | None = None,
        speaker_reference_id: str | None = None,
        measure_quality: bool = False,
    ) -> ScoreResult:
        """:meth:`score` for an audio file on disk, read as ``audio-reward score`` reads it.

        WAV, FLAC, MP3 and OGG everywhere; M4A, WebM and the other FFmpeg formats where PyAV is installed;
        several channels are averaged, and the file's own sample rate is sent.  A file that cannot be read
        raises :class:`InvalidInputError` naming it (nothing is sent).
        """
        self._bind()
        try:
            audio, rate = await asyncio.to_thread(read_audio, path)
        except AudioFileError as exc:
            raise InvalidInputError(str(exc), request_id=request_id) from None
        return await self.score(audio, rate, text, language=language, metadata=metadata, reward=reward,
                                reference_duration_s=reference_duration_s, request_id=request_id,
                                speaker_reference_id=speaker_reference_id, measure_quality=measure_quality)

    async def _score_prepared(self, item: PreparedItem) -> ScoreResult:
        async def attempt(attempts: Attempts, pending: list[PreparedItem]) -> list[Outcome[ScoreResult]]:
            refused = too_long(item, await self._facts(attempts.endpoint), attempts.endpoint.base)
            if refused is not None:
                return [Fatal(refused)]
            answer = await self._retry.send(attempts, attempts.endpoint.score_url, item.body, item.request_id)
            return await self._reregistered(attempts, pending, [single_outcome(answer, item.request_id)])

        return _raised((await self._retry.run([item], attempt))[0])

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
        concurrency, chunk_size = chunking(self.settings, concurrency, chunk_size)
        self._bind()
        raw = list(items)
        results: list[ScoreResult | ScorerError | None] = [None] * len(raw)
        gate = asyncio.Semaphore(concurrency)

        async def run_chunk(start: int) -> None:
            async with gate:
                prepared = await self._prepare_all(raw[start : start + chunk_size])
                ready = [(start + i, p) for i, p in enumerate(prepared) if isinstance(p, PreparedItem)]
                results[start : start + len(prepared)] = [p if isinstance(p, ScorerError) else None for p in prepared]
                if ready:
                    try:
                        answers = await self._score_chunk([p for _, p in ready])
                    except Exception as exc:  # a bug must not cost the other chunks their results
                        logger.exception("unexpected error while scoring a chunk")
                        answers = [ScorerError(f"unexpected client error: {exc!r}", request_id=p.request_id)
                                   for _, p in ready]
                    for (pos, _), answer in zip(ready, answers, strict=False):
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
        typed = typed_items(items)
        if audio_bytes(typed) > _INLINE_ENCODE_BYTES:
            return await asyncio.to_thread(prepared_items, typed)
        return prepared_items(typed)

    async def _score_chunk(self, items: list[PreparedItem]) -> list[ScoreResult | ScorerError]:
        # Items per batch request: halved after an attempt in which a request timed out, so each request of
        # the next attempt holds fewer items and can finish within the timeout (the server keeps what
        # finished, so only what did not is sent again).
        size = len(items)

        async def send(endpoint: ScorerEndpoint, attempts: Attempts,
                       pending: list[PreparedItem]) -> list[Outcome[ScoreResult]]:
            nonlocal size
            if await self._supports_batch(endpoint):
                outcomes = await self._send_batches(endpoint, attempts, pending, size)
                if outcomes is not None:
                    if any(timed_out(o) for o in outcomes):
                        size = max(1, min(size, len(pending)) // 2)
                    return outcomes
            return [Fatal(r) if isinstance(r, ScorerError) else Success(r) for r in await self._score_singly(pending)]

        async def attempt(attempts: Attempts, pending: list[PreparedItem]) -> list[Outcome[ScoreResult]]:
            endpoint = attempts.endpoint
            facts = await self._facts(endpoint)
            outcomes: list[Outcome[ScoreResult] | None] = [
                None if (refused := too_long(p, facts, endpoint.base)) is None else Fatal(refused) for p in pending]
            sendable = [p for p, o in zip(pending, outcomes, strict=True) if o is None]
            answered = iter(await send(endpoint, attempts, sendable) if sendable else [])
            return [o if o is not None else next(answered) for o in outcomes]

        return await self._retry.run(items, attempt)

    async def _send_batches(self, endpoint: ScorerEndpoint, attempts: Attempts, pending: list[PreparedItem],
                            size: int) -> list[Outcome[ScoreResult]] | None:
        """One attempt for ``pending``: batch requests of at most ``size`` items, one after another.

        One after another, so each request's time on the server starts when the previous one is answered.
        They count as one attempt.  None when the server turns out to have no batch endpoint.
        """
        outcomes: list[Outcome[ScoreResult]] = []
        for start in range(0, len(pending), size):
            part = pending[start : start + size]
            answer = await self._retry.send(attempts, endpoint.batch_url, batch_body(part), None, counted=start == 0)
            if start == 0 and isinstance(answer, Response) and answer.status in (404, 405):
                # A server without the batch endpoint (a verl-omni protocol server): one request per item.
                logger.info("%s has no batch endpoint (HTTP %d); scoring items one by one", endpoint.url,
                            answer.status)
                self._batch_support[endpoint.url] = False
                return None
            outcomes += await self._reregistered(attempts, part, batch_outcomes(answer, part))
        return outcomes

    # ------------------------------------------------------------------ speakers

    async def register_speaker(self, waveform: Any, sample_rate: int) -> str:
        """Register a reference recording of a speaker; its ``speaker_reference_id`` for score requests.

        The recording is sent once per client (a second call with the same audio answers from the cache).  A
        server that evicted it answers a score request naming it with 404 ``unknown_speaker_reference``: the
        client then registers the recording there again and retries the request, once per attempt.
        """
        self._bind()
        digest, body = speaker_body(waveform, sample_rate)
        if digest in self._speaker_ids:
            return self._speaker_ids[digest]

        async def attempt(attempts: Attempts, pending: list[PreparedItem]) -> list[Outcome[str]]:
            return [await self._register(attempts, body)]

        reference = _raised((await self._retry.run([PreparedItem(new_request_id(), body)], attempt))[0])
        self._speaker_ids[digest] = reference
        self._speaker_bodies[reference] = body
        return reference

    async def register_speaker_file(self, path: str | Path) -> str:
        """:meth:`register_speaker` for a recording on disk (WAV, FLAC...), read once per client and path.

        A file that cannot be read raises :class:`InvalidInputError` naming it.
        """
        key = str(path)
        if key not in self._speaker_files:
            try:
                audio, rate = await asyncio.to_thread(read_audio, path)
            except AudioFileError as exc:
                raise InvalidInputError(f"speaker reference: {exc}") from None
            self._speaker_files[key] = await self.register_speaker(audio, rate)
        return self._speaker_files[key]

    async def _register(self, attempts: Attempts, body: bytes) -> Outcome[str]:
        request_id = new_request_id()
        answer = await self._retry.send(attempts, f"{attempts.endpoint.base}/v1/speakers", body, request_id)
        return speaker_outcome(answer, request_id)

    async def _reregistered(self, attempts: Attempts, items: Sequence[PreparedItem],
                            outcomes: list[Outcome[ScoreResult]]) -> list[Outcome[ScoreResult]]:
        """``outcomes`` with each ``unknown_speaker_reference`` of a reference this client registered turned
        into a retry, once the recording is registered again on the server that answered."""
        out: list[Outcome[ScoreResult]] = []
        again: dict[str, Outcome[str]] = {}
        for item, outcome in zip(items, outcomes, strict=True):
            reference = item.speaker_reference_id
            body = self._speaker_bodies.get(reference) if reference is not None and evicted(outcome) else None
            if reference is None or body is None:
                out.append(outcome)
                continue
            if reference not in again:
                logger.info("speaker reference %s was evicted by %s; registering it again", reference,
                            attempts.endpoint.url)
                again[reference] = await self._register(attempts, body)
            registered = again[reference]
            out.append(Retry(cast(Fatal, outcome).error) if isinstance(registered, Success) else registered)
        return out

    async def _supports_batch(self, endpoint: ScorerEndpoint) -> bool:
        """Whether to send batches to ``endpoint``: its server's ``/v1/info`` is asked once.

        A server that lists its endpoints says whether it has the batch one; a
        server without ``/v1/info`` (404/405, such as verl-omni's reference
        scorer) has none.  When the answer tells nothing (an error, no list),
        batches are tried, and a 404 or 405 to a batch turns them off.
        """
        if endpoint.url not in self._batch_support:
            self._batch_support.setdefault(endpoint.url, (await self._facts(endpoint)).batch)
        return self._batch_support[endpoint.url] is not False

    async def _facts(self, endpoint: ScorerEndpoint) -> ServerFacts:
        """What ``endpoint``'s ``/v1/info`` says (batches, the audio limit); asked once per URL, shared."""
        if endpoint.url not in self._info_probes:
            self._info_probes[endpoint.url] = asyncio.ensure_future(self._probe_info(endpoint))
        return await asyncio.shield(self._info_probes[endpoint.url])

    async def _probe_info(self, endpoint: ScorerEndpoint) -> ServerFacts:
        timeout = min(self.settings.timeout, self.settings.connect_timeout)
        try:
            answer = await self._get(endpoint.base + INFO_PATH, timeout)
        except (TransportError, ScorerError) as exc:  # the score request that follows meets it again
            logger.debug("GET %s%s failed (%r); batches will be tried", endpoint.base, INFO_PATH, exc)
            return ServerFacts()
        if answer.status in (404, 405):
            logger.info("%s has no %s (HTTP %d): a protocol v1 server without batches; sending one request per item",
                        endpoint.base, INFO_PATH, answer.status)
            return ServerFacts(batch=False)
        return read_facts(answer.body) if answer.status == 200 else ServerFacts()

    async def _score_singly(self, items: list[PreparedItem]) -> list[ScoreResult | ScorerError]:
        async def one(item: PreparedItem) -> ScoreResult | ScorerError:
            try:
                return await self._score_prepared(item)
            except ScorerError as exc:
                return exc

        return list(await asyncio.gather(*(one(i) for i in items)))

    # ------------------------------------------------------------------ info

    async def _get(self, url: str, timeout: float) -> Response:
        self._bind()
        return await self._transport.handle_async_request(Request("GET", url, self._headers, timeout=timeout))

    async def info(self, url: str | None = None) -> dict[str, Any]:
        """The server's ``GET /v1/info`` (model, limits, defaults); one attempt, no retries."""
        target = self._base(url) + INFO_PATH
        try:
            answer = await self._get(target, self.settings.timeout)
        except TransportError as exc:
            raise ScorerUnavailableError(f"GET {target} failed: {exc!r}", attempts=1, last_cause=exc) from exc
        return info_of(answer)

    async def ready(self, url: str | None = None) -> bool:
        """True when ``GET /readyz`` answers 200 within the timeout."""
        try:
            answer = await self._get(self._base(url) + "/readyz", self.settings.connect_timeout)
        except (TransportError, ScorerError):
            return False
        return answer.status == 200

    def _base(self, url: str | None) -> str:
        return self._retry.endpoints[0].base if url is None else endpoint_of(url).base


def _raised(value: T | ScorerError) -> T:
    """``value``, unless it is an error: then that is raised."""
    if isinstance(value, ScorerError):
        raise value
    return value
