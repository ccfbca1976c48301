"""The engine interface: what the scheduler needs from an ASR backend.

An engine turns a batch of 16 kHz mono float32 waveforms into transcripts.
Blocking engines (faster-whisper, transformers) subclass :class:`ThreadedEngine`
and implement ``transcribe_batch_sync``; it runs in a worker thread so the
event loop never blocks.  A threaded engine may split a batch into CPU work
that can run ahead (``prepare_sync``: log-Mel features) and the model call
(``transcribe_prepared_sync``); the two run on separate pools, so the next
batch's features are computed while the current batch is on the device.
Engines with their own scheduler (vLLM) implement ``transcribe`` directly and
say ``schedules_itself``: the server then hands them every utterance on
arrival instead of batching (see :mod:`..service.scheduler`).

Each engine class lists the ``--engine-option KEY=VALUE`` settings it takes
in ``OPTIONS``; :func:`resolve_engine_options` checks and converts them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

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


def max_new_tokens_for(
    duration_s: float, *, tokens_per_second: float = 8.0, floor: int = 16, ceiling: int = 224
) -> int:
    """Cap on decoded tokens from the audio's duration.

    Fast speech runs at about 4 words (≈5 tokens) a second; twice that covers
    any real speech while stopping hallucination loops early.
    """
    return int(min(ceiling, max(floor, round(duration_s * tokens_per_second))))


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_NONE = frozenset({"", "none", "null"})


@dataclass(frozen=True)
class EngineOption:
    """One ``--engine-option KEY=VALUE`` an engine accepts: its type, default and meaning."""

    type: type
    """int, float, bool or str; a value given as text is converted to it."""
    default: Any
    help: str
    nullable: bool = False
    """Whether ``none`` (null in JSON) is accepted: the engine then picks the value itself."""

    def convert(self, value: Any) -> Any:
        """``value`` as this option's type; ValueError with the reason otherwise."""
        if value is None or (isinstance(value, str) and value.strip().lower() in _NONE and self.type is not str):
            if self.nullable:
                return None
            raise ValueError("needs a value")
        if self.type is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in _TRUE or text in _FALSE:
                return text in _TRUE
            raise ValueError(f"{value!r} is not a boolean (true or false)")
        if self.type is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(f"{value!r} is not an integer")
            try:
                return int(str(value).strip()) if isinstance(value, str) else int(value)
            except ValueError:
                raise ValueError(f"{value!r} is not an integer") from None
        if self.type is float:
            if isinstance(value, bool):
                raise ValueError(f"{value!r} is not a number")
            try:
                return float(value)
            except ValueError:
                raise ValueError(f"{value!r} is not a number") from None
        return str(value)


class EngineOptionError(ValueError):
    """An ``--engine-option`` the engine does not know, or a value of the wrong type."""


def resolve_engine_options(engine: str, spec: Mapping[str, EngineOption], given: Mapping[str, Any]) -> dict[str, Any]:
    """Every option of ``spec`` with its value: from ``given`` (converted) or the default.

    Raises :class:`EngineOptionError` naming the engine and the options it knows
    when ``given`` holds an unknown key or a value that does not convert.
    """
    unknown = sorted(set(given) - set(spec))
    if unknown:
        known = ", ".join(sorted(spec)) if spec else "none"
        raise EngineOptionError(
            f"engine {engine!r} has no option {', '.join(map(repr, unknown))} (its options: {known})")
    out = {}
    for key, option in spec.items():
        if key not in given:
            out[key] = option.default
            continue
        try:
            out[key] = option.convert(given[key])
        except ValueError as exc:
            raise EngineOptionError(f"engine option {key}={given[key]!r} for engine {engine!r}: {exc} "
                                    f"({option.help})") from None
    return out


