"""Scoring logic behind the HTTP routes: decode → resample → batcher → score.

Parsing, base64 decoding and resampling run in a worker thread, and so do
normalization, CER/WER and the reward (:mod:`audio_reward.scoring`,
through :class:`~.offload.Offload`, one hop for the requests an engine batch
answers together): CPU work that grows with the prompt and would otherwise
stall the event loop, and with it ``/healthz`` and every other request.
Transcription goes through the shared :class:`MicroBatcher`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import soxr
from starlette.concurrency import run_in_threadpool

from audio_reward.protocol import (
    PROTOCOL_VERSION,
    DecodedScoreRequest,
    ProtocolError,
    decode_batch_request,
    decode_score_request,
    parse_json,
)

from ..batcher import BatcherClosedError, Scheduler
from ..batcher import QueueFullError as BatcherQueueFull
from ..engines.base import ENGINE_SAMPLE_RATE, Transcription, TranscriptionInput
from ..errors import (
    BadRequestError,
    EngineError,
    NotReadyError,
    QueueFullError,
    RequestTimeoutError,
    ServerError,
    ShuttingDownError,
    server_error_body,
)
from audio_reward.scoring import RewardPolicy, ScoringError, language_code, normalize_reference, score_transcript
from ..state import ServerState
from .recent import Key, request_key

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PreparedItem:
    """A decoded request with its audio at 16 kHz and its reward policy resolved."""

    request: DecodedScoreRequest
    audio: np.ndarray
    policy: RewardPolicy
    request_id: str
    language: str | None
    key: Key | None = None
    """Set when the client named the request: retries with the same id and content are answered once."""


def resample_16k(waveform: np.ndarray, sample_rate: int) -> np.ndarray:
    """Mono float32 at the engine's 16 kHz (soxr, high quality)."""
    if sample_rate == ENGINE_SAMPLE_RATE:
        return np.ascontiguousarray(waveform, dtype=np.float32)
    return soxr.resample(waveform, sample_rate, ENGINE_SAMPLE_RATE, quality="HQ").astype(np.float32, copy=False)


