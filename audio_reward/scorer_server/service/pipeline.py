"""Scoring logic behind the HTTP routes: decode → prepare → engine client → score.

Parsing, base64 decoding and resampling run in a worker thread, and so do
normalization, CER/WER and the reward (:mod:`audio_reward.scoring`,
through :class:`~.offload.Offload`, one hop for the requests an engine batch
answers together): CPU work that grows with the prompt and would otherwise
stall the event loop, and with it ``/healthz`` and every other request.
Transcription goes through the engine client (:mod:`.engine_client`: the
language, the scheduler, the timeout, retried requests joining their first copy), and the
speaker and quality signals through the signal service (:mod:`.signals`),
side by side.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

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
)
from audio_reward.scoring import Normalizer, Reference, ScoringError, normalize_reference, score_transcript

from ..engines.base import Transcription
from ..errors import BadRequestError, ServerError, error_response, parse_request
from .audio_files import FFMPEG_FILES, resample_16k
from .engine_client import EngineClient, EngineOutcome, EngineRequest
from .offload import Offload
from .prometheus import ServerMetrics
from .signals import SignalItem, SignalJob, SignalService


@dataclass(frozen=True)
class PreparedRequest:
    """A decoded request, ready to score: what the engine transcribes, its prompt normalized, its reward policy."""

    request: DecodedScoreRequest
    engine: EngineRequest
    """Its 16 kHz audio, its language resolved, its request id and dedup key."""
    reference: Reference
    """The prompt, normalized once when the request was accepted."""
    policy: RewardPolicy
    signals: SignalJob | None = None
    """What the request asks of the speaker and quality models (None: nothing)."""


@dataclass(eq=False)
class _Utterance:
    """One utterance once transcribed: its request, its signals, its transcript or error, then its answer."""

    request: PreparedRequest
    signals: SignalItem | None
    """What the signal service measured for it (None: it asks for no signal)."""
    engine: EngineOutcome
    result: ScoreResponse | None = None

    @property
    def error(self) -> ServerError | None:
        """Why it gets no score: the transcription's error first, then the signals'."""
        if isinstance(self.engine.value, ServerError):
            return self.engine.value
        return self.signals.error if self.signals is not None else None

    @property
    def outcome(self) -> ScoreResponse | ServerError:
        """Its answer: its error, or the scored result."""
        if (error := self.error) is not None:
            return error
        assert self.result is not None
        return self.result


@dataclass(eq=False)
class ScoringPipeline:
    """Scores request bodies over the engine client, with one normalizer and reward policy; built once per app.

    Every part is given: the engine client (transcripts, languages, dedup), the
    normalizer, the default policy, the metrics, the limits and the signal service (its
    models are off unless the server measures speaker or quality).
    """

    engine_client: EngineClient
    normalizer: Normalizer
    policy: RewardPolicy
    metrics: ServerMetrics
    limits: Limits
    signals: SignalService
    offload: Offload = field(default_factory=Offload)

    # -- preparation (worker thread) -----------------------------------------------------
    def _prepare(self, req: DecodedScoreRequest, request_id: str) -> PreparedRequest:
        try:
            policy = self.policy.with_options(req.reward)
        except ValueError as exc:
            raise BadRequestError("invalid_reward_options", str(exc), path="$.reward") from None
        named = req.request_id is not None
        engine, reference = self.engine_client.request(
            resample_16k(req.waveform, req.sample_rate), req.language, req.request_id or request_id,
            rules=functools.partial(self._reference, req.prompt),
            identity=(req.prompt, req.sample_rate, req.reward, req.reference_duration_s) if named else None,
        )
        return PreparedRequest(req, engine, reference, policy, self.signals.job(req, policy))

    def _reference(self, prompt: str, language: str | None) -> Reference:
        """The prompt normalized under a language's rules; 400 when there is nothing to score against."""
        try:
            return normalize_reference(prompt, normalizer=self.normalizer, language=language, field="prompt")
        except ScoringError as exc:
            raise BadRequestError(exc.code, exc.message, path=f"$.{exc.field}") from None

    def _prepare_one(self, body: bytes, request_id: str) -> PreparedRequest:
        return self._prepare(parse_request(decode_score_request, body, self.limits, decoder=FFMPEG_FILES), request_id)

    def _prepare_batch(self, body: bytes, request_id: str) -> list[PreparedRequest | ServerError]:
        _, decoded = parse_request(decode_batch_request, body, self.limits, decoder=FFMPEG_FILES)
        items: list[PreparedRequest | ServerError] = []
        for i, item in enumerate(decoded):
            try:
                items.append(BadRequestError.from_protocol(item) if isinstance(item, ProtocolError)
                             else self._prepare(item, f"{request_id}-{i}"))
            except ServerError as exc:
                items.append(exc)
        return items

    # -- scoring --------------------------------------------------------------------------
    def _result(self, utterance: _Utterance) -> ScoreResponse:
        """The answer to one utterance: its transcript scored, the reward shared with its measured signals."""
        item, signals, transcription = utterance.request, utterance.signals, utterance.engine.value
        assert isinstance(transcription, Transcription)  # only transcribed utterances are scored
        result = score_transcript(
            item.reference,
            transcription.text,
            normalizer=self.normalizer,
            policy=item.policy,
            duration_s=item.request.duration_s,
            reference_duration_s=item.request.reference_duration_s,
            speaker_similarity=signals.speaker_similarity if signals is not None else None,
            quality_mos=signals.quality_mos if signals is not None else None,
        )
        # The rules follow the request's language (a garbled transcript must not switch them), but the
        # answer says which language the audio was decoded in: the model's detection when none was asked for.
        engine = self.engine_client.info
        return result.response(
            detected_language=transcription.language, model=engine.model_id, engine=engine.engine,
            protocol_version=PROTOCOL_VERSION, request_id=item.engine.request_id,
            **(signals.fields() if signals is not None else {}),
        )

    def _score(self, utterances: list[_Utterance]) -> None:
        """Score each utterance's transcript against its prompt, with its signals; runs in a worker thread."""
        for utterance in utterances:
            utterance.result = self._result(utterance)

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
        # The signals are measured beside the transcription (None: no utterance asks for any).
        signals = [SignalItem(item.engine.audio, item.signals) if item.signals is not None else None for item in items]
        # The signals share the engine's request timeout.
        timeout_s = self.engine_client.request_timeout_s
        measuring = self.signals.start_measuring([s for s in signals if s is not None], timeout_s)
        try:
            outcomes = await self.engine_client.transcribe_many([item.engine for item in items])
        except BaseException:
            if measuring is not None:
                measuring.cancel()
            raise
        if measuring is not None:
            await measuring
        utterances = [_Utterance(*parts) for parts in zip(items, signals, outcomes, strict=True)]
        if scorable := [u for u in utterances if u.error is None]:
            await self.offload.run(lambda: self._score(scorable))
        for utterance in utterances:
            self._count(utterance.outcome, joined=utterance.engine.joined)
        return [utterance.outcome for utterance in utterances]

    async def score(self, body: bytes, request_id: str) -> ScoreResponse:
        """One request body → its flat response; raises :class:`ServerError`."""
        try:
            with self.engine_client.arriving():
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
        with self.engine_client.arriving():
            prepared = await run_in_threadpool(self._prepare_batch, body, request_id)
        valid = [p for p in prepared if isinstance(p, PreparedRequest)]
        outcomes = iter(await self._score_items(valid) if valid else [])
        results: list[ScoreResponse | ErrorResponse] = []
        for i, entry in enumerate(prepared):
            if isinstance(entry, ServerError):
                self.metrics.items.labels(entry.code).inc()
                results.append(error_response(entry, f"{request_id}-{i}"))
                continue
            outcome = next(outcomes)
            results.append(error_response(outcome, entry.engine.request_id)
                           if isinstance(outcome, ServerError) else outcome)
        return BatchScoreResponse(protocol_version=PROTOCOL_VERSION, results=results)
