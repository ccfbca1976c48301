"""Batched decoding on the CPU gives the transcripts of one utterance at a time, on the real tiny.en weights."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from audio_reward.scorer_server.engines import EngineConfig, Transcription, TranscriptionInput
from audio_reward.scorer_server.engines.faster_whisper_engine import FasterWhisperEngine


@pytest.fixture(scope="module")
def engines() -> Iterator[dict[str, FasterWhisperEngine]]:
    loaded = {}
    for name, batched in (("one", False), ("batched", None)):  # None: the default, which batches
        options = {} if batched is None else {"batched": batched}
        engine = FasterWhisperEngine(EngineConfig(model="tiny.en", cpu_threads=2, options=options))
        engine.load()
        loaded[name] = engine
    yield loaded
    for engine in loaded.values():
        engine.close()


def test_batched_and_one_at_a_time_transcripts_are_equal_on_the_test_speech(
        engines: dict[str, FasterWhisperEngine], sentences_16k: list[np.ndarray]) -> None:
    items = [TranscriptionInput(audio) for audio in sentences_16k]
    alone = [engines["one"].transcribe_batch_sync([item])[0] for item in items]
    together = engines["batched"].transcribe_batch_sync(items)
    assert [t.text for t in together] == [t.text for t in alone]
    assert [t.num_tokens for t in together] == [t.num_tokens for t in alone]
    assert all(t.text for t in alone)


def test_the_cpu_default_batches_and_the_option_turns_it_off(engines: dict[str, FasterWhisperEngine]) -> None:
    default = engines["batched"]
    assert default.prefers_batches and default.info.extra["batched_decoding"] == "true"
    assert not engines["one"].prefers_batches and engines["one"].info.extra["batched_decoding"] == "false"


@pytest.mark.parametrize(("options", "line"), [
    ({}, "faster-whisper on cpu decodes batches: one encoder pass and one decode per scheduler batch"),
    ({"batched": False}, "faster-whisper on cpu decodes one utterance per call (--engine-option batched=false)"),
])
def test_the_choice_is_logged_at_load(caplog: pytest.LogCaptureFixture, options: dict[str, bool], line: str) -> None:
    engine = FasterWhisperEngine(EngineConfig(model="tiny.en", cpu_threads=2, options=options))
    with caplog.at_level(logging.INFO, logger="audio_reward.scorer_server.engines.faster_whisper_engine"):
        engine.load()
    engine.close()
    assert line in caplog.text


def test_a_call_on_an_idle_model_goes_in_one_hop_and_one_behind_a_busy_model_splits_with_the_same_transcripts(
        engines: dict[str, FasterWhisperEngine], sentences_16k: list[np.ndarray],
        monkeypatch: pytest.MonkeyPatch) -> None:
    engine = engines["batched"]
    items = [TranscriptionInput(audio) for audio in sentences_16k[:4]]
    expected = [t.text for t in engine.transcribe_batch_sync(items[:2]) + engine.transcribe_batch_sync(items[2:])]
    whole: list[int] = []
    features_on: list[str] = []
    batch_sync, prepare = engine.transcribe_batch_sync, engine.prepare_sync

    def spy_whole(batch: list[TranscriptionInput]) -> list[Transcription]:
        whole.append(len(batch))
        return batch_sync(batch)

    def spy_features(batch: list[TranscriptionInput]) -> object:
        features_on.append(threading.current_thread().name.split("_")[0])
        return prepare(batch)

    monkeypatch.setattr(engine, "transcribe_batch_sync", spy_whole)
    monkeypatch.setattr(engine, "prepare_sync", spy_features)

    async def two_at_once() -> list[list[str]]:
        done = await asyncio.gather(engine.transcribe(items[:2]), engine.transcribe(items[2:]))
        return [[t.text for t in out] for out in done]

    first, second = asyncio.run(two_at_once())
    assert first + second == expected
    # The first found the model idle: one hop to the model thread; the second came while it ran: its features
    # were computed on the feature pool meanwhile.
    assert whole == [2]
    assert sorted(features_on) == ["asr", "asr-features"]
