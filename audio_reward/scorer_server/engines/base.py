"""The engine interface: what the batcher needs from an ASR backend.

An engine turns a batch of 16 kHz mono float32 waveforms into transcripts.
Blocking engines (faster-whisper, transformers) subclass :class:`ThreadedEngine`
and implement ``transcribe_batch_sync``; it runs in a worker thread so the
event loop never blocks.  Engines with their own scheduler (vLLM) implement
``transcribe`` directly.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

ENGINE_SAMPLE_RATE = 16_000


@dataclass(frozen=True)
class TranscriptionInput:
    """One utterance: 16 kHz mono float32 samples and an optional language code."""

    audio: np.ndarray
    language: str | None = None

    @property
    def duration_s(self) -> float:
        return self.audio.shape[0] / ENGINE_SAMPLE_RATE


@dataclass(frozen=True)
class Transcription:
    text: str
    language: str | None = None
    num_tokens: int | None = None


@dataclass(frozen=True)
class EngineInfo:
    """What ``/v1/info`` and every response report about the engine."""

    engine: str
    model_id: str
    weights_sha256: str | None = None
    device: str = "cpu"
    compute_type: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


def max_new_tokens_for(duration_s: float, *, tokens_per_second: float = 8.0, floor: int = 16, ceiling: int = 224) -> int:
    """Cap on decoded tokens from the audio's duration.

    Fast speech runs at about 4 words (≈5 tokens) a second; twice that covers
    any real speech while stopping hallucination loops early.
    """
    return int(min(ceiling, max(floor, round(duration_s * tokens_per_second))))


class ASREngine(ABC):
    """An ASR backend.  ``load`` is called once before serving; ``transcribe`` many times."""

    info: EngineInfo

    @property
    def prefers_batches(self) -> bool:
        """Whether one call over N utterances beats N calls (known after ``load``).

        When False the batcher sends one utterance per call, so each request
        finishes as soon as its own transcript is ready.
        """
        return True

    @property
    def languages(self) -> frozenset[str] | None:
        """Language codes the loaded model transcribes; None when the engine cannot tell.

        The server refuses a request naming any other language with a 400
        before it is queued, so one bad request never fails its batch-mates.
        """
        return None

    @abstractmethod
    def load(self) -> None:
        """Load weights (blocking); raise with a clear message if they are missing."""

    @abstractmethod
    async def transcribe(self, batch: Sequence[TranscriptionInput]) -> list[Transcription]:
        """Transcripts for ``batch``, in order."""

    def warmup(self) -> None:
        """Run one short utterance so the first real request pays no lazy start-up."""
        asyncio.run(self.transcribe([TranscriptionInput(np.zeros(ENGINE_SAMPLE_RATE, dtype=np.float32))]))

    def close(self) -> None:
        """Release resources; default does nothing."""


class ThreadedEngine(ASREngine):
    """An engine whose backend blocks: batches run on a small thread pool."""

    def __init__(self, workers: int = 1) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="asr")

    @abstractmethod
    def transcribe_batch_sync(self, batch: Sequence[TranscriptionInput]) -> list[Transcription]:
        """Blocking transcription of one batch."""

    async def transcribe(self, batch: Sequence[TranscriptionInput]) -> list[Transcription]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self.transcribe_batch_sync, list(batch))

    def warmup(self) -> None:
        self.transcribe_batch_sync([TranscriptionInput(np.zeros(ENGINE_SAMPLE_RATE, dtype=np.float32))])

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
