"""The engine interface: what the scheduler needs from an ASR backend.

An engine turns a batch of 16 kHz mono float32 waveforms into transcripts.
Blocking engines (faster-whisper, transformers) subclass :class:`ThreadedEngine`
and implement ``transcribe_batch_sync``; it runs in a worker thread so the
event loop never blocks.  A threaded engine may split a batch into CPU work
that can run ahead (``prepare_sync``: log-Mel features) and the model call
(``transcribe_prepared_sync``), and say so (``splits_batches``); the two run on separate pools, so the next
batch's features are computed while the current batch is on the device (and a batch that arrives while the
device is idle goes to the model thread whole, in one hop).
Engines with their own scheduler (vLLM) implement ``transcribe`` directly and
say ``schedules_itself``: the server then hands them every utterance on
arrival instead of batching (see :mod:`..service.scheduler`).

Each engine class lists the ``--engine-option KEY=VALUE`` settings it takes
in ``OPTIONS``; :func:`resolve_engine_options` checks and converts them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from pydantic import ConfigDict, TypeAdapter, ValidationError

ENGINE_SAMPLE_RATE = 16_000


@dataclass(frozen=True)
class AudioInput:
    """One utterance for a model: 16 kHz mono float32 samples (what a scheduler queues)."""

    audio: np.ndarray

    @property
    def duration_s(self) -> float:
        return self.audio.shape[0] / ENGINE_SAMPLE_RATE


@dataclass(frozen=True)
class TranscriptionInput(AudioInput):
    """One utterance to transcribe: its 16 kHz samples and an optional language code."""

    language: str | None = None


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


@dataclass(frozen=True)
class EngineConfig:
    """Everything an engine factory needs; built from the server settings."""

    model: str
    device: str = "cpu"
    compute_type: str = "default"
    max_batch_size: int = 16
    cpu_threads: int = 0
    beam_size: int = 1
    options: dict[str, Any] = field(default_factory=dict)
    """``--engine-option`` values by key, checked against the engine's ``OPTIONS``."""


def max_new_tokens_for(
    duration_s: float, *, tokens_per_second: float = 8.0, floor: int = 16, ceiling: int = 224
) -> int:
    """Cap on decoded tokens from the audio's duration.

    Fast speech runs at about 4 words (≈5 tokens) a second; twice that covers
    any real speech while stopping hallucination loops early.
    """
    return int(min(ceiling, max(floor, round(duration_s * tokens_per_second))))


_NONE = frozenset({"", "none", "null"})
_KINDS = MappingProxyType({bool: "a boolean (true or false)", int: "an integer", float: "a number", str: "a string"})


@dataclass(frozen=True)
class EngineOption:
    """One ``--engine-option KEY=VALUE`` an engine accepts: its type, default and meaning."""

    type: type
    """int, float, bool or str; a value given as text is converted to it (pydantic's lax rules)."""
    default: Any
    help: str
    nullable: bool = False
    """Whether ``none`` (null in JSON) is accepted: the engine then picks the value itself."""

    @functools.cached_property
    def _adapter(self) -> TypeAdapter[Any]:
        # Numbers as text convert; a number or bool given to a str option is written as text.
        return TypeAdapter(self.type, config=ConfigDict(coerce_numbers_to_str=True))

    def convert(self, value: Any) -> Any:
        """``value`` as this option's type; ValueError with the reason otherwise."""
        text = value.strip() if isinstance(value, str) and self.type is not str else value
        if text is None or (isinstance(text, str) and text.lower() in _NONE and self.type is not str):
            if self.nullable:
                return None
            raise ValueError("needs a value")
        if isinstance(text, bool) and self.type in (int, float):  # pydantic would read True as 1
            raise self._not_a(value)
        try:
            return self._adapter.validate_python(text)
        except ValidationError:
            raise self._not_a(value) from None

    def _not_a(self, value: Any) -> ValueError:
        return ValueError(f"{value!r} is not {_KINDS[self.type]}")


class EngineOptionError(ValueError):
    """An ``--engine-option`` the engine does not know, or a value of the wrong type."""


