"""The toy task's pieces: what each word sounds like to the instant engine, the settings a run refuses, and the
launcher's overrides composed against verl's own trainer config."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from audio_reward.trainer_plugin.toy_task import supervise
from audio_reward.trainer_plugin.toy_task.speech import HELDOUT_WORDS, TRAIN_WORDS, WORDS, speak, text_of
from audio_reward.trainer_plugin.toy_task.train import LoopSettings, RunPaths, parse_args, trainer_overrides


@pytest.mark.parametrize("said", [[], ["blue"], ["blue", "please"], ["no", "no", "no"]])
def test_the_instant_speech_carries_exactly_the_words_said(said: list[str]) -> None:
    audio, rate = speak(said, "instant")
    assert rate == 16_000 and audio.dtype == np.float32 and len(audio) >= 3200
    assert text_of(audio) == " ".join(said)


def test_held_out_words_are_never_training_words() -> None:
    assert len(HELDOUT_WORDS) >= 16 and not set(HELDOUT_WORDS) & set(TRAIN_WORDS)
    assert len(set(WORDS)) == len(WORDS)


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng (apt-get install -y espeak-ng)")
def test_espeak_speech_is_audio_and_silence_is_silent() -> None:
    audio, rate = speak(["blue"], "espeak")
    assert rate > 8000 and np.abs(audio).max() > 0.01
    silence, _ = speak([], "espeak")
    assert not silence.any()


def test_the_thinker_launcher_takes_overrides_after_the_separator() -> None:
    """``toy_loop.sh`` always passes ``-- "$@"``; the thinker's parser refused it (issue 36)."""
    pytest.importorskip("verl", reason="the thinker loop's module imports verl (scripts/envs/verl.sh)")
    from audio_reward.trainer_plugin.toy_task.thinker import parse_args as thinker_args

    settings = thinker_args(["out", "--scorer-url", "http://x", "--", "trainer.nnodes=1"])
    assert settings.overrides == ["trainer.nnodes=1"] and settings.steps == 3
    assert thinker_args(["out", "--"]).overrides == []


@pytest.mark.parametrize(("record", "line"), [
    ({"step": 0, "val_reward_mean": 0.0139, "step_s": None}, "before training: val 0.014"),
    ({"step": 3, "reward_mean": 0.5, "val_reward_mean": None, "step_s": 14.21}, "step 3/12  reward 0.500  14.2 s"),
    ({"step": 12, "reward_mean": None, "val_reward_mean": 1.0, "step_s": 3.0},
     "step 12/12  reward masked  val 1.000  3.0 s"),
])
def test_a_console_line_per_step(record: dict, line: str) -> None:
    assert supervise.step_line(record, 12) == line


@pytest.mark.parametrize(("log", "line"), [
    ("...\nTraceback (most recent call last):\n  File x\nValueError: bad value\n(raylet) noise\n",
     "ValueError: bad value"),
    ("Could not override 'trainer.nope'.\nTo append to your config use +trainer.nope=1\nKey 'nope' is not in "
     "struct\n    full_key: trainer.nope\nSet the environment variable HYDRA_FULL_ERROR=1 for a complete stack "
     "trace.\n", "Could not override 'trainer.nope'. Key 'nope' is not in struct"),
    ("all fine\n", None),
    ("(TaskRunner pid=7) audio_reward.trainer_plugin.fail_closed.RewardFailureError: 1 GRPO group(s) failed\n"
     "  [train] uid=a: scorer down\nnot a group\nValueError: later\n",
     "1 GRPO group(s) failed\n  [train] uid=a: scorer down"),
])
def test_the_failure_line_is_the_error_itself(tmp_path: Path, log: str, line: str | None) -> None:
    (tmp_path / "train.log").write_text(log)
    assert supervise.failure_line(tmp_path / "train.log") == line


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
