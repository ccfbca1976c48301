"""Scoring logic behind the HTTP routes: decode → prepare → engine client → score.

Parsing, base64 decoding and resampling run in a worker thread, and so do
normalization, CER/WER and the reward (:mod:`audio_reward.scoring`,
through :class:`~.offload.Offload`, one hop for the requests an engine batch
answers together): CPU work that grows with the prompt and would otherwise
stall the event loop, and with it ``/healthz`` and every other request.
Transcription goes through the engine client (:mod:`.engine_client`: the
scheduler, the timeout, retried requests joining their first copy), and the
speaker and quality signals through the signal service (:mod:`.signals`),
side by side.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
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

from ..engines.base import Transcription
from ..errors import BadRequestError, ServerError, server_error_body
from .audio_files import FFMPEG_FILES, resample_16k
from .dedup import Key, request_key
from .engine_client import EngineClient, EngineRequest
from .offload import Offload
from .prometheus import ServerMetrics

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


@dataclass(eq=False)
class ScoringPipeline:
    """Scores request bodies over the engine client, with one normalizer and reward policy; built once per app.

    Every part is given: the engine client (transcripts, languages, the
    request timeout), the normalizer, the default policy, the metrics, the
    limits, and the signal service when the server measures speaker or quality.
    """

    engine_client: EngineClient
    normalizer: Normalizer
    policy: RewardPolicy
    metrics: ServerMetrics
    limits: Limits
    signals: SignalService | None = None
    offload: Offload = field(default_factory=Offload)

    # -- preparation (worker thread) -----------------------------------------------------
    def _prepare(self, req: DecodedScoreRequest, request_id: str) -> PreparedRequest:
        try:
            policy = self.policy.with_options(req.reward)
        except ValueError as exc:
            raise BadRequestError("invalid_reward_options", str(exc), path="$.reward") from None
        # The prompt first: the normalizer's refusal of a language names its rules, the model's only the model.
        language = self.engine_client.language_for(req.language)
        self._check_prompt(req.prompt, language)
        self.engine_client.check_language(language, req.language)  # 400 before queueing when the model lacks it
        signals = self.signals.job(req, policy) if self.signals is not None else None
        audio = resample_16k(req.waveform, req.sample_rate)
        key = None
        if req.request_id is not None and self.engine_client.dedup_enabled:
            key = request_key(req.request_id, req.prompt, language, req.sample_rate, req.reward,
                              req.reference_duration_s, waveform=req.waveform)
        return PreparedRequest(req, audio, policy, req.request_id or request_id, language, key, signals)

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
        info = self.engine_client.info
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
        timeout_s = self.engine_client.request_timeout_s
        measuring = (self.signals.start_measuring([item.audio for item in items], [item.signals for item in items],
                                                  timeout_s) if self.signals is not None else None)
        try:
            transcripts = await self.engine_client.transcribe_many(
                [EngineRequest(item.audio, item.language, item.request_id, item.key) for item in items])
        except BaseException:
            if measuring is not None:
                measuring.cancel()
            raise
        signals = await measuring if measuring is not None else [None] * len(items)
        pairs = [(item, t.value, v) for item, t, v in zip(items, transcripts, signals, strict=True)
                 if isinstance(t.value, Transcription) and not isinstance(v, ServerError)]
        scored = iter(await self.offload.run(lambda: self._results(pairs)) if pairs else [])
        results: list[ScoreResponse | ServerError] = []
        for transcript, values in zip(transcripts, signals, strict=True):
            outcome: ScoreResponse | ServerError = (
                transcript.value if isinstance(transcript.value, ServerError)
                else values if isinstance(values, ServerError) else next(scored))
            self._count(outcome, joined=transcript.joined)
            results.append(outcome)
        return results

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
                results.append(ErrorResponse.model_validate(server_error_body(entry, f"{request_id}-{i}")))
                continue
            outcome = next(outcomes)
            results.append(ErrorResponse.model_validate(server_error_body(outcome, entry.request_id))
                           if isinstance(outcome, ServerError) else outcome)
        return BatchScoreResponse(protocol_version=PROTOCOL_VERSION, results=results)
