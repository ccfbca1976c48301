"""Speaker similarity and quality for the scoring pipeline, batched beside transcription.

:class:`SignalService` holds the signal models the settings chose
(:mod:`..signals`), one micro-batch scheduler each (the same :class:`~.scheduler.MicroBatchScheduler`
as the ASR engine, so concurrent requests share model calls), and the store of
registered references.  The pipeline asks it, while preparing a request, what
the request needs (:meth:`SignalService.job`: the reference resolved, or the
request refused with 400/404 before anything is queued), then runs
:meth:`SignalService.measure` concurrently with the transcription, so the
signals add their own time only where they are slower than the ASR.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from audio_reward.protocol import (
    PROTOCOL_VERSION,
    DecodedAudio,
    DecodedScoreRequest,
    RewardPolicy,
    decode_speaker_request,
)

from ..config import ServerConfig
from ..engines.base import ENGINE_SAMPLE_RATE, AudioInput
from ..errors import (
    BadRequestError,
    NotReadyError,
    RequestTimeoutError,
    ServerError,
    ShuttingDownError,
    SignalError,
    UnknownSpeakerReferenceError,
    parse_request,
)
from ..signals.quality import QualityScore, QualityScorer
from ..signals.references import SpeakerReferenceStore, reference_id
from ..signals.speaker import MIN_REFERENCE_S, SpeakerEncoder, cosine_similarity
from .audio_files import resample_16k
from .scheduler import BatchStats, MicroBatchScheduler, admit

log = logging.getLogger(__name__)

SPEAKER_FLAG = "--speaker-model resemblyzer"
QUALITY_FLAG = "--quality-model dnsmos"


@dataclass(frozen=True)
class SignalJob:
    """What one request asks of the signals, resolved before it is queued."""

    reference_id: str | None = None
    reference_embedding: np.ndarray | None = None
    """The reference's embedding when it is already known (registered, or inline and seen before)."""
    reference_audio: np.ndarray | None = None
    """An inline reference at 16 kHz still to embed (kept in the store afterwards)."""
    quality: bool = False


@dataclass(eq=False)
class SignalItem:
    """One utterance through the signal models: its 16 kHz audio and its job in, its signals or the error out."""

    audio: np.ndarray
    job: SignalJob
    reference_embedding: np.ndarray | None = None
    """The reference's embedding once known: the job's, or the one measured with this item (an inline reference)."""
    speaker_similarity: float | None = None
    quality: QualityScore | None = None
    error: ServerError | None = None
    """Why nothing was measured: the error every item of a failed measurement shares."""

    def __post_init__(self) -> None:
        if self.reference_embedding is None:
            self.reference_embedding = self.job.reference_embedding

    @property
    def quality_mos(self) -> float | None:
        """The MOS the reward reads (DNSMOS overall), when quality was measured."""
        return self.quality.ovrl if self.quality is not None else None

    def fields(self) -> dict[str, Any]:
        """What was measured, as response fields (the reward's terms are the scoring's)."""
        out: dict[str, Any] = {}
        if self.speaker_similarity is not None:
            out.update(speaker_similarity=self.speaker_similarity, speaker_reference_id=self.job.reference_id)
        if self.quality is not None:
            out.update(self.quality.fields())
        return out


