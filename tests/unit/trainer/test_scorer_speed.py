"""The pre-flight's step estimate: the step's clips from the config, the probe clip, the rate from /v1/info."""

from __future__ import annotations

import numpy as np
import pytest

from audio_reward.trainer_plugin import scorer_speed
from audio_reward.trainer_plugin.recipes.overrides import TTS_MAX_FRAMES


def tts_config(**trainer: object) -> dict[str, object]:
    pipeline = {"vllm_omni": {"pipeline_name": "qwen3_tts_rl"}}
    return {"data": {"train_batch_size": 4, "max_response_length": TTS_MAX_FRAMES},
            "actor_rollout_ref": {"rollout": {"n": 8, "engine_kwargs": pipeline}}, "trainer": trainer}


def test_a_tts_step_is_prompts_times_group_of_the_longest_audio_the_codec_writes() -> None:
    load = scorer_speed.step_load(tts_config())
    assert load is not None and load.clips == 32 and load.max_audio_s == pytest.approx(360 / 12.5)
    assert load.audio_s == pytest.approx(32 * 28.8)
    assert scorer_speed.step_estimate(load, 10.0) == (
        "a step's 4 prompts × 8 = 32 clips of up to 28.8 s (922 audio s) take about 92 s to score at that rate")


def test_without_a_known_clip_length_or_batch_there_is_no_estimate_and_it_says_why() -> None:
    other = {"data": {"train_batch_size": 2, "max_response_length": 64}, "actor_rollout_ref": {"rollout": {"n": 4}}}
    load = scorer_speed.step_load(other)  # a token length that is not codec frames says nothing of seconds
    assert load is not None and load.max_audio_s is None and load.audio_s is None
    assert scorer_speed.step_estimate(load, 10.0) == (
        "a step sends 2 prompts × 4 = 8 clips (their length is not known from this config)")
    assert scorer_speed.step_load({"reward": {}}) is None
    assert scorer_speed.step_estimate(None, 1.0) == "no training batch in the config to estimate a step from"


def test_the_trainer_is_on_gpus_unless_verl_runs_on_the_cpu() -> None:
    assert scorer_speed.trainer_on_gpu(tts_config(), environ={})  # verl's trainer.device defaults to cuda
    assert not scorer_speed.trainer_on_gpu(tts_config(device="cpu"), environ={})
    assert not scorer_speed.trainer_on_gpu(tts_config(), environ={"VERL_PLATFORM": "cpu"})  # the CPU mode


def test_the_rate_is_read_from_info_only_once_measured() -> None:
    assert scorer_speed.measured_rate({}) is None  # a server from before the field
    fresh = {"audio_seconds_per_second": None, "audio_seconds": 0.0, "busy_seconds": 0.0, "utterances": 0}
    assert scorer_speed.measured_rate({"throughput": fresh}) is None
    served = {**fresh, "audio_seconds_per_second": 31.5, "utterances": 40}
    assert scorer_speed.measured_rate({"throughput": served}) == (31.5, 40)


def test_the_probe_clip_is_the_example_speech_repeated_to_the_length_asked() -> None:
    waveform, rate, text = scorer_speed.probe_clip(28.8)
    assert rate == 16_000 and waveform.dtype == np.float32 and len(waveform) == int(28.8 * 16_000)
    assert text.count("The quick brown fox jumps over the lazy dog.") == 9  # 3.3 s a sentence with its pause
    assert np.abs(waveform).max() > 0.1  # speech, not silence
    short, _, said = scorer_speed.probe_clip(1.0)
    assert len(short) == 16_000 and said == "The quick brown fox jumps over the lazy dog."


@pytest.mark.parametrize(("raw", "budget"), [("", 60.0), ("0", 0.0), ("12.5", 12.5)])
def test_the_probe_budget_comes_from_its_variable(raw: str, budget: float) -> None:
    assert scorer_speed.probe_budget({"AUDIO_REWARD_PREFLIGHT_PROBE_S": raw}) == budget


@pytest.mark.parametrize("raw", ["soon", "-1", "nan"])
def test_a_bad_probe_budget_is_one_line_naming_the_variable(raw: str) -> None:
    with pytest.raises(ValueError, match=r"^AUDIO_REWARD_PREFLIGHT_PROBE_S=.*: give seconds \(0: no probe\)$"):
        scorer_speed.probe_budget({"AUDIO_REWARD_PREFLIGHT_PROBE_S": raw})


def test_the_packaged_probe_speech_is_the_example_clip() -> None:
    import soundfile as sf

    from tests.testkit.server import REPO_ROOT

    example, rate = sf.read(REPO_ROOT / "examples" / "speech.wav", dtype="int16")
    flac = REPO_ROOT / "audio_reward" / "trainer_plugin" / "probe_speech.flac"
    packaged, packaged_rate = sf.read(flac, dtype="int16")
    assert packaged_rate == rate and np.array_equal(packaged, example)  # FLAC: lossless, a third of the bytes
