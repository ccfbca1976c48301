"""Scoring logic behind the HTTP routes: decode → resample → scheduler → score.

Parsing, base64 decoding and resampling run in a worker thread, and so do
normalization, CER/WER and the reward (:mod:`audio_reward.scoring`,
through :class:`~.offload.Offload`, one hop for the requests an engine batch
answers together): CPU work that grows with the prompt and would otherwise
stall the event loop, and with it ``/healthz`` and every other request.
Transcription goes through the shared scheduler (:mod:`.scheduler`), and a
retried request joins its first copy (:mod:`.dedup`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import soxr
from starlette.concurrency import run_in_threadpool

from audio_reward.protocol import (
    PROTOCOL_VERSION,
    BatchScoreResponse,
    DecodedScoreRequest,
    ErrorResponse,
    Limits,
    ProtocolError,
    RewardPolicy,
    ScoreResponse,
    decode_batch_request,
    decode_score_request,
    parse_json,
)
from audio_reward.scoring import (
    Normalizer,
    ScoringError,
    language_code,
    normalize_reference,
    score_transcript,
)

from ..engines.base import (
    ENGINE_SAMPLE_RATE,
    ASREngine,
    Transcription,
    TranscriptionInput,
)
from ..errors import (
    BadRequestError,
    EngineError,
    QueueFullError,
    RequestTimeoutError,
    ServerError,
    ShuttingDownError,
    server_error_body,
)
from .audio_files import FFMPEG_FILES
from .dedup import Key, RecentResults, request_key
from .offload import Offload
from .prometheus import ServerMetrics
from .readiness import Readiness
from .scheduler import SchedulerClosedError, SchedulerFullError

if TYPE_CHECKING:
    from .signals import SignalJob, SignalService, SignalValues

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PreparedRequest:
    """A decoded request with its audio at 16 kHz, its language code and its reward policy resolved."""

    request: DecodedScoreRequest
    audio: np.ndarray
    policy: RewardPolicy
    request_id: str
    language: str | None
    key: Key | None = None
    """Set when the client named the request: retries with the same id and content are answered once."""
    signals: SignalJob | None = None
    """What the request asks of the speaker and quality models (None: nothing)."""


def resample_16k(waveform: np.ndarray, sample_rate: int) -> np.ndarray:
    """Mono float32 at the engine's 16 kHz (soxr, high quality)."""
    if sample_rate == ENGINE_SAMPLE_RATE:
        return np.ascontiguousarray(waveform, dtype=np.float32)
    return soxr.resample(waveform, sample_rate, ENGINE_SAMPLE_RATE, quality="HQ").astype(np.float32, copy=False)


