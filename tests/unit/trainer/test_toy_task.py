"""The toy task's pieces: what each word sounds like to the instant engine, the settings a run refuses, and the
launcher's overrides composed against verl's own trainer config."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from audio_reward.trainer_plugin.toy_task.speech import WORDS, number_of, speak, target_text, word_number
from audio_reward.trainer_plugin.toy_task.train import LoopSettings, RunPaths, parse_args, trainer_overrides


def test_the_instant_engine_hears_the_first_toy_word_said() -> None:
    audio, rate = speak(["the", "green", "red"], "instant")
    assert rate == 16_000 and audio.dtype == np.float32
    assert number_of(audio) == word_number("green") == 2222
    assert target_text("green", "instant") == "item 2222"
    assert number_of(speak(["please"], "instant")[0]) == 0  # no toy word: a number no target has
    assert len({target_text(w, "instant") for w in WORDS}) == len(WORDS)


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng (apt-get install -y espeak-ng)")
def test_espeak_speech_is_audio_and_silence_is_silent() -> None:
    audio, rate = speak(["blue"], "espeak")
    assert rate > 8000 and np.abs(audio).max() > 0.01
    silence, _ = speak([], "espeak")
    assert not silence.any()
    assert target_text("blue", "espeak") == "blue"


@pytest.mark.parametrize(("field", "value", "message"), [
    ("device", "tpu", "device must be cpu or cuda"),
    ("speech", "opera", "speech must be one of"),
    ("failure_policy", "ignore", "failure_policy must be raise or mask"),
    ("steps", 0, "steps must be >= 1"),
    ("updates_per_step", 3, "must divide prompts_per_step"),
])
def test_a_bad_setting_is_refused_with_its_name(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LoopSettings(Path("out"), "http://127.0.0.1:8000", **{field: value})  # type: ignore[arg-type]


def test_overrides_after_the_separator_reach_the_trainer_last() -> None:
    settings = parse_args(["out", "--scorer-url", "http://x", "--steps", "3", "--", "trainer.nnodes=1"])
    assert settings.steps == 3 and settings.overrides == ["trainer.nnodes=1"]
    assert trainer_overrides(settings, RunPaths(settings.out))[-1] == "trainer.nnodes=1"


@pytest.mark.parametrize("policy", ["raise", "mask"])
def test_the_overrides_compose_against_verls_trainer_config(policy: str, tmp_path: Path) -> None:
    pytest.importorskip("verl", reason="verl's config tree is in the trainer environment (scripts/envs/verl.sh)")
    from hydra import compose, initialize_config_module

    settings = LoopSettings(tmp_path, "http://127.0.0.1:9", failure_policy=policy)
    overrides = [o for o in trainer_overrides(settings, RunPaths(tmp_path)) if not o.startswith("hydra.")]
    with initialize_config_module("verl.trainer.config", version_base=None):
        config = compose("ppo_trainer", overrides=overrides)
    assert config.algorithm.adv_estimator == ("grpo_masked" if policy == "mask" else "grpo")
    assert config.reward.audio_reward.failure_policy == policy
    assert config.actor_rollout_ref.actor.ppo_mini_batch_size * settings.group_size == (
        config.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu)
    sampler = config.trainer.v1.sampler.custom_sampler.name
    assert sampler == ("FailClosedSyncReplayBuffer" if policy == "raise" else None)