class ASREngine(ABC):
    """An ASR backend.  ``load`` is called once before serving; ``transcribe`` many times."""

    info: EngineInfo
    OPTIONS: ClassVar[Mapping[str, EngineOption]] = MappingProxyType({})
    """The ``--engine-option`` keys this engine takes."""
    options: Mapping[str, Any] = MappingProxyType({})
    """The resolved options (every key of ``OPTIONS``), as ``/v1/info`` reports them."""

    @property
    def schedules_itself(self) -> bool:
        """Whether the engine batches concurrent requests by itself (continuous batching, as vLLM).

        When True the server skips the micro-batch scheduler: every utterance goes to
        ``transcribe`` on its own as soon as it arrives, at most
        ``max_concurrency`` at a time, and each request finishes when its own
        transcript is ready.
        """
        return False

    @property
    def max_concurrency(self) -> int | None:
        """How many utterances a self-scheduling engine takes at once (vLLM's ``max_num_seqs``)."""
        return None

    @property
    def on_accelerator(self) -> bool:
        """Whether the model runs on a GPU (known after ``load``); the scheduler pipelines batches there."""
        return not self.info.device.startswith("cpu")

    @property
    def prefers_batches(self) -> bool:
        """Whether one call over N utterances beats N calls (known after ``load``).

        When False the scheduler sends one utterance per call, so each request
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

    def scheduler_stats(self) -> Mapping[str, float]:
        """The engine's own scheduler counts (vLLM: requests running and waiting), exported on ``/metrics``.

        Empty for engines without a scheduler of their own.
        """
        return {}

    @abstractmethod
    def load(self) -> None:
        """Load weights (blocking); raise with a clear message if they are missing."""

    @abstractmethod
    async def transcribe(self, batch: Sequence[TranscriptionInput]) -> list[Transcription]:
        """Transcripts for ``batch``, in order."""

    def warmup(self) -> None:
        """Run one short utterance so the first real request pays no lazy start-up."""
        asyncio.run(self.transcribe([TranscriptionInput(np.zeros(ENGINE_SAMPLE_RATE, dtype=np.float32))]))

    def close(self) -> None:  # noqa: B027 - an optional hook: an engine that holds nothing need not override it
        """Release resources; default does nothing."""


class ThreadedEngine(ASREngine):
    """An engine whose backend blocks: batches run on a small thread pool.

    The model runs on ``workers`` threads (one: a device runs one batch at a
    time); ``prepare_sync`` runs on a separate CPU pool, so with two batches
    in flight the second one's features are ready when the device frees up.
    """

    def __init__(self, workers: int = 1, feature_workers: int | None = None) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="asr")
        self._feature_pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=feature_workers or min(4, os.cpu_count() or 1), thread_name_prefix="asr-features")

    @abstractmethod
    def transcribe_batch_sync(self, batch: Sequence[TranscriptionInput]) -> list[Transcription]:
        """Blocking transcription of one batch."""

    def prepare_sync(self, batch: Sequence[TranscriptionInput]) -> Any:
        """CPU work for ``batch`` that can run while another batch is on the device (features).

        Its result goes to :meth:`transcribe_prepared_sync`.  The default does nothing.
        """
        return None

    def transcribe_prepared_sync(self, batch: Sequence[TranscriptionInput], prepared: Any) -> list[Transcription]:
        """The model's part of one batch, given what :meth:`prepare_sync` returned for it."""
        return self.transcribe_batch_sync(batch)

    @property
    def _splits_batches(self) -> bool:
        """Whether ``transcribe`` runs the two halves.

        Only when a subclass did not override the whole batch after them.
        """
        cls = type(self)
        if cls.prepare_sync is ThreadedEngine.prepare_sync:
            return False
        owner = {name: next(k for k in cls.__mro__ if name in vars(k))
                 for name in ("transcribe_batch_sync", "transcribe_prepared_sync")}
        return issubclass(owner["transcribe_prepared_sync"], owner["transcribe_batch_sync"])

    async def transcribe(self, batch: Sequence[TranscriptionInput]) -> list[Transcription]:
        loop = asyncio.get_running_loop()
        items = list(batch)
        if not self._splits_batches:
            return await loop.run_in_executor(self._pool, self.transcribe_batch_sync, items)
        prepared = await loop.run_in_executor(self._feature_pool, self.prepare_sync, items)
        return await loop.run_in_executor(self._pool, self.transcribe_prepared_sync, items, prepared)

    def warmup(self) -> None:
        self.transcribe_batch_sync([TranscriptionInput(np.zeros(ENGINE_SAMPLE_RATE, dtype=np.float32))])

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._feature_pool.shutdown(wait=True, cancel_futures=True)
