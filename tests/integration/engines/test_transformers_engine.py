"""The transformers engine on real weights (Whisper base, converted exactly) and on a tiny random Qwen3-ASR."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from audio_reward.scorer_server.engines import (
    EngineConfig,
    TranscriptionInput,
    create_engine,
    max_new_tokens_for,
)
from audio_reward.scorer_server.engines.qwen3_asr import LANGUAGE_PREFIX_TOKENS
from audio_reward.scoring import get_normalizer
from tests.testkit.speech import SENTENCES


@pytest.fixture(scope="module")
def engines():  # type: ignore[no-untyped-def]
    hf = create_engine("transformers", EngineConfig(model="base", max_batch_size=8))
    fw = create_engine("faster-whisper", EngineConfig(model="base", compute_type="float32"))
    hf.load()
    fw.load()
    yield hf, fw
    hf.close()
    fw.close()


def test_transcripts_equal_faster_whisper_on_the_same_weights(engines, sentences_16k: list[np.ndarray]) -> None:  # type: ignore[no-untyped-def]
    """Same converted weights, batched in one call: the normalized transcripts agree with faster-whisper's.

    The raw strings may differ in case only where the two log-Mel front ends
    (transformers' and faster-whisper's) differ in the 30 s padding; decoding
    of identical features is checked token for token in test_convert.py.
    """
    hf, fw = engines
    batch = [TranscriptionInput(a, "en") for a in sentences_16k]
    ours = hf.transcribe_batch_sync(batch)
    theirs = fw.transcribe_batch_sync(batch)
    norm = get_normalizer("basic")
    assert [norm.normalize(t.text, "en") for t in ours] == [norm.normalize(t.text, "en") for t in theirs]
    for out, item in zip(ours, batch, strict=True):
        assert out.language == "en" and 0 < out.num_tokens <= max_new_tokens_for(item.duration_s)
    assert norm.normalize(ours[0].text, "en") == norm.normalize(SENTENCES[0], "en")
    assert hf.info.engine == "transformers" and hf.info.weights_sha256 == fw.info.weights_sha256
    assert hf.info.compute_type == "float32" and hf.info.extra["architecture"] == "whisper"


def test_language_detected_when_not_given_and_batch_order_kept(engines, sentences_16k: list[np.ndarray]) -> None:  # type: ignore[no-untyped-def]
    hf, _ = engines
    batch = [TranscriptionInput(sentences_16k[1], None), TranscriptionInput(sentences_16k[0], "en")]
    out = hf.transcribe_batch_sync(batch)
    assert [o.language for o in out] == ["en", "en"]
    assert "fox" in out[1].text.lower() and "reinforcement" in out[0].text.lower()


def test_audio_longer_than_one_window_is_read_whole(engines, sentences_16k: list[np.ndarray]) -> None:  # type: ignore[no-untyped-def]
    hf, _ = engines
    gap = np.zeros(16000 * 29, dtype=np.float32)
    long = np.concatenate([sentences_16k[0], gap, sentences_16k[2]])  # second sentence lies in window two
    (out,) = hf.transcribe_batch_sync([TranscriptionInput(long, "en")])
    text = out.text.lower()
    assert "fox" in text and "seashore" in text.replace(" ", "")


def test_bad_settings_are_refused_with_a_clear_message() -> None:
    with pytest.raises(ValueError, match="greedily"):
        create_engine("transformers", EngineConfig(model="tiny.en", beam_size=4)).load()
    with pytest.raises(ValueError, match="compute type 'int8'"):
        create_engine("transformers", EngineConfig(model="tiny.en", compute_type="int8")).load()


def test_tiny_random_qwen3_asr_end_to_end(tiny_qwen3_asr: Path) -> None:
    """Mechanics only (random weights, garbage text): loading, batched left-padded prompts, caps, languages."""
    engine = create_engine("transformers", EngineConfig(model=str(tiny_qwen3_asr), max_batch_size=4))
    engine.load()
    try:
        assert engine.info.extra["architecture"] == "qwen3_asr" and engine.info.compute_type == "float32"
        rng = np.random.default_rng(0)
        batch = [TranscriptionInput((0.1 * rng.standard_normal(16000 * s)).astype(np.float32), lang)
                 for s, lang in ((1, "en"), (4, None), (2, "zh"))]
        together = engine.transcribe_batch_sync(batch)
        alone = [engine.transcribe_batch_sync([item])[0] for item in batch]
        # Left padding and per-row caps make a row's result independent of its batch-mates.
        assert together == alone
        for item, out in zip(batch, together, strict=True):
            cap = max_new_tokens_for(item.duration_s) + (
                LANGUAGE_PREFIX_TOKENS if item.language is None else 0
            )
            assert 0 < out.num_tokens <= cap
            assert isinstance(out.text, str)
        assert together[0].language == "en" and together[2].language == "zh"
        processor = engine._backend.processor  # type: ignore[union-attr]
        prompt = processor.apply_transcription_request(audio=[batch[0].audio], language=["en"], tokenize=False)[0]
        assert prompt.endswith("<|im_start|>assistant\nlanguage English<asr_text>")
    finally:
        engine.close()