class ScoringPipeline:
    """Scores request bodies with one engine, normalizer and reward policy; built once per app.

    Every part is given: the engine (for its languages and identity), the
    readiness holding its scheduler, the normalizer, the default policy, the
    metrics, the recent answers (retried requests) and the limits.
    """

    def __init__(
        self,
        *,
        engine: ASREngine,
        readiness: Readiness,
        normalizer: Normalizer,
        policy: RewardPolicy,
        metrics: ServerMetrics,
        recent: RecentResults,
        limits: Limits,
        default_language: str | None,
        request_timeout_s: float,
        offload: Offload | None = None,
        signals: SignalService | None = None,
    ) -> None:
        self.engine = engine
        self.readiness = readiness
        self.normalizer = normalizer
        self.policy = policy
        self.metrics = metrics
        self.recent = recent
        self.limits = limits
        self.default_language = default_language
        self.request_timeout_s = request_timeout_s
        self.offload = offload or Offload()
        self.signals = signals

    # -- preparation (worker thread) -----------------------------------------------------
    def _prepare(self, req: DecodedScoreRequest, request_id: str) -> PreparedRequest:
        try:
            policy = self.policy.with_options(req.reward)
        except ValueError as exc:
            raise BadRequestError("invalid_reward_options", str(exc), path="$.reward") from None
        # The prompt first: the normalizer's refusal of a language names its rules, the model's only the model.
        language = language_code(req.language or self.default_language)
        self._check_prompt(req.prompt, language)
        self._check_supported(language, req.language)  # 400 before queueing when the model does not transcribe it
        signals = self.signals.job(req, policy) if self.signals is not None else None
        audio = resample_16k(req.waveform, req.sample_rate)
        key = None
        if req.request_id is not None and self.recent.enabled:
            key = request_key(req.request_id, req.prompt, language, req.sample_rate, req.reward,
                              req.reference_duration_s, waveform=req.waveform)
        return PreparedRequest(req, audio, policy, req.request_id or request_id, language, key, signals)

    def resolve_language(self, requested: str | None, *, path: str = "$.language") -> str | None:
        """The language code to decode with (the request's, else the server default); 400 if the model lacks it."""
        language = language_code(requested or self.default_language)
        self._check_supported(language, requested, path=path)
        return language

    def _check_supported(self, language: str | None, requested: str | None, *, path: str = "$.language") -> None:
        supported = self.engine.languages
        if language is not None and supported is not None and language not in supported:
            model = self.engine.info.model_id
            shown = ", ".join(sorted(supported)) if len(supported) <= 12 else f"{len(supported)} languages"
            raise BadRequestError(
                "unsupported_language",
                f"model {model} does not transcribe language {requested or language!r} (it supports: {shown})",
                path=path,
            )

    def _check_prompt(self, prompt: str, language: str | None) -> None:
        """Refuse, before any transcription, a prompt the normalizer cannot score against."""
        if not prompt.strip():
            raise BadRequestError(
                "empty_prompt", "prompt is empty or only whitespace: there is no target text to score against",
                path="$.prompt",
            )
        try:
            normalize_reference(prompt, normalizer=self.normalizer, language=language, field="prompt")
        except ScoringError as exc:
            raise BadRequestError(exc.code, exc.message, path=f"$.{exc.field}") from None

    def _prepare_one(self, body: bytes, request_id: str) -> PreparedRequest:
        try:
            req = decode_score_request(parse_json(body), self.limits, decoder=FFMPEG_FILES)
        except ProtocolError as exc:
            raise BadRequestError.from_protocol(exc) from None
        return self._prepare(req, request_id)

    def _prepare_batch(self, body: bytes, request_id: str) -> list[PreparedRequest | ServerError]:
        try:
            _, decoded = decode_batch_request(parse_json(body), self.limits, decoder=FFMPEG_FILES)
        except ProtocolError as exc:
            raise BadRequestError.from_protocol(exc) from None
        items: list[PreparedRequest | ServerError] = []
        for i, item in enumerate(decoded):
            if isinstance(item, ProtocolError):
                items.append(BadRequestError.from_protocol(item))
                continue
            try:
                items.append(self._prepare(item, f"{request_id}-{i}"))
            except ServerError as exc:
                items.append(exc)
        return items

    # -- engine ---------------------------------------------------------------------------
    def _arriving(self) -> contextlib.AbstractContextManager[None]:
        """Tells the scheduler a request is being decoded, so an idle engine may wait for it to join a batch."""
        scheduler = self.readiness.started_scheduler
        return scheduler.arriving() if scheduler is not None else contextlib.nullcontext()

    def _submit(self, inputs: list[TranscriptionInput]) -> list[asyncio.Future[Transcription]]:
        """Queue ``inputs`` together (all or none); 429, 503 when the queue is full or closed."""
        scheduler = self.readiness.scheduler()
        try:
            futures = scheduler.submit_many(inputs)
        except SchedulerFullError as exc:
            raise QueueFullError(str(exc), retry_after_s=exc.retry_after_s) from None
        except SchedulerClosedError as exc:
            raise ShuttingDownError(str(exc), retry_after_s=5) from None
        self.metrics.queue_depth.set(scheduler.queued)
        return futures

    async def _transcribe(self, inputs: list[TranscriptionInput],
                          request_ids: list[str]) -> list[Transcription | ServerError]:
        """Each input's transcript or its error; a failure of the whole call (queue full, timeout) is raised."""
        futures = self._submit(inputs)
        try:
            outcomes = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True),
                                              self.request_timeout_s)
        except asyncio.TimeoutError:
            raise self._timeout() from None
        return [self._engine_error(outcome, rid) if isinstance(outcome, BaseException) else outcome
                for outcome, rid in zip(outcomes, request_ids, strict=True)]

    def _timeout(self) -> RequestTimeoutError:
        return RequestTimeoutError(f"scoring took longer than the server's limit of {self.request_timeout_s:g} s")

    def _engine_error(self, exc: BaseException, request_id: str) -> ServerError:
        if isinstance(exc, SchedulerClosedError):
            return ShuttingDownError(str(exc), retry_after_s=5)
        # The engine's own message may hold paths or internals: it goes to the log only
        # (the scheduler logged the traceback once for the whole batch).
        log.error("transcription failed", extra={"request_id": request_id, "error": repr(exc)})
        return EngineError(f"the ASR engine failed on this request's batch (request id {request_id})")

    async def _transcribe_once(self, items: list[PreparedRequest]) -> list[tuple[Transcription | ServerError, bool]]:
        """Each item's transcript or error, and whether it was joined from an earlier request with its id."""

        async def produce(positions: list[int]) -> list[Transcription | ServerError]:
            chosen = [items[i] for i in positions]
            return await self._transcribe([TranscriptionInput(item.audio, item.language) for item in chosen],
                                          [item.request_id for item in chosen])

        answers = await self.recent.run_once(
            [item.key for item in items], produce,
            size=lambda transcription: sys.getsizeof(transcription.text),
            wait_s=self.request_timeout_s,
            timed_out=self._timeout,
            abandoned=lambda exc: exc if isinstance(exc, ServerError) else RequestTimeoutError(
                "the first request with this id stopped before it was scored; retry"),
        )
        outcomes: list[tuple[Transcription | ServerError, bool]] = []
        for answer in answers:
            value = answer.value
            if isinstance(value, BaseException) and not isinstance(value, ServerError):
                raise value  # not a request's outcome: a bug, answered as a 500 by the middleware
            outcomes.append((value, answer.joined))
        return outcomes

    # -- scoring --------------------------------------------------------------------------
    def _result(self, item: PreparedRequest, transcription: Transcription) -> ScoreResponse:
        req = item.request
        result = score_transcript(
            req.prompt,
            transcription.text,
            normalizer=self.normalizer,
            policy=item.policy,
            language=item.language,
            duration_s=req.duration_s,
            reference_duration_s=req.reference_duration_s,
        )
        out = result.diagnostics()
        info = self.engine.info
        # The rules follow the request's language (a garbled transcript must not switch them), but the
        # answer says which language the audio was decoded in: the model's detection when none was asked for.
        out["language"] = item.language or language_code(transcription.language) or ""
        out.update(
            model=info.model_id,
            engine=info.engine,
            protocol_version=PROTOCOL_VERSION,
            request_id=item.request_id,
        )
        # Forbidding extras here (readers ignore them): a diagnostic the model does not declare is a server bug.
        return ScoreResponse.model_validate(out, extra="forbid")

    def _results(self, pairs: list[tuple[PreparedRequest, Transcription, SignalValues | None]]) -> list[ScoreResponse]:
        """Score transcripts against their prompts, with their signals; runs in a worker thread."""
        from .signals import add_signals

        return [add_signals(self._result(item, transcription), item.policy, item.signals, values)
                for item, transcription, values in pairs]

    def _count(self, outcome: ScoreResponse | ServerError, *, joined: bool) -> None:
        """One utterance's outcome in the metrics; an error joined from another request was counted there."""
        if isinstance(outcome, ServerError):
            if not joined:
                self.metrics.items.labels(outcome.code).inc()
        elif joined:
            self.metrics.items.labels("deduplicated").inc()
        else:
            self.metrics.observe_result(outcome)

    async def _score_items(self, items: list[PreparedRequest]) -> list[ScoreResponse | ServerError]:
        """Each item's flat result or error, in order.

        An item whose id and content match a recent or in-flight request is
        not transcribed again: it takes that request's transcript.  A failure
        of the whole call (queue full, not ready, timeout) is raised.
        """
        measuring = self.signals.start_measuring(items, self.request_timeout_s) if self.signals is not None else None
        try:
            transcripts = await self._transcribe_once(items)
        except BaseException:
            if measuring is not None:
                measuring.cancel()
            raise
        signals = await measuring if measuring is not None else [None] * len(items)
        pairs = [(item, t, v) for item, (t, _), v in zip(items, transcripts, signals, strict=True)
                 if isinstance(t, Transcription) and not isinstance(v, ServerError)]
        scored = iter(await self.offload.run(lambda: self._results(pairs)) if pairs else [])
        results: list[ScoreResponse | ServerError] = []
        for (transcript, joined), values in zip(transcripts, signals, strict=True):
            outcome: ScoreResponse | ServerError = (
                transcript if isinstance(transcript, ServerError)
                else values if isinstance(values, ServerError) else next(scored))
            self._count(outcome, joined=joined)
            results.append(outcome)
        return results

    async def transcribe(self, audio: np.ndarray, language: str | None, request_id: str) -> Transcription:
        """One 16 kHz utterance through the shared scheduler, unscored (the transcription API); raises ServerError."""
        (outcome,) = await self._transcribe([TranscriptionInput(audio, language)], [request_id])
        if isinstance(outcome, ServerError):
            raise outcome
        return outcome

    async def score(self, body: bytes, request_id: str) -> ScoreResponse:
        """One request body → its flat response; raises :class:`ServerError`."""
        try:
            with self._arriving():
                item = await run_in_threadpool(self._prepare_one, body, request_id)
        except ServerError as error:
            self.metrics.items.labels(error.code).inc()  # counted like a refused batch item
            raise
        (outcome,) = await self._score_items([item])
        if isinstance(outcome, ServerError):
            raise outcome
        return outcome

    async def score_batch(self, body: bytes, request_id: str) -> BatchScoreResponse:
        """A batch body → its results in request order; item failures stay in their slot."""
        with self._arriving():
            prepared = await run_in_threadpool(self._prepare_batch, body, request_id)
        valid = [p for p in prepared if isinstance(p, PreparedRequest)]
        outcomes = iter(await self._score_items(valid) if valid else [])
        results: list[ScoreResponse | ErrorResponse] = []
        for i, entry in enumerate(prepared):
            if isinstance(entry, ServerError):
                self.metrics.items.labels(entry.code).inc()
                results.append(ErrorResponse.model_validate(server_error_body(entry, f"{request_id}-{i}")))
                continue
            outcome = next(outcomes)
            results.append(ErrorResponse.model_validate(server_error_body(outcome, entry.request_id))
                           if isinstance(outcome, ServerError) else outcome)
        return BatchScoreResponse(protocol_version=PROTOCOL_VERSION, results=results)