@dataclass(eq=False)
class SignalService:
    """The speaker and quality models, their schedulers and the reference store; built once per app."""

    speaker: SpeakerEncoder | None
    quality: QualityScorer | None
    store: SpeakerReferenceStore
    settings: ServerConfig
    """The request limits a registration is read within, and the schedulers' batch size and queue bound."""
    on_batch: Callable[[str, BatchStats], None] | None = None
    _schedulers: dict[str, MicroBatchScheduler] = field(default_factory=dict, init=False, repr=False)

    @property
    def models(self) -> dict[str, SpeakerEncoder | QualityScorer]:
        """The loaded-or-loading models by signal name."""
        models = {"speaker": self.speaker, "quality": self.quality}
        return {name: model for name, model in models.items() if model is not None}

    # -- life cycle ------------------------------------------------------------------------
    def load(self) -> None:
        """Load and warm every model (blocking)."""
        for model in self.models.values():
            model.load()
            model.warmup()

    def start(self) -> None:
        """Start one micro-batch scheduler per model (on the running loop)."""
        for name, model in self.models.items():
            measure = model.embed_sync if isinstance(model, SpeakerEncoder) else model.score_sync
            self._schedulers[name] = MicroBatchScheduler(
                functools.partial(model.run, measure), max_batch_size=self.settings.signal_max_batch_size,
                max_wait_s=0.0,
                max_queue=self.settings.max_queue,
                on_batch=functools.partial(self.on_batch, name) if self.on_batch is not None else None,
            )
            self._schedulers[name].start()

    async def close(self, timeout_s: float) -> None:
        """Finish what is queued, stop the schedulers, then release the models' threads."""
        for scheduler in self._schedulers.values():
            await scheduler.close(timeout_s=timeout_s)
        for model in self.models.values():
            await asyncio.to_thread(model.close)

    def describe(self) -> dict[str, Any]:
        """The ``/v1/info`` part: each signal's model, or null when it is off."""
        out: dict[str, Any] = dict.fromkeys(("speaker", "quality"))
        for name, model in self.models.items():
            info = model.info
            out[name] = {"engine": info.engine, "model_id": info.model_id, "device": info.device,
                         "extra": dict(info.extra), "ready": name in self._schedulers}
        out["max_batch_size"] = self.settings.signal_max_batch_size
        out["speaker_references"] = {"kept": len(self.store), "bytes": self.store.bytes,
                                     "max_count": self.store.max_entries, "max_bytes": self.store.max_bytes,
                                     "ttl_s": self.store.ttl_s, "min_reference_s": MIN_REFERENCE_S}
        return out

    # -- preparation (worker thread) -------------------------------------------------------
    def _reference_16k(self, audio: DecodedAudio, path: str) -> np.ndarray:
        if audio.duration_s < MIN_REFERENCE_S:
            raise BadRequestError(
                "speaker_reference_too_short",
                f"the speaker reference holds {audio.duration_s:.2f} s of audio; an embedding needs at least "
                f"{MIN_REFERENCE_S:g} s",
                path=path,
            )
        return resample_16k(audio.waveform, audio.sample_rate)

    def _require_speaker(self, path: str) -> None:
        if self.speaker is None:
            raise BadRequestError(
                "signal_unavailable",
                f"speaker similarity is off on this server: start it with {SPEAKER_FLAG} (the signals extra) "
                "or a WavLMForXVector model",
                path=path,
            )

    def job(self, req: DecodedScoreRequest, policy: RewardPolicy) -> SignalJob | None:
        """What ``req`` needs of the signals; 400 or 404 for what cannot be measured.  Blocking (resampling)."""
        if policy.needs_speaker and req.speaker_reference_id is None and req.speaker_reference is None:
            raise BadRequestError(
                "missing_speaker_reference",
                "the reward policy weighs speaker similarity (speaker_weight or speaker_floor) but the request "
                "names no reference: send speaker_reference_id or speaker_reference_audio_base64",
                path="$.reward",
            )
        # DNSMOS costs several 9 s windows per clip whatever its length, so it runs only for a request that
        # weighs it or asks for it: a request that does neither gets the answer it got without the model.
        quality = policy.quality_weight > 0 or req.measure_quality
        if quality and self.quality is None:
            asked = "the request asks for" if req.measure_quality else "the reward policy weighs"
            raise BadRequestError(
                "signal_unavailable",
                f"{asked} speech quality but quality scoring is off on this server: start it "
                f"with {QUALITY_FLAG} (the signals extra)",
                path="$.measure_quality" if req.measure_quality else "$.reward.quality_weight",
            )
        if req.speaker_reference_id is not None:
            self._require_speaker("$.speaker_reference_id")
            embedding = self.store.get(req.speaker_reference_id)
            if embedding is None:
                raise UnknownSpeakerReferenceError(
                    f"speaker reference {req.speaker_reference_id} is not registered here (never registered, or "
                    "evicted): register the recording again with POST /v1/speakers",
                    path="$.speaker_reference_id",
                )
            return SignalJob(req.speaker_reference_id, reference_embedding=embedding, quality=quality)
        if req.speaker_reference is not None:
            path = "$.speaker_reference_audio_base64"
            self._require_speaker(path)
            audio = self._reference_16k(req.speaker_reference, path)
            key = reference_id(audio)
            known = self.store.get(key)
            return SignalJob(key, reference_embedding=known, reference_audio=None if known is not None else audio,
                             quality=quality)
        return SignalJob(quality=True) if quality else None

    # -- the models --------------------------------------------------------------------------
    def _submit(self, name: str, *groups: list[np.ndarray]) -> list[list[asyncio.Future[Any]]]:
        """Queue every group's audio on the ``name`` model together (all or none); each group's futures.

        Nothing is queued, and the model need not be loaded, when every group is empty.
        """
        if not any(groups):
            return [[] for _ in groups]
        scheduler = self._schedulers.get(name)
        if scheduler is None:
            raise NotReadyError(f"the {name} model is still loading", retry_after_s=5)
        futures = iter(admit(scheduler, [AudioInput(a) for group in groups for a in group], queue=f"the {name} model"))
        return [list(itertools.islice(futures, len(group))) for group in groups]

    async def measure(self, items: Sequence[SignalItem]) -> None:
        """Measure each item's signals (its audio at 16 kHz); raises :class:`ServerError` if a model call fails.

        The speaker model embeds each item's speech and each inline reference in one submission (a new
        reference is kept in the store), the quality model scores the items that ask for it.
        """
        speaker = [item for item in items if item.job.reference_id is not None]
        inline = [(item, audio) for item in speaker if (audio := item.job.reference_audio) is not None]
        rated = [item for item in items if item.job.quality]
        speech, references = self._submit("speaker", [item.audio for item in speaker], [audio for _, audio in inline])
        (qualities,) = self._submit("quality", [item.audio for item in rated])
        await _outcomes([*speech, *references, *qualities], "a speaker or quality model failed on this request's batch")
        for (item, _), reference in zip(inline, references, strict=True):
            item.reference_embedding = reference.result()
            self.store.put(cast(str, item.job.reference_id), item.reference_embedding)
        for item, embedding in zip(speaker, speech, strict=True):
            item.speaker_similarity = cosine_similarity(embedding.result(), cast(np.ndarray, item.reference_embedding))
        for item, quality in zip(rated, qualities, strict=True):
            item.quality = quality.result()

    def start_measuring(self, items: Sequence[SignalItem], timeout_s: float) -> asyncio.Task[None] | None:
        """Start measuring ``items`` beside their transcription; None when there are none."""
        if not items:
            return None
        return asyncio.ensure_future(self._measure_all(list(items), timeout_s))

    async def _measure_all(self, items: list[SignalItem], timeout_s: float) -> None:
        """Measure ``items``; when that fails, each of them holds the error they share."""
        try:
            await asyncio.wait_for(self.measure(items), timeout_s)
            return
        except asyncio.TimeoutError:
            error: ServerError = RequestTimeoutError(
                f"the speaker and quality models took longer than the server's limit of {timeout_s:g} s")
        except ServerError as exc:
            error = exc
        for item in items:
            item.error = error

    # -- registration -----------------------------------------------------------------------
    def _prepare_registration(self, body: bytes) -> np.ndarray:
        audio = parse_request(decode_speaker_request, body, self.settings.limits)
        self._require_speaker("$")
        return self._reference_16k(audio, f"$.{audio.encoding}")

    async def register(self, body: bytes) -> dict[str, Any]:
        """A ``POST /v1/speakers`` body → ``{"speaker_reference_id", ...}``; the embedding is kept in the store."""
        audio = await asyncio.to_thread(self._prepare_registration, body)
        key = reference_id(audio)
        if self.store.get(key) is None:
            (waits,) = self._submit("speaker", [audio])
            (embedding,) = await _outcomes(waits, "the speaker model failed on this reference")
            self.store.put(key, embedding)
        return {"speaker_reference_id": key, "protocol_version": PROTOCOL_VERSION,
                "duration_s": audio.shape[0] / ENGINE_SAMPLE_RATE,
                "model": cast(SpeakerEncoder, self.speaker).info.model_id, "ttl_s": self.store.ttl_s}


async def _outcomes(waits: list[asyncio.Future[Any]], failed: str) -> list[Any]:
    """The models' answers; a model's failure is a 500 ``signal_error`` (its own message goes to the log)."""
    try:
        return list(await asyncio.gather(*waits))
    except ShuttingDownError:  # the scheduler closed before the model took it
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the model raised is this request's signal_error
        log.error("signal model failed", extra={"error": repr(exc)})
        raise SignalError(failed) from None
