"""The signal models on their real weights: a batch gives what each package computes one clip at a time.

resemblyzer's ``VoiceEncoder.embed_utterance`` and speechmos's ``dnsmos.run`` are the references; the
hub-model path (transformers ``WavLMForXVector``) runs on a tiny random checkpoint built from its config.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from audio_reward.scorer_server.signals.p808 import SharedWindowP808
from audio_reward.scorer_server.signals.p835 import SharedWindowP835
from audio_reward.scorer_server.signals.quality import DnsmosScorer, create_quality_scorer
from audio_reward.scorer_server.signals.speaker import (
    ResemblyzerEncoder,
    WavLMXVectorEncoder,
    cosine_similarity,
    create_speaker_encoder,
)
from tests.testkit.speech import SENTENCES, speech_16k, tone


@pytest.fixture(scope="module")
def clips() -> list[np.ndarray]:
    return [speech_16k(SENTENCES[0]), speech_16k(SENTENCES[1])[: 16_000 * 2], tone(1.3, hz=300.0)]


@pytest.fixture(scope="module")
def resemblyzer_encoder() -> ResemblyzerEncoder:
    pytest.importorskip("resemblyzer", reason="the signals extra (resemblyzer) is not installed")
    encoder = create_speaker_encoder("resemblyzer")
    assert isinstance(encoder, ResemblyzerEncoder)
    encoder.load()
    return encoder


def test_resemblyzer_batch_equals_embed_utterance_clip_by_clip(resemblyzer_encoder: ResemblyzerEncoder,
                                                              clips: list[np.ndarray]) -> None:
    from resemblyzer import preprocess_wav

    speech = clips[:2]
    batch = resemblyzer_encoder.embed_sync(speech)
    assert batch.shape == (len(speech), 256)
    for row, clip in zip(batch, speech, strict=True):
        alone = resemblyzer_encoder._encoder.embed_utterance(preprocess_wav(clip))
        np.testing.assert_allclose(row, alone, atol=1e-5)
        assert np.linalg.norm(row) == pytest.approx(1.0, abs=1e-5)


def test_audio_without_voice_embeds_as_the_zero_vector(resemblyzer_encoder: ResemblyzerEncoder,
                                                        clips: list[np.ndarray]) -> None:
    # Silence, and a tone that resemblyzer's voice detection trims away entirely.
    silent, hum, speech = resemblyzer_encoder.embed_sync([np.zeros(16_000 * 2, dtype=np.float32), clips[2], clips[0]])
    assert not silent.any() and not hum.any()
    assert cosine_similarity(silent, speech) == 0.0


@pytest.fixture(scope="module")
def dnsmos_scorer() -> DnsmosScorer:
    pytest.importorskip("speechmos", reason="the signals extra (speechmos) is not installed")
    scorer = create_quality_scorer("dnsmos", cpu_threads=1)
    assert isinstance(scorer, DnsmosScorer)
    scorer.load()
    return scorer


def test_dnsmos_batch_equals_speechmos_clip_by_clip(dnsmos_scorer: DnsmosScorer, clips: list[np.ndarray]) -> None:
    from speechmos import dnsmos

    long = np.concatenate([clips[0]] * 4)  # 12 s: several windows of its own
    # 4.4 s, doubled to 17.7 s: speechmos's float end of its window 7 falls one sample short, so it is skipped
    rounding = speech_16k(SENTENCES[3])
    batch = [*clips, long, rounding]
    for clip, score in zip(batch, dnsmos_scorer.score_sync(batch), strict=True):
        reference = dnsmos.run(clip, 16_000)
        assert score.ovrl == pytest.approx(reference["ovrl_mos"], abs=1e-4)
        assert score.sig == pytest.approx(reference["sig_mos"], abs=1e-4)
        assert score.bak == pytest.approx(reference["bak_mos"], abs=1e-4)
        assert score.p808 == pytest.approx(reference["p808_mos"], abs=1e-4)


def test_dnsmos_p808_features_of_a_clip_equal_speechmos_window_by_window(dnsmos_scorer: DnsmosScorer) -> None:
    clip, starts = dnsmos_scorer._clip(speech_16k(SENTENCES[3]))
    length = int(9.01 * 16_000)
    assert len(starts) > 1
    for start, features in zip(starts, dnsmos_scorer._p808_inputs(clip, starts)[0], strict=True):
        alone = dnsmos_scorer._dnsmos.audio_melspec(audio=clip[start:start + length][:-160])
        np.testing.assert_allclose(features, alone, atol=1e-5)


def test_dnsmos_p835_shared_windows_equal_the_whole_model_window_by_window(dnsmos_scorer: DnsmosScorer) -> None:
    """The cut model's raw scores against speechmos's whole sig_bak_ovr.onnx on each window: a clip of 7
    windows, a 40 s one whose convolutions run in several segments, and clips whose doubled copies repeat the
    frames' grid (one of Qwen3-TTS's lengths, 55 codec frames of 1280 samples; one 80 samples off it, whose
    pairs of copies do; and one an odd number of frames long), so the convolutions run over one period."""
    import onnxruntime as ort
    from speechmos import dnsmos

    from audio_reward.scorer_server.signals.p835 import SEGMENT_FRAMES, repeat_period

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    whole = ort.InferenceSession(str(Path(dnsmos.__file__).parent / "dnsmos_models" / "sig_bak_ovr.onnx"),
                                 options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    long = np.concatenate([speech_16k(text) for text in SENTENCES] * 3)
    long = (long + 0.01 * rng.standard_normal(len(long))).astype(np.float32)
    codec_frames = speech_16k(SENTENCES[3])[:55 * 1280]
    half_frame_off = speech_16k(SENTENCES[3])[:50 * 1280 + 80]
    odd_frames = speech_16k(SENTENCES[3])[:441 * 160]
    for audio, period in ((speech_16k(SENTENCES[3]), 2 * 70_800), (long, None), (codec_frames, 55 * 1280),
                          (half_frame_off, 2 * (50 * 1280 + 80)), (odd_frames, 441 * 160)):
        clip, starts = dnsmos_scorer._clip(audio)
        assert repeat_period(len(audio), len(clip) // len(audio)) == period
        assert isinstance(dnsmos_scorer._p835, SharedWindowP835)
        shared = dnsmos_scorer._p835.window_scores(clip, starts, max_windows_per_call=3, period=period)
        alone = np.concatenate([whole.run(None, {"input_1": clip[s:s + 144_160][np.newaxis]})[0] for s in starts])
        assert len(starts) > 1
        np.testing.assert_allclose(shared, alone, rtol=0, atol=1e-5)
        if audio is long:
            assert starts[-1] // 160 + 900 > 2 * SEGMENT_FRAMES
    with pytest.raises(ValueError, match="does not repeat every 1280 samples"):
        dnsmos_scorer._p835.window_scores(clip, starts, max_windows_per_call=3, period=1280)


def test_dnsmos_p808_shared_windows_equal_the_whole_model_window_by_window(dnsmos_scorer: DnsmosScorer) -> None:
    """Runs of windows with the same loudest bin share the P.808 body: a doubled clip of Qwen3-TTS's length
    (55 codec frames of 1280 samples); 20 copies of it, 88 s, in runs of at most 32 windows; and 12 s of
    speech with a click in its first second, loudest in the first window only, which runs through the whole
    model alone."""
    from audio_reward.scorer_server.signals.p808 import MAX_SHARED_WINDOWS

    codec_frames = speech_16k(SENTENCES[3])[:55 * 1280]
    click = np.concatenate([speech_16k(text) for text in SENTENCES])
    click[8_000:8_016] = 0.9
    for audio in (codec_frames, np.tile(codec_frames, 20), click):
        clip, starts = dnsmos_scorer._clip(audio)
        features, references = dnsmos_scorer._p808_inputs(clip, starts)
        features = [f.astype(np.float32) for f in features]
        assert isinstance(dnsmos_scorer._p808, SharedWindowP808)
        got = dnsmos_scorer._p808.window_scores(features, references, [s // 160 for s in starts],
                                                max_windows_per_call=3)
        alone = np.concatenate([dnsmos_scorer._p808.whole.session.run(None, {"input_1": f[np.newaxis]})[0][:, 0]
                                for f in features])
        np.testing.assert_allclose(got, alone, rtol=0, atol=1e-5)
        assert len(starts) > 2 and references[1] == references[2]  # a run that shares
        assert (references[0] != references[1]) == (audio is click)
    assert len(dnsmos_scorer._clip(np.tile(codec_frames, 20))[1]) > MAX_SHARED_WINDOWS


def test_dnsmos_of_a_batch_equals_each_clip_alone(dnsmos_scorer: DnsmosScorer, clips: list[np.ndarray]) -> None:
    batch = [speech_16k(text) for text in SENTENCES] + clips  # 4.5 windows a clip: several ONNX calls
    assert sum(len(dnsmos_scorer._clip(c)[1]) for c in batch) > dnsmos_scorer.max_windows_per_call
    for clip, together in zip(batch, dnsmos_scorer.score_sync(batch), strict=True):
        (alone,) = dnsmos_scorer.score_sync([clip])
        for field in ("ovrl", "sig", "bak", "p808"):
            assert getattr(together, field) == pytest.approx(getattr(alone, field), abs=1e-5)


def test_dnsmos_whole_model_windows_give_the_shared_scores(dnsmos_scorer: DnsmosScorer,
                                                           clips: list[np.ndarray]) -> None:
    """``quality_windows whole`` (the whole models per window, as speechmos runs them) against the shared parts,
    on clips that take each shared path: a repeating doubled clip, one of Qwen3-TTS's lengths, and 12 s."""
    whole = create_quality_scorer("dnsmos", cpu_threads=1, windows="whole")
    assert isinstance(whole, DnsmosScorer)
    whole.load()
    assert whole.info.extra["windows"] == "whole" and dnsmos_scorer.info.extra["windows"] == "shared"
    batch = [*clips, speech_16k(SENTENCES[3])[:55 * 1280], np.concatenate([clips[0]] * 4)]
    for together, alone in zip(dnsmos_scorer.score_sync(batch), whole.score_sync(batch), strict=True):
        for field in ("ovrl", "sig", "bak", "p808"):
            assert getattr(together, field) == pytest.approx(getattr(alone, field), abs=1e-5)


def test_an_unknown_quality_model_is_refused() -> None:
    assert create_quality_scorer("none") is None and create_speaker_encoder("none") is None
    with pytest.raises(ValueError, match="unknown quality model 'pesq'"):
        create_quality_scorer("pesq")


def test_a_wavlm_xvector_checkpoint_loads_and_embeds_through_the_interface(tmp_path: Path,
                                                                           clips: list[np.ndarray]) -> None:
    pytest.importorskip("transformers", reason="the transformers extra is not installed")
    from tests.testkit.random_checkpoints import build_random_wavlm_xvector

    folder = build_random_wavlm_xvector(tmp_path / "wavlm-sv")
    encoder = create_speaker_encoder(str(folder))
    assert isinstance(encoder, WavLMXVectorEncoder)
    encoder.load()
    encoder.warmup()
    assert encoder.info.engine == "wavlm-xvector" and encoder.dimensions == 24
    batch = encoder.embed_sync(clips)
    assert batch.shape == (len(clips), 24)
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(encoder.embed_sync([clips[1]])[0], encoder.embed_sync([clips[1]])[0])
    encoder.close()