class ScoringService:
    """Scores decoded requests with the server's engine, normalizer and reward policy."""

    def __init__(self, state: ServerState) -> None:
        self.state = state

    # -- preparation (worker thread) -----------------------------------------------------
    def _prepare(self, req: DecodedScoreRequest, request_id: str) -> PreparedItem:
        try:
            policy = self.state.policy.with_options(req.reward)
        except ValueError as exc:
            raise BadRequestError("invalid_reward_options", str(exc), path="$.reward") from None
        language = language_code(req.language or self.state.settings.language)
        self._check_prompt(req.prompt, language)
        self.resolve_language(req.language)  # 400 before queueing when the model does not transcribe it
        audio = resample_16k(req.waveform, req.sample_rate)
        key = None
        if req.request_id is not None and self.state.recent is not None:
            key = request_key(req.request_id, req.prompt, language, req.sample_rate, req.reward,
                              req.reference_duration_s, waveform=req.waveform)
        return PreparedItem(req, audio, policy, req.request_id or request_id, language, key)

    def resolve_language(self, requested: str | None, *, path: str = "$.language") -> str | None:
        """The language code to decode with (the request's, else the server default); 400 if the model lacks it."""
        language = language_code(requested or self.state.settings.language)
        supported = self.state.engine.languages
        if language is not None and supported is not None and language not in supported:
            model = self.state.engine.info.model_id
            shown = ", ".join(sorted(supported)) if len(supported) <= 12 else f"{len(supported)} languages"
            raise BadRequestError(
                "unsupported_language",
                f"model {model} does not transcribe language {requested or language!r} (it supports: {shown})",
                path=path,
            )
        return language

    def _check_prompt(self, prompt: str, language: str | None) -> None:
        """Refuse, before any transcription, a prompt the normalizer cannot score against."""
        if not prompt.strip():
            raise BadRequestError(
                "empty_prompt", "prompt is empty or only whitespace: there is no target text to score against",
                path="$.prompt",
            )
        try:
            normalize_reference(prompt, normalizer=self.state.normalizer, language=language, field="prompt")
        except ScoringError as exc:
            raise BadRequestError(exc.code, exc.message, path=f"$.{exc.field}") from None

    def _prepare_one(self, body: bytes, request_id: str) -> PreparedItem:
        try:
            req = decode_score_request(parse_json(body), self.state.settings.limits)
        except ProtocolError as exc:
            raise BadRequestError.from_protocol(exc) from None
        return self._prepare(req, request_id)

    def _prepare_batch(self, body: bytes, request_id: str) -> tuple[str, list[PreparedItem | ServerError]]:
        try:
            version, decoded = decode_batch_request(parse_json(body), self.state.settings.limits)
        except ProtocolError as exc:
            raise BadRequestError.from_protocol(exc) from None
        items: list[PreparedItem | ServerError] = []
        for i, item in enumerate(decoded):
            if isinstance(item, ProtocolError):
                items.append(BadRequestError.from_protocol(item))
                continue
            try:
                items.append(self._prepare(item, f"{request_id}-{i}"))
            except ServerError as exc:
                items.append(exc)
        return version, items

    # -- engine ---------------------------------------------------------------------------
    def _arriving(self) -> contextlib.AbstractContextManager[None]:
        """Tells the scheduler a request is being decoded, so an idle engine may wait for it to join a batch."""
        batcher = self.state.batcher
        return batcher.arriving() if batcher is not None else contextlib.nullcontext()

    def _batcher(self) -> Scheduler:
        state = self.state
        if state.batcher is None or not state.ready:
            if state.load_error:
                raise NotReadyError(f"the ASR model failed to load ({state.load_error}); see the server log",
                                    retry_after_s=30)
            raise NotReadyError("the ASR model is still loading", retry_after_s=5)
        return state.batcher

    def _submit(self, items: list[PreparedItem]) -> list[asyncio.Future[Transcription]]:
        return self._submit_inputs([TranscriptionInput(item.audio, item.language) for item in items])

    def _submit_inputs(self, inputs: list[TranscriptionInput]) -> list[asyncio.Future[Transcription]]:
        batcher = self._batcher()
        try:
            futures = batcher.submit_many(inputs)
        except BatcherQueueFull as exc:
            raise QueueFullError(str(exc), retry_after_s=exc.retry_after_s) from None
        except BatcherClosedError as exc:
            raise ShuttingDownError(str(exc), retry_after_s=5) from None
        self.state.metrics.queue_depth.set(batcher.queued)
        return futures

    async def _await_all(self, futures: list[asyncio.Future[Transcription]]) -> list[Transcription | BaseException]:
        timeout = self.state.settings.request_timeout_s
        try:
            return await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), timeout)
        except asyncio.TimeoutError:
            raise RequestTimeoutError(f"scoring took longer than the server's limit of {timeout:g} s") from None

    def _engine_error(self, exc: BaseException, request_id: str) -> ServerError:
        if isinstance(exc, BatcherClosedError):
            return ShuttingDownError(str(exc), retry_after_s=5)
        # The engine's own message may hold paths or internals: it goes to the log only
        # (the batcher logged the traceback once for the whole batch).
        log.error("transcription failed", extra={"request_id": request_id, "error": repr(exc)})
        return EngineError(f"the ASR engine failed on this request's batch (request id {request_id})")

    # -- scoring --------------------------------------------------------------------------
    def _result(self, item: PreparedItem, transcription: Transcription) -> dict[str, Any]:
        req = item.request
        result = score_transcript(
            req.prompt,
            transcription.text,
            normalizer=self.state.normalizer,
            policy=item.policy,
            language=item.language,
            duration_s=req.duration_s,
            reference_duration_s=req.reference_duration_s,
        )
        out = result.diagnostics()
        info = self.state.engine.info
        out.update(
            model=info.model_id,
            engine=info.engine,
            protocol_version=PROTOCOL_VERSION,
            request_id=item.request_id,
        )
        return out

    def _results(self, pairs: list[tuple[PreparedItem, Transcription]]) -> list[dict[str, Any]]:
        """Score transcripts against their prompts; runs in a worker thread."""
        return [self._result(item, transcription) for item, transcription in pairs]

    async def _score_items(self, items: list[PreparedItem]) -> list[dict[str, Any] | ServerError]:
        """Each item's flat result or error, in order.

        An item whose id and content match a recent or in-flight request is
        not transcribed again: it takes that request's transcript.  A failure
        of the whole call (queue full, not ready, timeout) is raised.
        """
        recent = self.state.recent
        claims = [recent.claim(item.key) if recent is not None and item.key is not None else None for item in items]
        leaders = [item for item, claim in zip(items, claims) if claim is None or claim[1]]
        try:
            outcomes = await self._await_all(self._submit(leaders)) if leaders else []
        except BaseException as exc:
            failure = exc if isinstance(exc, ServerError) else RequestTimeoutError(
                "the first request with this id stopped before it was scored; retry")
            for item, claim in zip(items, claims):
                if recent is not None and item.key is not None and claim is not None and claim[1]:
                    recent.fail(item.key, claim[0], failure)
            raise
        by_id = {id(item): outcome for item, outcome in zip(leaders, outcomes)}
        transcripts: list[Transcription | ServerError] = []
        for item, claim in zip(items, claims):
            if claim is not None and not claim[1]:
                transcripts.append(await self._recent_transcript(claim[0]))
                continue
            outcome = by_id[id(item)]
            if isinstance(outcome, BaseException):
                error = self._engine_error(outcome, item.request_id)
                self.state.metrics.items.labels(error.code).inc()
                if recent is not None and item.key is not None and claim is not None:
                    recent.fail(item.key, claim[0], error)
                transcripts.append(error)
            else:
                if recent is not None and item.key is not None and claim is not None:
                    recent.resolve(item.key, claim[0], outcome, sys.getsizeof(outcome.text))
                transcripts.append(outcome)
        pairs = [(item, t) for item, t in zip(items, transcripts) if isinstance(t, Transcription)]
        scored = iter(await self.state.offload.run(lambda: self._results(pairs)) if pairs else [])
        results: list[dict[str, Any] | ServerError] = []
        for claim, t in zip(claims, transcripts):
            if isinstance(t, ServerError):
                results.append(t)
                continue
            result = next(scored)
            if claim is not None and not claim[1]:
                self.state.metrics.items.labels("deduplicated").inc()
            else:
                self.state.metrics.observe_result(result)
            results.append(result)
        return results

    async def _recent_transcript(self, future: asyncio.Future[Transcription]) -> Transcription | ServerError:
        timeout = self.state.settings.request_timeout_s
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except ServerError as error:
            return error
        except asyncio.TimeoutError:
            return RequestTimeoutError(f"scoring took longer than the server's limit of {timeout:g} s")

    async def transcribe(self, audio: np.ndarray, language: str | None, request_id: str) -> Transcription:
        """One 16 kHz utterance through the shared batcher, unscored (the transcription API); raises ServerError."""
        (outcome,) = await self._await_all(self._submit_inputs([TranscriptionInput(audio, language)]))
        if isinstance(outcome, BaseException):
            raise self._engine_error(outcome, request_id)
        return outcome

    async def score(self, body: bytes, request_id: str) -> dict[str, Any]:
        """One request body → the flat response dict; raises :class:`ServerError`."""
        try:
            with self._arriving():
                item = await run_in_threadpool(self._prepare_one, body, request_id)
        except ServerError as error:
            self.state.metrics.items.labels(error.code).inc()  # counted like a refused batch item
            raise
        (outcome,) = await self._score_items([item])
        if isinstance(outcome, ServerError):
            raise outcome
        return outcome

    async def score_batch(self, body: bytes, request_id: str) -> dict[str, Any]:
        """A batch body → ``{"protocol_version", "results"}``; item failures stay in their slot."""
        with self._arriving():
            _, prepared = await run_in_threadpool(self._prepare_batch, body, request_id)
        valid = [p for p in prepared if isinstance(p, PreparedItem)]
        outcomes = iter(await self._score_items(valid) if valid else [])
        results: list[dict[str, Any]] = []
        for i, entry in enumerate(prepared):
            if isinstance(entry, ServerError):
                self.state.metrics.items.labels(entry.code).inc()
                results.append(server_error_body(entry, f"{request_id}-{i}"))
                continue
            outcome = next(outcomes)
            results.append(server_error_body(outcome, entry.request_id) if isinstance(outcome, ServerError) else outcome)
        return {"protocol_version": PROTOCOL_VERSION, "results": results}

