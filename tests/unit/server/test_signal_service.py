"""The signal service on stand-in models: each item's signals land on its own record, a failure on every one."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import numpy as np
import pytest

from audio_reward.scorer_server.config import ServerConfig
from audio_reward.scorer_server.errors import RequestTimeoutError, SignalError
from audio_reward.scorer_server.service.signals import SignalItem, SignalJob, SignalService
from audio_reward.scorer_server.signals.base import SignalInfo
from audio_reward.scorer_server.signals.quality import QualityScore, QualityScorer
from audio_reward.scorer_server.signals.references import SpeakerReferenceStore, reference_id
from audio_reward.scorer_server.signals.speaker import SpeakerEncoder, cosine_similarity


def _direction(audio: np.ndarray) -> np.ndarray:
    """A clip's stand-in embedding: a unit vector at the angle its first sample names."""
    angle = float(audio[0])
    return np.array([np.cos(angle), np.sin(angle)], dtype=np.float32)


class AngleEncoder(SpeakerEncoder):
    def __init__(self) -> None:
        super().__init__()
        self.info = SignalInfo("speaker", "angle", "stand-in", "cpu")
        self.calls: list[int] = []

    @property
    def dimensions(self) -> int:
        return 2

    def load(self) -> None:
        """Nothing to load."""

    def embed_sync(self, batch: Sequence[np.ndarray]) -> np.ndarray:
        self.calls.append(len(batch))
        return np.stack([_direction(audio) for audio in batch])


class LoudnessScorer(QualityScorer):
    """MOS = 1 + the clip's first sample (a failing batch when that is negative)."""

    def __init__(self) -> None:
        super().__init__()
        self.info = SignalInfo("quality", "loudness", "stand-in", "cpu")

    def load(self) -> None:
        """Nothing to load."""

    def score_sync(self, batch: Sequence[np.ndarray]) -> list[QualityScore]:
        if any(audio[0] < 0 for audio in batch):
            raise RuntimeError("no quality today")
        return [QualityScore(1.0 + float(a[0]), 2.0, 3.0, 4.0) for a in batch]


def clip(value: float) -> np.ndarray:
    return np.full(16_000, value, dtype=np.float32)


@pytest.fixture
async def service() -> AsyncIterator[SignalService]:
    signals = SignalService(
        speaker=AngleEncoder(), quality=LoudnessScorer(),
        store=SpeakerReferenceStore(max_entries=8, max_bytes=1 << 20, ttl_s=60.0),
        settings=ServerConfig(signal_max_batch_size=8, max_queue=64),
    )
    signals.start()
    yield signals
    await signals.close(timeout_s=5)


async def test_each_item_gets_its_own_signals_and_an_inline_reference_is_kept(service: SignalService) -> None:
    registered = _direction(clip(0.0))
    service.store.put("a" * 64, registered)
    inline_audio = clip(1.0)
    inline_id = reference_id(inline_audio)
    items = [
        SignalItem(clip(0.5), SignalJob("a" * 64, reference_embedding=registered)),
        SignalItem(clip(2.0), SignalJob(quality=True)),
        SignalItem(clip(1.2), SignalJob(inline_id, reference_audio=inline_audio, quality=True)),
    ]
    await service.measure(items)
    first, second, third = items
    assert first.speaker_similarity == pytest.approx(float(np.cos(0.5))) and first.quality is None
    assert second.speaker_similarity is None and second.quality_mos == pytest.approx(3.0)
    assert third.speaker_similarity == pytest.approx(cosine_similarity(_direction(clip(1.2)), _direction(inline_audio)))
    assert third.quality_mos == pytest.approx(2.2)
    kept = service.store.get(inline_id)
    assert kept is not None and np.allclose(kept, _direction(inline_audio))
    assert third.fields() == {"speaker_similarity": third.speaker_similarity, "speaker_reference_id": inline_id,
                              "dnsmos_ovrl": pytest.approx(2.2), "dnsmos_sig": 2.0, "dnsmos_bak": 3.0,
                              "dnsmos_p808": 4.0}
    assert first.error is second.error is third.error is None


async def test_a_failed_model_call_is_every_measured_items_error(service: SignalService) -> None:
    items = [SignalItem(clip(-1.0), SignalJob(quality=True)), SignalItem(clip(1.0), SignalJob(quality=True))]
    task = service.start_measuring(items, timeout_s=10)
    assert task is not None
    await task
    assert all(isinstance(item.error, SignalError) for item in items)
    assert all(item.quality is None for item in items)
    assert service.start_measuring([], timeout_s=10) is None


async def test_a_measurement_past_the_timeout_is_a_504_on_each_item(service: SignalService) -> None:
    items = [SignalItem(clip(1.0), SignalJob(quality=True))]
    task = service.start_measuring(items, timeout_s=0.0)
    assert task is not None
    await task
    assert isinstance(items[0].error, RequestTimeoutError)
