"""What every signal model shares: a name, what ``/v1/info`` reports, loading, and its own thread."""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from audio_reward.extras import is_missing_dependency, missing_extra_message

from ..engines.base import ENGINE_SAMPLE_RATE, AudioInput

SIGNALS_EXTRA = "signals"
"""The pyproject extra that installs the offline signal models (resemblyzer, speechmos)."""

QualityWindows = Literal["auto", "shared", "whole"]
"""How DNSMOS runs a clip's windows: their convolutions shared, each through the whole model, or shared on
onnxruntime's CPU provider only (the one the sharing is checked on) and whole elsewhere."""


@dataclass(frozen=True)
class SignalInfo:
    """What ``/v1/info`` and the responses say about a signal's model."""

    signal: str
    """``speaker`` or ``quality``."""
    engine: str
    model_id: str
    device: str = "cpu"
    extra: dict[str, str] = field(default_factory=dict)


class SignalModel(ABC):
    """A model that turns a batch of 16 kHz mono float32 utterances into one value each.

    ``load`` runs once before serving; the batch methods of the subclasses block
    and run on the model's own single thread (:meth:`run`), so the event loop and
    the ASR engine's threads never wait on it.
    """

    info: SignalInfo

    def __init__(self, device: str = "cpu", cpu_threads: int = 0) -> None:
        self.device = device
        """Where the model runs: ``cpu``, ``cuda`` or ``auto``, as the settings name it."""
        self.cpu_threads = cpu_threads
        """Threads the model's library may use on the CPU; 0 leaves its default."""
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=type(self).__name__)

    @abstractmethod
    def load(self) -> None:
        """Load the weights (blocking); raise with a clear message if they are missing."""

    @abstractmethod
    def warmup(self) -> None:
        """One short batch (:func:`tone`), so the first request pays no lazy start-up."""

    async def run(self, fn: Callable[[Sequence[np.ndarray]], Iterable[Any]], batch: Sequence[AudioInput]) -> list[Any]:
        """``fn`` (a batch method, ``embed_sync`` or ``score_sync``) over the queued items' audio, on the model's
        thread: a scheduler's batch call, one result per item."""
        return list(await asyncio.get_running_loop().run_in_executor(self._pool, fn, [item.audio for item in batch]))

    def close(self) -> None:
        """Stop the model's thread."""
        self._pool.shutdown(wait=True, cancel_futures=True)


def import_backend(module: str, what: str, extra: str = SIGNALS_EXTRA) -> Any:
    """The signal's backend ``module``, or ImportError naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if not is_missing_dependency(exc):
            raise
        raise ImportError(missing_extra_message(extra, what, exc)) from exc


def tone(seconds: float) -> np.ndarray:
    """``seconds`` of a quiet 220 Hz sine at the engines' rate: a warm-up utterance."""
    t = np.arange(int(seconds * ENGINE_SAMPLE_RATE), dtype=np.float32) / ENGINE_SAMPLE_RATE
    return (0.1 * np.sin(2 * np.pi * 220.0 * t)).astype(np.float32)
