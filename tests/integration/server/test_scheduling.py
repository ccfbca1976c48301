"""The schedulers: straight-through for self-scheduling engines, pipelined micro-batches for the others."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np
import pytest

from audio_reward.protocol import encode_f32
from audio_reward.scorer_server.config import ServerConfig
from audio_reward.scorer_server.engines import (
    ASREngine,
    EngineInfo,
    ThreadedEngine,
    Transcription,
    TranscriptionInput,
)
from audio_reward.scorer_server.service.scheduler import (
    MicroBatchScheduler,
    PassThroughScheduler,
    SchedulerFullError,
    scheduler_for,
)
from tests.testkit.server import inprocess_server

SECOND = 16_000


def clip(seconds: float, tag: int = 0) -> TranscriptionInput:
    audio = np.zeros(int(seconds * SECOND), dtype=np.float32)
    audio[0] = tag
    return TranscriptionInput(audio)


class ContinuousEngine(ASREngine):
    """Stands in for vLLM: each utterance takes ``seconds_per_audio_s`` × its length, ``capacity`` at once."""

    def __init__(self, capacity: int = 4, seconds_per_audio_s: float = 0.05) -> None:
        self.info = EngineInfo("continuous", "stand-in", device="cuda")
        self.capacity = capacity
        self.scale = seconds_per_audio_s
        self.in_engine = 0
        self.most_in_engine = 0
        self.calls = 0
        self.cancelled = 0
        self.changed = asyncio.Event()

    async def until(self, condition: Any) -> None:
        """Returns once ``condition()`` holds; re-checked each time an utterance enters or leaves the engine."""
        while not condition():
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), 10)

    @property
    def schedules_itself(self) -> bool:
        return True

    @property
    def max_concurrency(self) -> int:
        return self.capacity

    def load(self) -> None:
        """Nothing to load."""

    def warmup(self) -> None:
        """Nothing to warm up."""

    async def transcribe(self, batch: Sequence[TranscriptionInput]) -> list[Transcription]:
        self.calls += 1
        self.in_engine += len(batch)
        self.most_in_engine = max(self.most_in_engine, self.in_engine)
        self.changed.set()
        try:
            await asyncio.sleep(max(item.duration_s for item in batch) * self.scale)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.in_engine -= len(batch)
            self.changed.set()
        return [Transcription(f"{item.duration_s:g}") for item in batch]


async def test_short_clips_behind_a_long_one_finish_at_their_own_latency() -> None:
    engine = ContinuousEngine(capacity=16, seconds_per_audio_s=0.05)
    dispatcher = scheduler_for(engine, ServerConfig(max_batch_size=16, max_wait_ms=10, max_queue=64))
    assert isinstance(dispatcher, PassThroughScheduler) and dispatcher.max_in_flight == 16
    dispatcher.start()
    started = time.monotonic()
    finished: dict[int, float] = {}

    async def one(i: int, seconds: float) -> str:
        out = await dispatcher.submit_many([clip(seconds)])[0]
        finished[i] = time.monotonic() - started
        return out.text

    texts = await asyncio.gather(one(0, 20.0), *(one(i, 1.0) for i in range(1, 12)))
    assert texts == ["20", *["1"] * 11]  # each request got its own transcript
    assert finished[0] >= 0.95  # 20 s of audio at 0.05 s per second
    assert max(finished[i] for i in range(1, 12)) < 0.5  # the 0.05 s clips never waited for the long one
    assert engine.calls == 12  # one utterance per engine call: the engine batches them itself
    await dispatcher.close()


async def test_the_engine_sees_every_request_up_to_its_cap_and_the_rest_wait() -> None:
    engine = ContinuousEngine(capacity=5, seconds_per_audio_s=0.05)
    dispatcher = PassThroughScheduler(engine.transcribe, max_in_flight=5, max_queue=100)
    futures = dispatcher.submit_many([clip(1.0, i) for i in range(12)])
    await engine.until(lambda: engine.in_engine == 5)
    assert engine.in_engine == 5 and dispatcher.in_flight == 5 and dispatcher.queued == 7
    await asyncio.gather(*futures)
    assert engine.most_in_engine == 5 and engine.calls == 12 and dispatcher.idle
    await dispatcher.close()


async def test_a_caller_that_gives_up_is_dropped_or_cancelled_in_the_engine() -> None:
    engine = ContinuousEngine(capacity=1, seconds_per_audio_s=1.0)
    dispatcher = PassThroughScheduler(engine.transcribe, max_in_flight=1, max_queue=10)
    running, waiting = dispatcher.submit_many([clip(5.0), clip(5.0)])
    await engine.until(lambda: engine.in_engine == 1)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.gather(running, waiting), 0.05)
    await engine.until(lambda: engine.in_engine == 0)  # the cancellation reached the engine
    assert engine.cancelled == 1 and engine.calls == 1  # the waiting one never reached the engine
    assert dispatcher.idle
    await dispatcher.close()


async def test_self_scheduling_queue_refuses_past_max_queue_with_a_retry_hint() -> None:
    engine = ContinuousEngine(capacity=1, seconds_per_audio_s=0.2)
    dispatcher = PassThroughScheduler(engine.transcribe, max_in_flight=1, max_queue=2)
    futures = dispatcher.submit_many([clip(1.0) for _ in range(3)])  # one runs, two wait
    with pytest.raises(SchedulerFullError) as info:
        dispatcher.submit_many([clip(1.0)])
    assert info.value.retry_after_s >= 1
    await asyncio.gather(*futures)
    await dispatcher.close()


def test_self_scheduling_engine_through_the_server_keeps_429_and_the_timeout() -> None:
    engine = ContinuousEngine(capacity=1, seconds_per_audio_s=2.0)
    body = {"protocol_version": "1", "waveform_f32_base64": encode_f32(np.zeros(SECOND, dtype=np.float32)),
            "sample_rate": SECOND, "prompt": "2"}
    with inprocess_server(engine, max_queue=1, request_timeout_s=1.0) as (url, app):
        assert httpx.get(f"{url}/v1/info").json()["batching"]["scheduler"] == "engine"

        engine_client = app.state.parts.engine_client

        async def eventually(condition: Any) -> None:
            # The server runs on its own loop in another thread: its state is watched, not awaited.
            deadline = time.monotonic() + 10
            while not condition():
                assert time.monotonic() < deadline
                await asyncio.sleep(0.005)

        async def burst() -> list[httpx.Response]:
            async with httpx.AsyncClient(timeout=30) as client:
                first = asyncio.create_task(client.post(f"{url}/v1/score", json=body))
                await eventually(lambda: engine.in_engine == 1)
                second = asyncio.create_task(client.post(f"{url}/v1/score", json=body))
                await eventually(lambda: engine_client.queued == 1)
                third = await client.post(f"{url}/v1/score", json=body)
                return [await first, await second, third]

        first, second, third = asyncio.run(burst())
    assert third.status_code == 429 and int(third.headers["Retry-After"]) >= 1
    assert first.status_code == 504 and second.status_code == 504  # 2 s each in the engine, 1 s allowed
    assert engine.cancelled >= 1  # the timed-out request was cancelled inside the engine


class SplitEngine(ThreadedEngine):
    """Records when each batch is prepared and transcribed; a batch holding a clip tagged -1 fails."""

    splits_batches = True

    def __init__(self, run_s: float = 0.2) -> None:
        super().__init__(workers=1, feature_workers=2)
        self.info = EngineInfo("split", "stand-in", device="cuda")
        self.run_s = run_s
        self.events: list[tuple[str, int, float]] = []
        self.batches: list[list[int]] = []
        self._lock = threading.Lock()

    def load(self) -> None:
        """Nothing to load."""

    def _tags(self, batch: Sequence[TranscriptionInput]) -> list[int]:
        return [int(item.audio[0]) for item in batch]

    def prepare_sync(self, batch: Sequence[TranscriptionInput]) -> Any:
        with self._lock:
            self.events.append(("prepare", self._tags(batch)[0], time.monotonic()))
        time.sleep(0.05)
        return self._tags(batch)

    def transcribe_prepared_sync(self, batch: Sequence[TranscriptionInput], prepared: Any) -> list[Transcription]:
        with self._lock:
            self.events.append(("run-start", prepared[0], time.monotonic()))
            self.batches.append(list(prepared))
        time.sleep(self.run_s)
        with self._lock:
            self.events.append(("run-end", prepared[0], time.monotonic()))
        if -1 in prepared:
            raise RuntimeError("poisoned batch")
        return [Transcription(str(tag)) for tag in prepared]

    def transcribe_batch_sync(self, batch: Sequence[TranscriptionInput]) -> list[Transcription]:
        return self.transcribe_prepared_sync(batch, self.prepare_sync(batch))


async def test_two_batches_in_flight_overlap_features_with_the_engine_and_keep_order_and_failures() -> None:
    engine = SplitEngine(run_s=0.2)
    scheduler = scheduler_for(engine, ServerConfig(max_batch_size=2, max_wait_ms=0, max_queue=100))
    assert isinstance(scheduler, MicroBatchScheduler) and scheduler.max_batches_in_flight == 2  # the default on a GPU
    scheduler.start()
    tags = [1, 2, 3, -1, 5, 6]
    futures = scheduler.submit_many([clip(1.0, t) for t in tags])
    outcomes = await asyncio.gather(*futures, return_exceptions=True)
    assert [o.text if isinstance(o, Transcription) else "failed" for o in outcomes] == \
        ["1", "2", "failed", "failed", "5", "6"]  # order kept; the failing batch fails only its own items
    first_end = next(t for kind, tag, t in engine.events if kind == "run-end")
    second_prepared = [t for kind, tag, t in engine.events if kind == "prepare"][1]
    assert second_prepared < first_end  # the next batch's features were ready while the engine ran
    runs = [(kind, t) for kind, _, t in engine.events if kind.startswith("run")]
    assert all(a[0] != b[0] for a, b in itertools.pairwise(runs))  # one batch on the engine at a time
    await scheduler.close()
    engine.close()


async def test_one_batch_in_flight_on_the_cpu_as_before() -> None:
    engine = SplitEngine(run_s=0.05)
    engine.info = EngineInfo("split", "stand-in", device="cpu")
    scheduler = scheduler_for(engine, ServerConfig(max_batch_size=2, max_wait_ms=0, max_queue=100))
    assert isinstance(scheduler, MicroBatchScheduler) and scheduler.max_batches_in_flight == 1
    scheduler.start()
    await asyncio.gather(*scheduler.submit_many([clip(1.0, t) for t in range(4)]))
    prepares = [t for kind, _, t in engine.events if kind == "prepare"]
    first_end = next(t for kind, _, t in engine.events if kind == "run-end")
    assert prepares[1] > first_end  # nothing runs ahead on the CPU
    await scheduler.close()
    engine.close()


class RecordingEngine(ThreadedEngine):
    def __init__(self) -> None:
        super().__init__(workers=1)
        self.info = EngineInfo("recording", "stand-in", device="cuda")
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.calls: list[list[float]] = []

    def load(self) -> None:
        """Nothing to load."""

    async def holding(self) -> None:
        """Returns once the engine is inside a call."""
        assert await asyncio.to_thread(self.entered.wait, 10)

    def transcribe_batch_sync(self, batch: Sequence[TranscriptionInput]) -> list[Transcription]:
        self.entered.set()
        self.gate.wait(10)
        self.calls.append([item.duration_s for item in batch])
        return [Transcription("") for _ in batch]


async def test_a_batch_is_bounded_by_audio_seconds_and_always_takes_the_oldest() -> None:
    engine = RecordingEngine()
    scheduler = MicroBatchScheduler(engine.transcribe, max_batch_size=8, max_wait_s=0.0, max_batch_audio_s=10.0)
    scheduler.start()
    held = scheduler.submit_many([clip(1.0)])
    await engine.holding()  # the engine holds the first call
    # An old long clip and many short new ones: the long one goes in the next batch, not last.
    futures = scheduler.submit_many([clip(9.0)] + [clip(s) for s in (2.0, 2.0, 3.0, 3.0, 1.0, 1.0, 4.0)])
    engine.gate.set()
    await asyncio.gather(*held, *futures)
    assert engine.calls[0] == [1.0]
    assert 9.0 in engine.calls[1]
    assert all(sum(call) <= 10.0 for call in engine.calls)
    assert sorted(s for call in engine.calls[1:] for s in call) == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 9.0]
    assert engine.calls[2] == sorted(engine.calls[2])  # each call ordered by length
    await scheduler.close()
    engine.close()


async def test_a_lone_request_goes_at_once_and_an_arriving_one_is_waited_for() -> None:
    engine = RecordingEngine()
    engine.gate.set()
    scheduler = MicroBatchScheduler(engine.transcribe, max_batch_size=8, max_wait_s=1.0)
    scheduler.start()
    t0 = time.monotonic()
    await scheduler.submit_many([clip(1.0)])[0]
    assert time.monotonic() - t0 < 0.5  # no request on its way: no wait for a batch to fill

    on_its_way = asyncio.Event()

    async def late_arrival() -> asyncio.Future[Transcription]:
        with scheduler.arriving():
            on_its_way.set()
            await asyncio.sleep(0.1)  # being read and decoded
            return scheduler.submit_many([clip(2.0)])[0]

    arriving = asyncio.create_task(late_arrival())
    await on_its_way.wait()
    first = scheduler.submit_many([clip(3.0)])[0]
    await asyncio.gather(first, await arriving)
    assert engine.calls[-1] == [2.0, 3.0]  # the arriving request joined the batch
    await scheduler.close()
    engine.close()
