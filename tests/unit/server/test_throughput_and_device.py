"""The engine's measured throughput (``/v1/info``'s ``throughput``) and the device ``auto`` picks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import numpy as np
import pytest

from audio_reward.scorer_server.config import ServerConfig
from audio_reward.scorer_server.devices import DevicePick, cuda_devices, pick_device
from audio_reward.scorer_server.engines import EngineInfo, ThreadedEngine, Transcription, TranscriptionInput
from audio_reward.scorer_server.service.scheduler import MicroBatchScheduler, PassThroughScheduler, Throughput

CALL_S = 0.2


class SteadyEngine(ThreadedEngine):
    """Takes ``CALL_S`` of wall time per call, whatever the batch holds (a device that batches for free)."""

    def __init__(self, workers: int = 1) -> None:
        super().__init__(workers=workers)
        self.info = EngineInfo("steady", "steady")

    def load(self) -> None:
        pass

    def transcribe_batch_sync(self, batch: Sequence[TranscriptionInput]) -> list[Transcription]:
        time.sleep(CALL_S)
        return [Transcription("x") for _ in batch]


def seconds_of_audio(seconds: float) -> TranscriptionInput:
    return TranscriptionInput(np.zeros(int(seconds * 16_000), dtype=np.float32))


async def test_throughput_is_audio_per_busy_second_and_idle_time_does_not_count() -> None:
    engine = SteadyEngine()
    scheduler = MicroBatchScheduler(engine.transcribe, max_batch_size=4, max_wait_s=0.0)
    scheduler.start()
    assert scheduler.throughput() == Throughput(0.0, 0.0, 0) and scheduler.throughput().audio_s_per_s is None
    await asyncio.gather(*scheduler.submit_many([seconds_of_audio(5.0) for _ in range(4)]))  # one call: 20 s
    first = scheduler.throughput()
    assert first.utterances == 4 and first.audio_s == pytest.approx(20.0)
    assert CALL_S <= first.busy_s < CALL_S + 0.15
    await asyncio.sleep(0.5)  # idle: the engine's rate is not diluted by time nobody asked it anything
    assert scheduler.throughput().busy_s == first.busy_s
    await asyncio.gather(*scheduler.submit_many([seconds_of_audio(2.5)]))
    both = scheduler.throughput()
    assert both.utterances == 5 and both.audio_s == pytest.approx(22.5)
    assert 2 * CALL_S <= both.busy_s < 2 * CALL_S + 0.3
    assert both.audio_s_per_s == pytest.approx(22.5 / both.busy_s)
    await scheduler.close()


async def test_an_engine_running_calls_at_once_counts_its_busy_time_once() -> None:
    # A continuous-batching engine (vLLM) takes each utterance as its own call, many in flight at once: the
    # rate is the audio over the stretch they covered together, not the sum of each call's time.
    engine = SteadyEngine(workers=8)  # a device that runs eight calls side by side
    scheduler = PassThroughScheduler(engine.transcribe, max_in_flight=8, max_queue=64)
    scheduler.start()
    await asyncio.gather(*scheduler.submit_many([seconds_of_audio(1.0) for _ in range(8)]))
    measured = scheduler.throughput()
    assert measured.utterances == 8 and CALL_S <= measured.busy_s < 2 * CALL_S
    assert measured.audio_s_per_s is not None and measured.audio_s_per_s > 8 / (2 * CALL_S)
    await scheduler.close()


def test_the_default_device_is_auto() -> None:
    assert ServerConfig().device == "auto"


@pytest.mark.skipif(cuda_devices("ctranslate2") > 0, reason="this machine has a GPU: auto picks cuda here")
def test_auto_picks_the_cpu_where_the_engines_library_sees_no_gpu_and_says_so() -> None:
    picked = pick_device("faster-whisper", "auto")
    assert picked == DevicePick("cpu", "auto: ctranslate2 sees no CUDA device")
    assert picked.describe() == "cpu (auto: ctranslate2 sees no CUDA device)"


def test_a_given_device_or_an_engine_of_unknown_library_is_left_as_it_is() -> None:
    assert pick_device("faster-whisper", "cuda:1") == DevicePick("cuda:1")
    assert pick_device("faster-whisper", "cpu").describe() == "cpu"
    assert pick_device("instant", "auto") == DevicePick("auto")  # a test engine decides itself
