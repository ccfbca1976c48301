"""The micro-batch scheduler on its own: batch formation, ordering, cancellation, drain."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import numpy as np
import pytest

from audio_reward.scorer_server.engines import (
    EngineInfo,
    ThreadedEngine,
    Transcription,
    TranscriptionInput,
)
from audio_reward.scorer_server.errors import ShuttingDownError
from audio_reward.scorer_server.service.scheduler import (
    BatchStats,
    MicroBatchScheduler,
    RefusalTurns,
    SchedulerFullError,
)


class RecordingEngine(ThreadedEngine):
    """Transcribes each utterance as its sample count; the first call waits for ``gate``.

    ``entered`` is set once a call has started: the engine holds that batch.
    """

    def __init__(self) -> None:
        super().__init__(workers=1)
        self.info = EngineInfo("recording", "recording")
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.calls: list[list[int]] = []

    async def holding(self) -> None:
        """Returns once the engine is inside a call."""
        assert await asyncio.to_thread(self.entered.wait, 10)

    def load(self) -> None:
        pass

    def transcribe_batch_sync(self, batch: Sequence[TranscriptionInput]) -> list[Transcription]:
        self.entered.set()
        self.gate.wait(10)
        self.calls.append([item.audio.shape[0] for item in batch])
        return [Transcription(str(item.audio.shape[0])) for item in batch]


def utterance(samples: int) -> TranscriptionInput:
    return TranscriptionInput(np.zeros(samples, dtype=np.float32))


async def test_queued_items_form_length_sorted_batches_of_bounded_size() -> None:
    engine = RecordingEngine()
    stats: list[BatchStats] = []
    scheduler = MicroBatchScheduler(engine.transcribe, max_batch_size=3, max_wait_s=0.0, max_queue=100,
                                    on_batch=stats.append)
    scheduler.start()
    first = scheduler.submit_many([utterance(100)])
    await engine.holding()  # the worker holds the first item in the engine
    lengths = [900, 300, 700, 100, 500, 200]
    futures = scheduler.submit_many([utterance(n) for n in lengths])
    engine.gate.set()
    results = await asyncio.gather(*first, *futures)
    assert [r.text for r in results] == [str(n) for n in [100, *lengths]]  # each future got its own result
    # Each batch takes the oldest waiting item (900) and the items closest to it in length from the whole queue.
    assert engine.calls == [[100], [500, 700, 900], [100, 200, 300]]
    assert [s.size for s in stats] == [1, 3, 3] and not any(s.failed for s in stats)
    await scheduler.close()


async def test_cancelled_requests_are_not_transcribed() -> None:
    engine = RecordingEngine()
    scheduler = MicroBatchScheduler(engine.transcribe, max_batch_size=8, max_wait_s=0.0)
    scheduler.start()
    held = scheduler.submit_many([utterance(1)])
    await engine.holding()
    keep, drop = scheduler.submit_many([utterance(2), utterance(3)])
    drop.cancel()
    engine.gate.set()
    await asyncio.gather(*held, keep)
    assert engine.calls == [[1], [2]]
    await scheduler.close()


async def test_full_queue_and_closed_scheduler_refuse_work() -> None:
    engine = RecordingEngine()
    scheduler = MicroBatchScheduler(engine.transcribe, max_batch_size=1, max_wait_s=0.0, max_queue=2)
    scheduler.start()
    futures = scheduler.submit_many([utterance(1)])
    await engine.holding()
    futures += scheduler.submit_many([utterance(2), utterance(3)])
    with pytest.raises(SchedulerFullError) as info:
        scheduler.submit_many([utterance(4)])
    assert info.value.retry_after_s >= 1
    engine.gate.set()
    closing = asyncio.create_task(scheduler.close(timeout_s=10))
    await asyncio.sleep(0)
    with pytest.raises(ShuttingDownError):
        scheduler.submit_many([utterance(5)])
    await closing
    assert [f.result().text for f in futures] == ["1", "2", "3"]  # queued work was drained, not dropped


def test_refused_requests_take_successive_turns_bounded_and_forgotten_when_idle() -> None:
    turns = RefusalTurns()
    # Three requests that would all fit from t=10 s, each 2 s of engine time: they come back 2 s apart.
    assert [turns.next(10.0, 2.0, limit_s=5.0) for _ in range(3)] == [10.0, 12.0, 14.0]
    # One that fits later than the turns given out keeps its own fit.
    assert turns.next(20.0, 1.0, limit_s=5.0) == 20.0
    # No turn lies more than the limit past its fit, however many turns were given out before it.
    for _ in range(10):
        turns.next(21.0, 2.0, limit_s=5.0)
    assert turns.next(21.0, 2.0, limit_s=5.0) == 26.0
    turns.forget()
    assert turns.next(3.0, 2.0, limit_s=5.0) == 3.0