def resolve_engine_options(engine: str, spec: Mapping[str, EngineOption], given: Mapping[str, Any]) -> dict[str, Any]:
    """Every option of ``spec`` with its value: from ``given`` (converted) or the default.

    Raises :class:`EngineOptionError` naming the engine and the options it knows
    when ``given`` holds an unknown key or a value that does not convert.
    """
    if unknown := sorted(set(given) - set(spec)):
        known = ", ".join(sorted(spec)) if spec else "none"
        raise EngineOptionError(
            f"engine {engine!r} has no option {', '.join(map(repr, unknown))} (its options: {known})")
    out = {}
    for key, option in spec.items():
        try:
            out[key] = option.convert(given[key]) if key in given else option.default
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

    # Whether the engine batches concurrent requests by itself (continuous batching, as vLLM).  When True
    # the server skips the micro-batch scheduler: every utterance goes to ``transcribe`` on its own as soon
    # as it arrives, at most ``max_concurrency`` at a time, and each request finishes when its own
    # transcript is ready.
    schedules_itself: ClassVar[bool] = False

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

    def _configure(self, name: str, config: EngineConfig, **info: Any) -> None:
        """Keep ``config``, resolve its ``--engine-option`` values against ``OPTIONS``, and describe the engine by
        its settings (``info``: more :class:`EngineInfo` fields) until it has loaded."""
        self.config = config
        self.options = resolve_engine_options(name, self.OPTIONS, config.options)
        self.info = EngineInfo(name, config.model, device=config.device, **info)

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

    splits_batches: ClassVar[bool] = False
    """Whether ``transcribe`` runs a batch in its two halves, :meth:`prepare_sync` then
    :meth:`transcribe_prepared_sync`; else it calls :meth:`transcribe_batch_sync`.  An engine that
    implements the halves sets it; a subclass of one that overrides the whole batch again sets it back."""

    def __init__(self, workers: int = 1, feature_workers: int | None = None) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="asr")
        self._feature_pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=feature_workers or min(4, os.cpu_count() or 1), thread_name_prefix="asr-features")
        self._batches_in_engine = 0  # on the event loop only

    def transcribe_batch_sync(self, batch: Sequence[TranscriptionInput]) -> list[Transcription]:
        """Blocking transcription of one batch; an engine implements it or the two halves it runs by default."""
        return self.transcribe_prepared_sync(batch, self.prepare_sync(batch))

    def prepare_sync(self, batch: Sequence[TranscriptionInput]) -> Any:
        """CPU work for ``batch`` that can run while another batch is on the device (features).

        Its result goes to :meth:`transcribe_prepared_sync`.  The default does nothing.
        """
        return None

    def transcribe_prepared_sync(self, batch: Sequence[TranscriptionInput], prepared: Any) -> list[Transcription]:
        """The model's part of one batch, given what :meth:`prepare_sync` returned for it."""
        return self.transcribe_batch_sync(batch)

    async def transcribe(self, batch: Sequence[TranscriptionInput]) -> list[Transcription]:
        """One thread hop when the model is idle; features ahead on the CPU pool only while it is busy.

        Computing a batch's features on the feature pool pays off only while another batch holds the model
        thread (two batches in flight, as on a GPU).  With the model idle (always on the CPU, where one batch
        is in flight, and at concurrency 1 everywhere) that is two extra hops between the event loop and the
        pools for nothing, so the whole batch goes to the model thread at once.
        """
        loop = asyncio.get_running_loop()
        items = list(batch)
        ahead = self.splits_batches and self._batches_in_engine > 0
        self._batches_in_engine += 1
        try:
            if not ahead:
                return await loop.run_in_executor(self._pool, self.transcribe_batch_sync, items)
            prepared = await loop.run_in_executor(self._feature_pool, self.prepare_sync, items)
            return await loop.run_in_executor(self._pool, self.transcribe_prepared_sync, items, prepared)
        finally:
            self._batches_in_engine -= 1

    def warmup(self) -> None:
        self.transcribe_batch_sync([TranscriptionInput(np.zeros(ENGINE_SAMPLE_RATE, dtype=np.float32))])

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._feature_pool.shutdown(wait=True, cancel_futures=True)
