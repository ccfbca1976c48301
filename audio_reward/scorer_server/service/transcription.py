"""The OpenAI-compatible transcription API behind its routes (``vllm serve``'s serving layer).

An upload is decoded in a worker thread (libsndfile for WAV/FLAC/OGG/MP3,
FFmpeg through PyAV for containers such as M4A and WebM), resampled to
16 kHz and sent through the same engine client (scheduler, timeout, engine) as
``/v1/score``, with the same limits.  Errors are :class:`ServerError` s, rendered in
OpenAI's error shape by the router.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from starlette.concurrency import run_in_threadpool

from audio_reward.protocol import AudioDecodeError, read_audio

from ..config import ServerConfig
from ..engines.base import ENGINE_SAMPLE_RATE
from ..errors import BadRequestError, ModelNotFoundError
from ..openai_protocol import (
    DurationUsage,
    ModelCard,
    ModelList,
    TranscriptionForm,
    TranscriptionResponse,
    TranscriptionVerboseResponse,
)
from .audio_files import FFMPEG_FILES, resample_16k
from .engine_client import EngineClient
from .prometheus import ServerMetrics


@dataclass(frozen=True)
class TranscriptionResult:
    text: str
    language: str
    duration_s: float


def decode_upload(raw: bytes, filename: str | None, max_seconds: float, max_bytes: int) -> np.ndarray:
    """An uploaded audio file as 16 kHz mono float32 (the protocol's reader, bounded as ``/v1/score``'s files
    are); 400 naming the file's format when it is not audio."""
    name = f"file {filename!r}" if filename else "the file"
    try:
        audio, rate = read_audio(raw, field=name, max_seconds=max_seconds, max_bytes=max_bytes, decoder=FFMPEG_FILES)
    except AudioDecodeError as exc:
        raise BadRequestError(exc.code, str(exc), path="file") from None
    return resample_16k(audio, rate)


@dataclass(eq=False)
class TranscriptionService:
    """Transcribes uploads over the server's engine client; built once per app."""

    engine_client: EngineClient
    metrics: ServerMetrics
    settings: ServerConfig
    """Its model and served model names, and the limits an upload is read within."""

    def model_names(self) -> list[str]:
        """The ids a request may name: the ``served_model_name`` s when set (the first is the main one, as
        in ``vllm serve``), else the loaded model's id and the setting."""
        if self.settings.served_model_name:
            return list(self.settings.served_model_name)
        return list(dict.fromkeys([self.engine_client.info.model_id, self.settings.model]))

    def models(self) -> ModelList:
        """``GET /v1/models``."""
        return ModelList(data=[self.model_card(name) for name in self.model_names()])

    def model_card(self, model_id: str) -> ModelCard:
        """``GET /v1/models/{id}``; 404 for a model not served here."""
        self._check_model(model_id)
        return ModelCard(id=model_id, created=int(self.engine_client.state.started_at),
                         root=self.engine_client.info.model_id)

    def _check_model(self, model_id: str) -> None:
        names = self.model_names()
        if model_id not in names:
            raise ModelNotFoundError(
                f"the model {model_id!r} is not served here; this server serves {', '.join(names)} "
                "(GET /v1/models lists them; --served-model-name sets the id clients send)",
                path="model",
            )

    def _check_form(self, form: TranscriptionForm) -> None:
        self._check_model(form.model)
        if form.stream:
            raise BadRequestError("unsupported_stream", "streamed transcription is not offered: send stream=false "
                                  "(the whole transcript comes in one answer)", path="stream")
        if form.temperature != 0:  # NaN and infinities too
            raise BadRequestError(
                "unsupported_temperature",
                f"temperature {form.temperature:g} is not supported: this server decodes greedily "
                "(temperature 0, no fallback) so transcripts are reproducible; send 0 or leave it out",
                path="temperature",
            )

    async def transcribe(self, form: TranscriptionForm, raw: bytes, filename: str | None,
                         request_id: str) -> TranscriptionResult:
        """Check the form, decode the upload, transcribe it; raises :class:`ServerError`."""
        self._check_form(form)
        language = self.engine_client.language(form.language, path="language")
        audio = await run_in_threadpool(decode_upload, raw, filename, self.settings.max_audio_seconds,
                                        self.settings.max_audio_bytes)
        transcription = await self.engine_client.transcribe(audio, language, request_id)
        self.metrics.transcriptions.labels("ok").inc()
        return TranscriptionResult(
            text=transcription.text,
            language=transcription.language or language or "",
            duration_s=audio.shape[0] / ENGINE_SAMPLE_RATE,
        )


def render(result: TranscriptionResult, response_format: str) -> str | dict[str, Any]:
    """The answer in the requested format: plain text, or OpenAI's json / verbose_json object."""
    if response_format == "text":
        return result.text
    usage = DurationUsage(seconds=round(result.duration_s, 3))
    if response_format == "verbose_json":
        return TranscriptionVerboseResponse(
            language=result.language, duration=round(result.duration_s, 3), text=result.text, usage=usage
        ).model_dump()
    return TranscriptionResponse(text=result.text, usage=usage).model_dump()
