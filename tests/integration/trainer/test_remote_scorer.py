"""The plugin's scoring core against a real scorer on loopback (no verl needed)."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

from audio_reward.futures import Batcher
from audio_reward.trainer_plugin.remote_scorer import AudioRewardScorer, ScoringFailedError
from audio_reward.trainer_plugin.samples import AudioSample
from audio_reward.trainer_plugin.settings import PluginSettings
from tests.testkit.speech import synth_speech

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Please call Stella and ask her to bring these things.",
    "A rainbow is a division of white light into many beautiful colors.",
]


def _sample(text: str, spoken: str | None = None, sid: str = "s") -> AudioSample:
    wave, rate = synth_speech(spoken or text)
    return AudioSample(wave, rate, text, "en", {"index": sid, "split": "train"}, sample_id=f"index={sid}")


async def test_coalescer_batches_concurrent_calls_and_routes_errors() -> None:
    seen: list[list[int]] = []

    async def batch_fn(items):
        seen.append(list(items))
        return [ValueError(f"bad {i}") if i < 0 else i * 10 for i in items]

    co: Batcher[int, int] = Batcher(batch_fn, window_s=0.01, max_batch=4)
    results = await asyncio.gather(*(co.submit(i) for i in (1, 2, -3, 4, 5)), return_exceptions=True)
    assert results[:2] == [10, 20] and results[3:] == [40, 50]
    assert isinstance(results[2], ValueError) and str(results[2]) == "bad -3"
    assert seen == [[1, 2, -3, 4], [5]]  # max_batch flushes at once, the window flushes the rest


async def test_concurrent_samples_go_out_as_one_batch_with_stable_keys(scorer_url: str) -> None:
    scorer = AudioRewardScorer(PluginSettings(server_url=scorer_url, coalesce_window_ms=20))
    try:
        samples = [_sample(t, sid=str(i)) for i, t in enumerate(TEXTS)]
        mismatched = _sample(TEXTS[0], spoken="Completely different words were spoken here today.", sid="x")
        results = await asyncio.gather(*(scorer.score(s) for s in [*samples, mismatched]))
    finally:
        await scorer.aclose()
    assert scorer.batches == [4]
    keys = {tuple(r.extra_info) for r in results}
    assert keys == {("cer", "wer", "duration_s", "duration_ratio", "score_failed")}
    for r in results[:3]:
        assert r.extra_info["cer"] < 0.1 and r.score > 0.85
        assert r.extra_info["score_failed"] == 0.0
    assert results[3].score < min(r.score for r in results[:3]) - 0.3
    assert results[3].extra_info["cer"] > 0.3


async def test_raise_policy_names_the_sample(dead_url: str) -> None:
    scorer = AudioRewardScorer(PluginSettings(server_url=dead_url, max_retries=0, timeout=5))
    try:
        with pytest.raises(ScoringFailedError, match=r"index=7 .*'The quick brown fox.*ScorerUnavailableError"):
            await scorer.score(AudioSample(np.zeros(16000, np.float32), 16000, TEXTS[0], sample_id="index=7"))
    finally:
        await scorer.aclose()


async def test_mask_policy_marks_the_sample_failed_never_zero(dead_url: str) -> None:
    scorer = AudioRewardScorer(PluginSettings(server_url=dead_url, max_retries=0, timeout=5, failure_policy="mask"))
    try:
        result = await scorer.score(AudioSample(np.zeros(16000, np.float32), 16000, TEXTS[0], sample_id="index=7"))
    finally:
        await scorer.aclose()
    assert math.isnan(result.score)
    info = result.extra_info
    assert info["score_failed"] == 1.0 and all(math.isnan(info[k]) for k in ("cer", "wer"))


async def test_reward_function_takes_verl_signature_and_audio_from_extra_info(scorer_url: str) -> None:
    from audio_reward.trainer_plugin.reward_fn import compute_score
    from audio_reward.trainer_plugin.verl_omni_score import close_cached_clients

    wave, rate = synth_speech(TEXTS[1])
    try:
        result = await compute_score(
            data_source="tts_cer", solution_str="<codec tokens>", ground_truth=TEXTS[1],
            extra_info={"audio": wave, "audio_sample_rate": rate, "index": "3", "num_turns": None},
            server_url=scorer_url, reward_router_address=None,
        )
        # What verl-omni's AudioRewardManager adds when a reward model is configured: accepted, not used.
        with pytest.warns(RuntimeWarning) as unused:
            with_model = await compute_score(
                data_source="tts_cer", solution_str="", ground_truth=TEXTS[1], solution_audio=(wave, rate),
                server_url=scorer_url, reward_router_address="127.0.0.1:9", reward_model_tokenizer=None,
                model_name="rm",
            )
    finally:
        await close_cached_clients()
    assert result["score"] > 0.85 and result["cer"] < 0.1
    assert with_model["score"] == pytest.approx(result["score"])
    # ... and the user is told that the reward model serves nothing here
    assert [str(w.message) for w in unused] == [
        "a reward model is configured (rm at 127.0.0.1:9) and verl passes its router to compute_score, which scores "
        "with the audio-reward scorer only: the reward model serves no request of this reward"]


async def test_a_misspelt_reward_kwarg_is_an_error_not_a_lost_setting(scorer_url: str) -> None:
    from audio_reward.trainer_plugin.reward_fn import compute_score
    from audio_reward.trainer_plugin.verl_omni_score import close_cached_clients

    wave, rate = synth_speech(TEXTS[1])
    try:
        with pytest.raises(TypeError, match=r"'time_out' \(did you mean 'timeout'\?\).*server_url, solution_audio"):
            await compute_score(data_source="tts_cer", solution_str="", ground_truth=TEXTS[1],
                                extra_info={"audio": wave, "audio_sample_rate": rate},
                                server_url=scorer_url, time_out=5.0)
        with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) 'colour'; it takes"):
            await compute_score(ground_truth=TEXTS[1], solution_audio=(wave, rate), server_url=scorer_url, colour=1)
    finally:
        await close_cached_clients()


async def test_a_rows_reference_recording_enters_the_reward(signals_url: str, tmp_path) -> None:
    import soundfile as sf

    from tests.testkit.speech import espeak_speech

    voice = "en-us+f4"
    sf.write(tmp_path / "voice.wav", *espeak_speech(TEXTS[2], voice))
    own, own_rate = espeak_speech(TEXTS[0], voice)
    other, other_rate = synth_speech(TEXTS[0])
    reference = str(tmp_path / "voice.wav")
    samples = [AudioSample(audio, rate, TEXTS[0], "en", sample_id=f"index={i}", speaker_reference=reference)
               for i, (audio, rate) in enumerate([(own, own_rate), (other, other_rate)])]
    settings = PluginSettings(server_url=signals_url, reward={"speaker_weight": 0.5},
                              diagnostics=("cer", "speaker_similarity", "reward_speaker"))
    scorer = AudioRewardScorer(settings)
    try:
        own_r, other_r = await asyncio.gather(*(scorer.score(s) for s in samples))
        missing = await AudioRewardScorer(PluginSettings(server_url=signals_url, failure_policy="mask")).score(
            AudioSample(own, own_rate, TEXTS[0], speaker_reference=str(tmp_path / "absent.wav")))
    finally:
        await scorer.aclose()
    assert own_r.extra_info["speaker_similarity"] > other_r.extra_info["speaker_similarity"] + 0.15
    for r in (own_r, other_r):
        info = r.extra_info
        assert r.score == pytest.approx(0.5 * r.diagnostics["reward_asr"] + 0.5 * info["reward_speaker"])
    assert math.isnan(missing.score) and missing.extra_info["score_failed"] == 1.0


async def test_logging_a_dnsmos_field_asks_the_scorer_for_it(signals_url: str) -> None:
    audio, rate = synth_speech(TEXTS[0])
    logged = AudioRewardScorer(PluginSettings(server_url=signals_url, diagnostics=("cer", "dnsmos_ovrl")))
    plain = AudioRewardScorer(PluginSettings(server_url=signals_url, diagnostics=("cer",)))
    try:
        with_quality = await logged.score(AudioSample(audio, rate, TEXTS[0], "en"))
        without = await plain.score(AudioSample(audio, rate, TEXTS[0], "en"))
    finally:
        await logged.aclose()
        await plain.aclose()
    assert 1.0 <= with_quality.extra_info["dnsmos_ovrl"] <= 5.0
    assert "dnsmos_ovrl" not in without.diagnostics  # not logged, not measured
    assert with_quality.score == without.score  # measured, not weighed
