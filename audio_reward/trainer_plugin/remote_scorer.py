"""Score audio samples through the scorer client: coalescing, failure policy, stable output keys.

:class:`AudioRewardScorer` is the verl-independent core of
:class:`~audio_reward.trainer_plugin.reward_manager.AudioScoreRewardManager`:
it turns an :class:`AudioSample` into a :class:`Reward` whose ``extra_info``
has the same keys for every sample (verl takes the key set from the first
sample).
"""

from __future__ import annotations

import asyncio
import collections
import fcntl
import json
import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..futures import Batcher
from ..scorer_client.async_client import AsyncScorerClient
from ..scorer_client.errors import ScorerError
from ..scorer_client.wire import ScoreItem, ScoreResult
from .samples import AudioSample
from .settings import FailurePolicy, PluginSettings

logger = logging.getLogger(__name__)

FAILED_REWARD = float("nan")
"""Reward of a masked sample: not a number, so no estimator can mistake it for a measured 0."""


@dataclass(frozen=True)
class Reward:
    """One sample's reward: what verl reads, and the scorer's whole answer beside it."""

    score: float
    extra_info: dict[str, float]
    """The configured diagnostics (NaN where the server reported none) and ``score_failed``: the same keys for
    every sample."""
    diagnostics: Mapping[str, Any] = field(default_factory=dict)
    """Every field of the scorer's answer (empty for a masked sample), for the validation logs."""

    def for_verl(self) -> dict[str, Any]:
        """The answer of verl's ``RewardManagerBase.run_single``: the two keys its reward loop reads."""
        return {"reward_score": self.score, "reward_extra_info": self.extra_info}


class ScoringFailedError(RuntimeError):
    """Scoring a sample failed under the ``raise`` policy; the message names the sample."""


def record_failure(path: str | None, label: str, uid: str | None, message: str) -> None:
    """Append one failure to the JSONL ``failure_log`` (several reward workers may write at once)."""
    if not path:
        return
    log = Path(path)
    log.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"time": time.time(), "sample": label, "uid": uid, "message": message}, ensure_ascii=False)
    with open(log, "a", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.write(line + "\n")


class AudioRewardScorer:
    """Scores samples on the configured scorer, batching concurrent calls into one request.

    One instance belongs to one event loop (the client's connection pool
    does); :meth:`aclose` releases it.  Given a ``client``, the scorer sends
    through it and leaves closing it to its owner.
    """

    RECENT_BATCHES = 64
    """How many batch sizes :attr:`batches` keeps: a training run sends one batch per step for days."""

    def __init__(self, settings: PluginSettings, client: AsyncScorerClient | None = None) -> None:
        self.settings = settings
        self._owns_client = client is None
        self.client = client if client is not None else AsyncScorerClient(settings=settings.client)
        self._coalescer: Batcher[ScoreItem, ScoreResult] = Batcher(
            self._score_batch, window_s=settings.coalesce_window_ms / 1000.0, max_batch=settings.max_batch
        )
        self._recent_batches: collections.deque[int] = collections.deque(maxlen=self.RECENT_BATCHES)
        # Logging a DNSMOS field asks the scorer to measure it (docs/signals.md: it runs only when asked).
        self._logs_quality = any(key.startswith("dnsmos_") for key in settings.diagnostics)

    @property
    def batches(self) -> list[int]:
        """Sizes of the most recent batches sent, oldest first (for logs and tests)."""
        return list(self._recent_batches)

    async def _score_batch(self, items: Sequence[ScoreItem]) -> list[ScoreResult | ScorerError]:
        self._recent_batches.append(len(items))
        return await self.client.score_many(items)

    async def aclose(self) -> None:
        if self._owns_client:
            await self.client.aclose()

    def _extra_info(self, diagnostics: Mapping[str, Any], failed: bool) -> dict[str, float]:
        # Numeric only, so verl can average every key; a missing value is NaN, never 0.
        out = {key: float(value) if isinstance(value := diagnostics.get(key), (int, float))
               and not isinstance(value, bool) else math.nan for key in self.settings.diagnostics}
        return {**out, "score_failed": float(failed)}

    def failed(self, label: str, text: str, cause: BaseException, uid: str | None = None) -> Reward:
        """Apply the failure policy: raise :class:`ScoringFailedError`, or return a masked result."""
        short = text if len(text) <= 60 else text[:57] + "..."
        message = f"scoring sample {label} (target text {short!r}) failed: {type(cause).__name__}: {cause}"
        if self.settings.failure_policy is FailurePolicy.RAISE:
            record_failure(self.settings.failure_log, label, uid, message)
            raise ScoringFailedError(message) from cause
        logger.warning("%s; masked (score_failed=1)", message)
        return Reward(FAILED_REWARD, self._extra_info({}, failed=True))

    async def score(self, sample: AudioSample) -> Reward:
        """The :class:`Reward` of one sample; a failure goes through :meth:`failed`.

        A sample whose row names a reference recording (``speaker_reference_path``) is scored against that
        voice: the recording is registered once per scorer and its id sent.  DNSMOS is asked for when the
        ``diagnostics`` log one of its fields, whether or not the reward weighs it.
        """
        try:
            speaker = (await self.client.register_speaker_file(sample.speaker_reference)
                       if sample.speaker_reference else None)
            result = await self._coalescer.submit(ScoreItem(
                waveform=sample.waveform, sample_rate=sample.sample_rate, text=sample.text,
                language=sample.language or self.settings.language, metadata=sample.metadata,
                reward=self.settings.reward, speaker_reference_id=speaker, measure_quality=self._logs_quality,
            ))
        except (ScorerError, asyncio.TimeoutError, OSError) as exc:
            return self.failed(sample.sample_id, sample.text, exc, sample.uid)
        return Reward(float(result.score), self._extra_info(result.diagnostics, failed=False), dict(result.diagnostics))
